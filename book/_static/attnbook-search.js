/*
 * Readable result snippets on the book's search page (book/_ext/attnbook_search.py loads this
 * file on search.html only, after Sphinx's searchtools.js).
 *
 * searchtools.js makes each result's snippet from the result page's HTML, fetched as a file:
 * Search.htmlToText takes the text of [role="main"]. Two things made those snippets hard to read:
 *
 * - the math is TeX source there, because MathJax typesets it only in a loaded page: a reader saw
 *   "\(\operatorname{softmax}(QK^\top/\sqrt{d_k})\,V\)" where the page shows the formula;
 * - with pydata-sphinx-theme, [role="main"] also holds the page's contents list and its
 *   previous/next links, so a snippet often began "Contents" and the section titles (or, past
 *   them, with the language switch and the "Run this chapter yourself" line).
 *
 * This script wraps Search.htmlToText (it does not copy it): before Sphinx's own function runs,
 * the page's article alone stands for [role="main"] and each math element (span.math, div.math,
 * as sphinx.ext.mathjax writes them) holds texToText of its TeX, "softmax(QKᵀ/√d_k) V"
 * (superscripts in Unicode where it has them, subscripts as a reader types them: d_k,
 * x_(t+1)); after it, a run of white space is one space, so the snippet's 240 characters are
 * text. The same for both editions. Terms do not run together: a fraction before another operand
 * is bracketed, "(1/S) I", a root or script spaced, "√2 3", "e^x y"; a cases block closes with
 * "}", rows of aligned equations are set off by "; " unless punctuation joins them. Math nested
 * past MAX_DEPTH (or longer than MAX_LENGTH) is returned as its words without TeX (plainText),
 * so the time stays linear in the page's length.
 *
 * Defines window.attnbookSearch = {texToText, readableHtml}. Plain script, no modules and no
 * build step: tests/book/test_search_snippets.py runs texToText in Node (node:vm, no DOM), and
 * tests/browser/test_browser_search.py the search page in Chromium.
 */
(function (global) {
  'use strict';
  if (global.attnbookSearch) { return; }

  // Commands that stand for one character (or a word) and take no argument.
  var SYMBOLS = {
    alpha: 'α', beta: 'β', gamma: 'γ', delta: 'δ', epsilon: 'ϵ', varepsilon: 'ε', zeta: 'ζ',
    eta: 'η', theta: 'θ', vartheta: 'ϑ', iota: 'ι', kappa: 'κ', lambda: 'λ', mu: 'μ', nu: 'ν',
    xi: 'ξ', pi: 'π', rho: 'ρ', sigma: 'σ', tau: 'τ', upsilon: 'υ', phi: 'ϕ', varphi: 'φ',
    chi: 'χ', psi: 'ψ', omega: 'ω', Gamma: 'Γ', Delta: 'Δ', Theta: 'Θ', Lambda: 'Λ', Xi: 'Ξ',
    Pi: 'Π', Sigma: 'Σ', Upsilon: 'Υ', Phi: 'Φ', Psi: 'Ψ', Omega: 'Ω',
    times: '×', cdot: '·', cdots: '⋯', ldots: '…', dots: '…', dotsc: '…', dotsb: '⋯',
    le: '≤', leq: '≤', ge: '≥', geq: '≥', ne: '≠', neq: '≠', ll: '≪', gg: '≫',
    approx: '≈', sim: '∼', simeq: '≃', equiv: '≡', propto: '∝', in: '∈', notin: '∉', ni: '∋',
    subset: '⊂', subseteq: '⊆', supset: '⊃', cup: '∪', cap: '∩', setminus: '∖',
    to: '→', rightarrow: '→', leftarrow: '←', gets: '←', leftrightarrow: '↔',
    Rightarrow: '⇒', implies: '⇒', Leftarrow: '⇐', iff: '⇔', Leftrightarrow: '⇔', mapsto: '↦',
    infty: '∞', partial: '∂', nabla: '∇', odot: '⊙', otimes: '⊗', oplus: '⊕', pm: '±', mp: '∓',
    mid: '|', wedge: '∧', land: '∧', vee: '∨', lor: '∨', lnot: '¬', neg: '¬', forall: '∀',
    exists: '∃', ell: 'ℓ', top: '⊤', bot: '⊥', perp: '⊥', circ: '∘', star: '⋆', ast: '∗',
    lVert: '‖', rVert: '‖', Vert: '‖', lvert: '|', rvert: '|', vert: '|', lfloor: '⌊',
    rfloor: '⌋', lceil: '⌈', rceil: '⌉', langle: '⟨', rangle: '⟩', prime: '′', emptyset: '∅',
    bmod: ' mod ', colon: ':', hbar: 'ℏ',
    // one-character commands
    '{': '{', '}': '}', '%': '%', '$': '$', '&': '&', '#': '#', '_': '_', '|': '‖',
    ',': ' ', ';': ' ', ':': ' ', '>': ' ', ' ': ' ', '!': '', quad: ' ', qquad: ' '
  };
  // Operator names written as words, as TeX sets them.
  var FUNCTIONS = [
    'log', 'ln', 'lg', 'exp', 'sin', 'cos', 'tan', 'sinh', 'cosh', 'tanh', 'max', 'min', 'sup',
    'inf', 'lim', 'det', 'dim', 'ker', 'deg', 'gcd', 'arg', 'Pr', 'argmax', 'argmin'
  ];
  // Large operators: a space before them, so "\frac{1}{d}\sum" reads "1/d ∑".
  var LARGE = {sum: '∑', prod: '∏', int: '∫', oint: '∮', bigcup: '⋃', bigcap: '⋂'};
  // Commands that only size or space what follows them.
  var IGNORED = [
    'left', 'right', 'middle', 'big', 'Big', 'bigg', 'Bigg', 'bigl', 'bigr', 'Bigl', 'Bigr',
    'biggl', 'biggr', 'Biggl', 'Biggr', 'displaystyle', 'textstyle', 'scriptstyle', 'limits',
    'nolimits', 'nonumber', 'notag', 'allowbreak', 'strut'
  ];
  // One argument, set in a font: the argument itself.
  var FONTS = [
    'mathrm', 'mathit', 'mathbf', 'mathsf', 'mathtt', 'mathcal', 'mathscr', 'mathfrak',
    'boldsymbol', 'bm', 'operatorname', 'mathop'
  ];
  // One argument in text mode: its characters as written (spaces and hyphens kept).
  var TEXTS = ['text', 'textrm', 'textit', 'textbf', 'textsf', 'texttt', 'mbox', 'emph', 'hbox'];
  var DOUBLE_STRUCK = {R: 'ℝ', N: 'ℕ', Z: 'ℤ', Q: 'ℚ', C: 'ℂ', P: 'ℙ', E: '𝔼', '1': '𝟙'};
  // Accents: a combining mark after a one-character argument.
  var ACCENTS = {
    tilde: '\u0303', widetilde: '\u0303', hat: '\u0302', widehat: '\u0302', bar: '\u0304',
    overline: '\u0305', vec: '\u20d7', dot: '\u0307', ddot: '\u0308', underline: ''
  };
  // Environments with rows and columns, and the brackets around them.
  var MATRICES = {
    matrix: ['', ''], smallmatrix: ['', ''], pmatrix: ['(', ')'], bmatrix: ['[', ']'],
    Bmatrix: ['{', '}'], vmatrix: ['|', '|'], Vmatrix: ['‖', '‖'], cases: ['{ ', ' }'],
    array: ['', '']
  };
  // Environments of equations, one a row: a row that ends in punctuation or words (\text{i.e.})
  // or begins with a relation ("a = b = c") follows with a space, another is set off by "; "
  // (ROW_BREAK marks them for texToText).
  var ROWS = [
    'aligned', 'align', 'alignat', 'alignedat', 'gather', 'gathered', 'split', 'multline',
    'eqnarray', 'flalign'
  ];
  var ROW_BREAK = '\uE000';
  // Unicode superscripts (x², QKᵀ, 2⁻¹); other superscripts are written ^x or ^(…), and
  // subscripts always _x or _(…): d_k, x_(t+1), as a reader types them.
  var SUPERSCRIPTS = {
    '0': '⁰', '1': '¹', '2': '²', '3': '³', '4': '⁴', '5': '⁵', '6': '⁶', '7': '⁷', '8': '⁸',
    '9': '⁹', '+': '⁺', '−': '⁻', '=': '⁼', '(': '⁽', ')': '⁾', n: 'ⁿ', i: 'ⁱ', T: 'ᵀ', '⊤': 'ᵀ'
  };

  function has(list, name) { return list.indexOf(name) >= 0; }

  // table[key] if the table itself holds it (never an Object.prototype name such as valueOf).
  function own(table, key) {
    return Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined;
  }

  // Whether s is one bracketed group, "(…)" whose first bracket closes at its end.
  function bracketed(s) {
    if (s.charAt(0) !== '(' || s.charAt(s.length - 1) !== ')') { return false; }
    for (var i = 0, depth = 0; i < s.length; i++) {
      if (s.charAt(i) === '(') { depth++; }
      if (s.charAt(i) === ')') { depth--; }
      if (depth === 0 && i < s.length - 1) { return false; }
    }
    return true;
  }

  // Whether s is one term: no operator or space outside its brackets (√(σ² + ε), f(x, y)).
  // One pass over s (a bracket that is never closed, or closed by the other kind, counts as
  // outside), so that nested brackets cost no more than flat ones.
  function oneTerm(s) {
    var open = [], inside = new Array(s.length + 1).fill(0);
    for (var i = 0; i < s.length; i++) {
      var c = s.charAt(i);
      if (c === '(' || c === '[') { open.push(i); }
      if ((c === ')' || c === ']') && open.length &&
          s.charAt(open[open.length - 1]) === (c === ')' ? '(' : '[')) {
        inside[open.pop()]++;
        inside[i + 1]--;
      }
    }
    var outside = '';
    for (var j = 0, depth = 0; j < s.length; j++) {
      depth += inside[j];
      if (depth === 0) { outside += s.charAt(j); }
    }
    return !/[\s+\-−×·=,/<>≤≥±∓:;]/.test(outside);
  }

  // s as one operand of "/" or "√": in brackets unless it is one term.
  function operand(s) {
    var t = s.replace(/\s+/g, ' ').trim().replace(/∂ /g, '∂');
    return oneTerm(t) ? t : '(' + t + ')';
  }

  // A superscript (kind "^") or subscript ("_") of text s.
  function script(kind, s) {
    var t = s.replace(/\s+/g, ' ').trim().replace(/\s*([=+−×·∈∉≤≥<>,:])\s*/g, '$1');
    if (t === '' || kind === '^' && /^′+$/.test(t)) { return t; }  // x^{\prime}: x′
    var chars = Array.from(t);
    var letters = chars.filter(function (c) { return /\p{L}/u.test(c); }).length;
    if (kind === '^' && letters <= 1 && chars.every(function (c) { return own(SUPERSCRIPTS, c); })) {
      return chars.map(function (c) { return SUPERSCRIPTS[c]; }).join('');
    }
    return kind + (/^[\p{L}\p{N}′]+$/u.test(t) || oneTerm(t) && bracketed(t) ? t : '(' + t + ')');
  }

  // How deep groups and arguments may nest, and how long the TeX of one math element may be,
  // before texToText gives up on its structure (plainText). The book nests a few levels and
  // writes a few hundred characters; the limits keep a pathological page linear in its length
  // (each level re-reads the text of the levels inside it) and the recursion off the stack limit.
  var MAX_DEPTH = 50;
  var MAX_LENGTH = 20000;
  var TOO_DEEP = {};  // thrown past MAX_DEPTH, caught by texToText

  var FRACTIONS = ['frac', 'dfrac', 'tfrac', 'cfrac'];

  // What a glued term (a fraction, a root, a script written _x or ^(…)) must not run into: the
  // start of another operand, "1/2x" or "√23" or "e^xy". A fraction is bracketed before it
  // (also across a space: "(1/S) I"), a root or script is followed by a space ("√2 3",
  // "e^x y"); not before "(" (f_θ(x)), a superscript (x_i²) or a large operator (1/d ∑).
  var SUPERSCRIPT_CHARS = /[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵀ]/u;
  function startsOperand(kind, s) {
    var c = Array.from(s)[0] || '';
    if (SUPERSCRIPT_CHARS.test(c)) { return false; }
    return /[\p{L}\p{N}√∛∜∂∇]/u.test(c) || kind === 'frac' && c === '(';
  }

  function Parser(src) {
    this.s = src;
    this.i = 0;
    this.envs = [];
    this.depth = 0;
    this.afterText = false;  // whether the last thing written was text-mode words
  }

  Parser.prototype.enter = function () {
    if (++this.depth > MAX_DEPTH) { throw TOO_DEEP; }
  };

  Parser.prototype.peek = function () { return this.s.charAt(this.i); };

  // The text of TeX src found inside this one (an optional argument, math inside \text), at
  // this parser's depth.
  Parser.prototype.sub = function (src) {
    var parser = new Parser(src);
    parser.depth = this.depth;
    return parser.seq(null);
  };

  Parser.prototype.inMatrix = function () {
    return this.envs.length > 0 && own(MATRICES, this.envs[this.envs.length - 1]) !== undefined;
  };

  Parser.prototype.skipSpace = function () {
    while (this.i < this.s.length && /\s/.test(this.peek())) { this.i++; }
  };

  // The name after a backslash: letters (and a star, \operatorname*), or one other character.
  Parser.prototype.name = function () {
    var m = /^[A-Za-z]+\*?/.exec(this.s.slice(this.i));
    var name = m ? m[0] : this.s.charAt(this.i);
    this.i += name.length || 1;
    return name;
  };

  // A text-mode argument: the characters inside the braces, with TeX's escapes undone.
  Parser.prototype.rawGroup = function () {
    this.skipSpace();
    if (this.peek() !== '{') { return this.arg(); }
    var start = ++this.i;
    for (var depth = 0; this.i < this.s.length; this.i++) {
      var c = this.s.charAt(this.i);
      if (c === '\\') { this.i++; continue; }
      if (c === '{') { depth++; }
      if (c === '}') {
        if (depth === 0) { break; }
        depth--;
      }
    }
    var body = this.s.slice(start, this.i);
    this.i++;
    var self = this;
    return body.replace(/\\([{}%$&#_])/g, '\uE001$1')  // an escaped character, kept below
      .replace(/(^|[^\uE001])\$([^$]*)\$/g, function (m, before, math) {  // math inside text
        return before + self.sub(math);
      })
      .replace(/\\([A-Za-z]+)\*?|\\(.)|~/g, function (m, name, other) {  // \emph{…}, \\, \,
        if (name) {
          var symbol = own(SYMBOLS, name);
          return symbol !== undefined ? symbol : has(TEXTS, name) || has(FONTS, name) ? '' : name;
        }
        return ' ';
      })
      .replace(/\uE001(.)|[{}]/g, '$1');
  };

  // An optional argument "[…]", or null.
  Parser.prototype.optional = function () {
    var save = this.i;
    this.skipSpace();
    var end = this.peek() === '[' ? this.s.indexOf(']', this.i) : -1;
    if (end > 0) {
      var body = this.s.slice(this.i + 1, end);
      this.i = end + 1;
      return body;
    }
    this.i = save;
    return null;
  };

  // A math argument: a braced group, a command with its arguments, or one character.
  Parser.prototype.arg = function () {
    this.skipSpace();
    var c = this.peek();
    if (c === '') { return ''; }
    this.i++;
    if (c === '{') { return this.seq('}'); }
    if (c !== '\\') { return this.character(c); }
    this.enter();
    var out = this.command(this.name());
    this.depth--;
    return out;
  };

  // Everything up to the closing brace `stop` (or to the end when stop is null).
  Parser.prototype.seq = function (stop) {
    this.enter();
    var out = '';
    var glued = null;  // the last glued term: {kind, start, end} in out (see startsOperand)
    while (this.i < this.s.length) {
      var c = this.s.charAt(this.i++);
      if (c === stop) { break; }
      var piece, kind = null, text = false, space = /\s/.test(c);
      if (c === '{') { piece = this.seq('}'); }
      else if (c === '}') { continue; }  // a stray closing brace
      else if (c === '\\') {
        var name = this.name();
        piece = this.command(name);
        kind = has(FRACTIONS, name) ? 'frac' : name === 'sqrt' ? 'root' : null;
        text = has(TEXTS, name);
        space = /^[,:;> ]$/.test(name);  // a thin space, not a \quad
      } else if (c === '^' || c === '_') {
        piece = script(c, this.arg());
        kind = /^[_^]/.test(piece) ? 'script' : null;
      } else { piece = this.character(c); }
      if (piece === '') { continue; }
      if (glued && glued.kind === 'frac' && space) {
        out += piece;
        continue;
      }
      var next = piece.replace(/^\s+/, '');
      if (glued && !(text && glued.kind === 'frac') && startsOperand(glued.kind, next)) {
        if (glued.kind === 'frac') {
          out = out.slice(0, glued.start) + '(' + out.slice(glued.start, glued.end) + ')' +
            (next.charAt(0) === '(' ? '' : ' ');
          piece = next;
        } else {
          out += ' ';
        }
      }
      out += piece;
      if (/\S/.test(piece)) { this.afterText = text; }
      glued = kind ? {kind: kind, start: out.length - piece.length, end: out.length} : null;
    }
    this.depth--;
    return out;
  };

  Parser.prototype.character = function (c) {
    if (/\s/.test(c) || c === '~') { return ' '; }
    if (c === '&') { return this.inMatrix() ? ', ' : ''; }
    if (c === '-') { return '−'; }
    if (c === "'") { return '′'; }
    return c;
  };

  Parser.prototype.command = function (name) {
    var bare = name.replace(/\*$/, '');
    if (name === '\\' || name === 'cr') {  // a line break; in a matrix, a new row
      this.optional();
      if (this.inMatrix()) { return '; '; }
      return !this.afterText && this.envs.some(function (env) { return has(ROWS, env); }) ?
        ROW_BREAK : ' ';
    }
    if (own(SYMBOLS, name) !== undefined) { return SYMBOLS[name]; }
    if (has(FUNCTIONS, name)) { return name; }
    if (own(LARGE, name)) { return ' ' + LARGE[name]; }
    if (has(IGNORED, name)) {
      if (/^(left|right|middle)$/.test(name)) {  // \left. is no bracket
        this.skipSpace();
        if (this.peek() === '.') { this.i++; }
      }
      return '';
    }
    if (has(FONTS, bare)) { return this.arg(); }
    if (has(TEXTS, name)) { return this.rawGroup(); }
    if (name === 'mathbb') {
      return Array.from(this.arg()).map(function (c) { return own(DOUBLE_STRUCK, c) || c; }).join('');
    }
    if (name === 'frac' || name === 'dfrac' || name === 'tfrac' || name === 'cfrac') {
      var num = this.arg();
      return operand(num) + '/' + operand(this.arg());
    }
    if (name === 'sqrt') {  // √x, ∛x, ∜x; another index as a power: x^(1/n)
      var index = this.optional();
      index = index === null ? '' : this.sub(index).trim();
      var radicand = operand(this.arg());
      if (index === '' || index === '2') { return '√' + radicand; }
      if (index === '3' || index === '4') { return (index === '3' ? '∛' : '∜') + radicand; }
      return radicand + '^(1/' + operand(index) + ')';
    }
    if (name === 'binom' || name === 'tbinom' || name === 'dbinom') {
      var n = this.arg();
      return 'C(' + n + ', ' + this.arg() + ')';
    }
    if (name === 'underbrace' || name === 'overbrace') {  // the term, not its label
      var term = this.arg();
      var save = this.i;
      this.skipSpace();
      if (this.peek() === '_' || this.peek() === '^') {
        this.i++;
        this.arg();
      } else {
        this.i = save;
      }
      return term;
    }
    if (name === 'overset' || name === 'underset' || name === 'stackrel') {
      this.arg();
      return this.arg();
    }
    if (own(ACCENTS, name) !== undefined) {
      var base = this.arg().trim();
      return Array.from(base).length === 1 ? base + ACCENTS[name] : base;
    }
    if (name === 'begin' || name === 'end') {
      var starred = this.rawGroup();
      var env = starred.replace(/\*$/, '');
      var brackets = own(MATRICES, env) || ['', ''];
      if (name === 'end') {  // an \end of no open environment closes nothing
        var open = this.envs.lastIndexOf(env);
        if (open < 0) { return ''; }
        this.envs.length = open;
        return brackets[1];
      }
      this.envs.push(env);
      if (env === 'array') { this.rawGroup(); }  // its column specification
      if (starred !== env && own(MATRICES, env)) { this.optional(); }  // pmatrix*'s [r]
      return brackets[0];
    }
    if (name === 'label' || name === 'color') {
      this.rawGroup();
      return '';
    }
    if (name === 'textcolor') {
      this.rawGroup();
      return this.arg();
    }
    if (name === 'tag') { return '(' + this.rawGroup() + ')'; }
    return name;  // an unknown command: its name; its arguments follow as groups
  };

  // TeX whose structure texToText gave up on (MAX_DEPTH, MAX_LENGTH): its commands as
  // symbols or names, without backslashes, braces or alignment tabs.
  function plainText(src) {
    return src.replace(/\\([A-Za-z]+)|\\(.)/g, function (m, name, other) {
      var symbol = own(SYMBOLS, name || other);
      return ' ' + (symbol !== undefined ? symbol : name || '') + ' ';
    }).replace(/[{}&$]/g, ' ').replace(/\s+/g, ' ').trim();
  }

  // Plain text for the TeX of one math element (delimiters \(…\), \[…\], $…$ or $$…$$ included).
  function texToText(tex) {
    var src = String(tex).trim().replace(/[\uE000\uE001]/g, '');  // the converter's own marks
    var m = /^(\\\(|\\\[|\$\$|\$)([\s\S]*?)(\\\)|\\\]|\$\$|\$)$/.exec(src);
    if (m) { src = m[2]; }
    var text;
    if (src.length > MAX_LENGTH) { return plainText(src); }
    try {
      text = new Parser(src).seq(null);
    } catch (e) {
      if (e === TOO_DEEP || e instanceof RangeError) { return plainText(src); }
      throw e;
    }
    return text
      .replace(/([,.;:])\s*\uE000|\s*\uE000\s*(?=$|[=<>≤≥≈≠≡∝∼→⇒,.;:])/g, '$1 ')
      .replace(/\s*\uE000\s*/g, '; ')
      .replace(/\s+/g, ' ')
      .replace(/\s+([,.;:!?)\]])/g, '$1')
      .replace(/,+/g, ',')
      .replace(/,;/g, ';')
      .replace(/[,;]? }/g, ' }')  // the end of a cases block
      .replace(/∂ /g, '∂')
      .replace(/([([])\s+/g, '$1')
      .trim();
  }

  // What is on a page but not its text: scripts and styles (a page's figures are mostly
  // script), navigation (the language switch, attnbook_i18n) and the "Run this chapter yourself"
  // line (attnbook_notebooks).
  var NOT_TEXT = 'script, style, nav, .attnbook-run-links';

  // The HTML that Search.htmlToText reads: the page's article as [role="main"] (pydata-sphinx-
  // theme's [role="main"] also holds the contents list and the previous/next links), each math
  // element as plain text, without NOT_TEXT.
  function readableHtml(htmlString) {
    var doc = new DOMParser().parseFromString(htmlString, 'text/html');
    doc.querySelectorAll(NOT_TEXT).forEach(function (el) { el.remove(); });
    var main = doc.querySelector('article.bd-article') || doc.querySelector('[role="main"]');
    if (!main) { return htmlString; }
    main.querySelectorAll('span.math, div.math').forEach(function (el) {
      var number = el.querySelector('.eqno');
      var label = number ? ' ' + number.textContent.replace(/¶/g, '').trim() : '';
      if (number) { number.remove(); }
      var text = texToText(el.textContent);
      el.textContent = el.tagName === 'DIV' ? ' ' + text + label + ' ' : text;
    });
    return '<div role="main">' + main.innerHTML + '</div>';
  }

  global.attnbookSearch = {texToText: texToText, readableHtml: readableHtml};

  // searchtools.js's Search (a global const of the page's scripts; absent outside search.html).
  if (typeof Search !== 'undefined' && typeof Search.htmlToText === 'function') {
    var htmlToText = Search.htmlToText;
    Search.htmlToText = function (htmlString) {
      var args = Array.prototype.slice.call(arguments);
      args[0] = readableHtml(htmlString);
      return htmlToText.apply(Search, args).replace(/\s+/g, ' ').trim();
    };
  }
})(typeof window !== 'undefined' ? window : globalThis);

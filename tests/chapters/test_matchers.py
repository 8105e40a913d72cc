"""Each matcher of tests/chapters/matchers.py accepts what it must and can fail.

A matcher that accepted everything would let every chapter test pass; each test below gives one
value that must be accepted and values that must be rejected, including a value of the wrong type
(the glued values are read back with ``ast.literal_eval``: an int where a float is expected is a
different glued value).
"""

import math

from matchers import Check, Near, Tiny, close, positive_time
from test_chapters import same_value


def test_tiny_accepts_rounding_and_rejects_the_rest():
    t = Tiny(1e-12)
    assert t.matches(0.0, {}) and t.matches(1e-12, {}) and t.matches(3e-16, {})
    assert not t.matches(2e-12, {})  # above the bound
    assert not t.matches(-1e-16, {})  # a difference is never negative
    assert not t.matches(0, {})  # an int: not the float the chapter glues
    assert not t.matches(math.nan, {})
    assert Tiny().bound == 1e-12 and not Tiny().matches(1e-11)


def test_near_accepts_within_atol_and_rejects_the_rest():
    n = Near(0.5, 1e-5)
    assert n.matches(0.5, {}) and n.matches(0.500009, {}) and n.matches(0.499991, {})
    assert not n.matches(0.50002, {}) and not n.matches(0.49998, {})
    assert not n.matches(1, {}) and not Near(1.0, 0.1).matches(1, {})  # an int
    assert not n.matches(math.nan, {})


def test_check_is_its_predicate_with_the_glued_values():
    c = Check(lambda v, g: math.isclose(v, 2 * g["t"]), "twice the glued t")
    assert c.matches(4.0, {"t": 2.0})
    assert not c.matches(4.0, {"t": 3.0})
    assert "twice the glued t" in repr(c)


def test_positive_time_rejects_what_no_clock_measures():
    p = positive_time()
    assert p.matches(1e-6, {}) and p.matches(12.5, {})
    for bad in (0.0, -1.0, math.inf, math.nan, 3):
        assert not p.matches(bad, {}), bad


def test_close_is_relative_and_wants_a_float():
    assert close(1.0 + 1e-10, 1.0) and not close(1.0 + 1e-8, 1.0)
    assert close(1.00001, 1.0, 1e-4) and not close(1.001, 1.0, 1e-4)
    assert not close(1, 1.0)  # an int
    assert not close(math.nan, 1.0) and not close(math.nan, math.nan)


def test_same_value_dispatches_to_the_matchers():
    glued = {"t": 2.0}
    assert same_value(1e-13, Tiny(1e-12), glued) and not same_value(1e-11, Tiny(1e-12), glued)
    assert same_value(0.5, Near(0.5, 1e-5), glued) and not same_value(0.6, Near(0.5, 1e-5), glued)
    twice = Check(lambda v, g: v == 2 * g["t"], "twice t")
    assert same_value(4.0, twice, glued) and not same_value(5.0, twice, glued)
    assert same_value(3.0, lambda v, g: v > g["t"], glued)  # a bare predicate
    assert not same_value(1.0, lambda v, g: v > g["t"], glued)

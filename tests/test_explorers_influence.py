"""Tests of the influence explorer (attnbook.explorers.influence) without a browser.

The reference changes are computed here without ``output_change``: each model of
:mod:`attnbook.models` is run directly on the input and on the input with one token replaced,
and the norm of each position's difference is taken with NumPy. What must move is derived by
hand from the masks: a causal model moves exactly the outputs at and after the changed position
(a hidden key has weight 0, so earlier outputs are bit-for-bit equal), a bidirectional encoder
and the encoder-decoder's cross-attention move every output.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

pytest.importorskip("plotly")
pytest.importorskip("ipywidgets")

from attnbook.explorers import influence as wi  # noqa: E402
from attnbook.models import ModelConfig, build_model  # noqa: E402
from explorer_util import assert_speaks_chinese, embedded_spec, static_frame  # noqa: E402
from width_checks import check_widths  # noqa: E402

L = 5
VOCAB = 11


@functools.lru_cache(maxsize=None)
def setup():
    cfg = ModelConfig(
        vocab_size=VOCAB,
        d_model=16,
        n_heads=2,
        n_layers=1,
        n_encoder_layers=1,
        d_ff=32,
        max_seq_len=8,
        positional="learned",
    )
    models = {}
    for arch in ("encoder", "decoder", "encoder-decoder"):
        torch.manual_seed(3)
        models[arch] = build_model(cfg.replace(arch=arch)).double().eval()
    ids = torch.tensor([[1, 4, 9, 0, 7]])
    src = torch.tensor([[3, 10, 2, 5, 6]])
    return models, ids, src


def reference(model, ids, p, src=None, in_source=False):
    """||out' - out|| per position, by running the model directly (no output_change)."""
    x = (src if in_source else ids).clone()
    x[0, p] = (x[0, p] + 1) % VOCAB
    with torch.no_grad():
        if src is None:
            a, b = model(ids).numpy()[0], model(x).numpy()[0]
        elif in_source:
            a, b = model(src, ids).numpy()[0], model(x, ids).numpy()[0]
        else:
            a, b = model(src, ids).numpy()[0], model(src, x).numpy()[0]
    return np.sqrt(((b - a) ** 2).sum(axis=-1))


@pytest.mark.parametrize("p", range(L))
def test_output_change_matches_a_direct_run_and_the_masks(p):
    models, ids, src = setup()
    enc = wi.output_change(models["encoder"], ids, p)
    dec = wi.output_change(models["decoder"], ids, p)
    tgt = wi.output_change(models["encoder-decoder"], ids, p, src=src)
    sou = wi.output_change(models["encoder-decoder"], ids, p, src=src, in_source=True)
    for got, want in (
        (enc, reference(models["encoder"], ids, p)),
        (dec, reference(models["decoder"], ids, p)),
        (tgt, reference(models["encoder-decoder"], ids, p, src)),
        (sou, reference(models["encoder-decoder"], ids, p, src, True)),
    ):
        assert got.shape == (L,) and got.dtype == np.float64 and np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    after = np.arange(L) >= p  # by hand: the causal mask hides key p from queries i < p
    assert np.array_equal(dec > 0, after) and np.array_equal(tgt > 0, after)
    assert (dec[:p] == 0).all() and (tgt[:p] == 0).all()  # exactly, not approximately
    assert (enc > 0).all() and (sou > 0).all()


def test_influence_data_covers_every_case_and_position_on_one_scale():
    models, ids, src = setup()
    table = wi.influence_data(models, ids, src)
    assert set(table) == {(c, p) for c in wi.CASES for p in range(L)}
    for case in wi.CASES:
        ranges = {table[case, p].yrange for p in range(L)}
        assert len(ranges) == 1  # one y-axis per case: the bars compare across positions
        lo, hi = ranges.pop()
        positive = np.concatenate([table[case, p].change for p in range(L)])
        positive = positive[positive > 0]
        assert lo < positive.min() and hi > positive.max()
    d = table["decoder-only", 2]
    assert np.array_equal(d.moved, np.arange(L) >= 2)


@pytest.mark.parametrize("language", ["en", "zh_CN"])
def test_figure_draws_bars_of_the_moved_outputs_and_zeros_of_the_others(language):
    models, ids, src = setup()
    data = wi.influence_data(models, ids, src)["decoder-only", 3]
    wide, phone = check_widths(
        lambda w: wi.draw_influence(data, language=language, width=w), n_panels=1
    )
    for width in (688, 358):
        fig = wi.draw_influence(data, language=language, width=width)
        bars, zeros = fig.data
        assert list(bars.x) == ["3", "4"] and list(zeros.x) == ["0", "1", "2"]
        np.testing.assert_allclose(np.asarray(bars.y), data.change[3:], rtol=0, atol=0)
        assert fig.layout.yaxis.type == "log"
    caption = wide["layout"]["title"]["text"]
    assert ("2 of 5" in caption) if language == "en" else ("5 个输出中有 2 个" in caption)


def test_static_explorer_holds_every_setting():
    models, ids, src = setup()
    ex = wi.influence_explorer(models, ids, src, case="encoder-only", position=1)
    spec = embedded_spec(ex.static_html("en"))
    frame = static_frame(spec, {"case": "encoder-decoder, source token", "position": 4})
    want = reference(models["encoder-decoder"], ids, 4, src, True)
    np.testing.assert_allclose(frame["data"][0]["y"], want, rtol=1e-3)  # stored to 4 digits
    assert frame["data"][1]["x"] == []  # the source reaches every target position


def test_every_setting_speaks_chinese():
    models, ids, src = setup()
    assert_speaks_chinese(wi.influence_explorer(models, ids, src))


@pytest.mark.parametrize(
    "call, error, name",
    [
        (lambda m, i, s: wi.output_change(m["decoder"], i, 5), ValueError, "position"),
        (lambda m, i, s: wi.output_change(m["decoder"], i, 1, src=s), ValueError, "src"),
        (lambda m, i, s: wi.output_change(m["encoder-decoder"], i, 1), ValueError, "src"),
        (
            lambda m, i, s: wi.output_change(m["decoder"], i, 1, in_source=True),
            ValueError,
            "in_source",
        ),
        (lambda m, i, s: wi.output_change("model", i, 1), TypeError, "model"),
        (lambda m, i, s: wi.output_change(m["decoder"], i.float(), 1), TypeError, "ids"),
        (lambda m, i, s: wi.output_change(m["decoder"], i + VOCAB, 1), ValueError, "ids"),
        (lambda m, i, s: wi.influence_data({"encoder": m["encoder"]}, i, s), ValueError, "models"),
        (lambda m, i, s: wi.influence_data(m, i, s[:, :3]), ValueError, "src"),
        (lambda m, i, s: wi.influence_explorer(m, i, s, case="mine"), ValueError, "case"),
        (lambda m, i, s: wi.influence_explorer(m, i, s, position=L), ValueError, "position"),
        (lambda m, i, s: wi.draw_influence("data"), TypeError, "data"),
    ],
)
def test_bad_input_names_the_argument(call, error, name):
    models, ids, src = setup()
    with pytest.raises(error, match=name):
        call(models, ids, src)

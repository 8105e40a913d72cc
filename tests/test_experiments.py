"""Tests for attnbook.experiments: the training runs the chapters plot.

References used here:

* ScaledMultiHeadAttention against torch's ``F.scaled_dot_product_attention(..., scale=s)`` fed
  with the module's own projections, in float64 (outputs, weights and gradients), and the
  hand-derived case ``scale = 0`` (every visible key gets the same weight).
* The task generators against their definitions, checked element by element.
* Parameter counts of the recurrent baselines against ``torch.nn.RNN`` / ``torch.nn.LSTM``.
* The cross-attention map against a float64 softmax computed from the decoder's own layers.
* Gradient norms at initialisation against ``torch.autograd.grad`` on a model rebuilt from the
  documented seeds.

"Learns something" bound, used by every run (derived once here): each task's answer is uniform
over ``n`` classes to a model that does not read the input (see the task generators), so the
best such model has cross-entropy ``log n``. A held-out cross-entropy below ``log(n / 2)``
means the geometric mean of the probability given to the right answer exceeds ``2 / n``
(``exp(-loss) > 2/n``): at least twice what uninformed guessing can reach — the model has used
the input. The runs below are tiny (seconds), so the bound is loose on purpose; each is
measured on a held-out set drawn from a different generator than the training batches.
"""

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from attnbook import experiments as E
from attnbook.layers import MultiHeadAttention
from attnbook.layers import apply_rope as ann_apply_rope
from attnbook.models import DecoderOnlyModel, EncoderDecoderModel, ModelConfig
from norm_refs import norm_input_rms, norm_inputs

D64 = torch.float64


def learned_bound(n_classes: int) -> float:
    """``log(n/2)``: below it, the right answer gets on average > 2x the chance probability."""
    return math.log(n_classes / 2)


# --------------------------------------------------------------------------------------------
# ScaledMultiHeadAttention
# --------------------------------------------------------------------------------------------


def _reference_attention(mha, x, scale, causal):
    """Float64 reference: the module's projections, then torch's SDPA with an explicit scale."""
    B, L, _ = x.shape
    H, D = mha.n_heads, mha.head_dim
    q = F.linear(x, mha.q_proj.weight, mha.q_proj.bias).view(B, L, H, D).transpose(1, 2)
    k = F.linear(x, mha.k_proj.weight, mha.k_proj.bias).view(B, L, H, D).transpose(1, 2)
    v = F.linear(x, mha.v_proj.weight, mha.v_proj.bias).view(B, L, H, D).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)  # (B, H, L, D)
    scores = q @ k.transpose(-1, -2) * scale  # (B, H, L, L)
    if causal:
        scores = scores.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), -math.inf)
    weights = torch.softmax(scores, dim=-1)
    out = out.transpose(1, 2).reshape(B, L, H * D)  # (B, L, H*D)
    return F.linear(out, mha.o_proj.weight, mha.o_proj.bias), weights


@pytest.mark.parametrize("scale", [1.0, 0.3, 2.5])
@pytest.mark.parametrize("causal", [False, True])
def test_scaled_attention_matches_torch_sdpa_with_that_scale(scale, causal):
    torch.manual_seed(0)
    mha = E.ScaledMultiHeadAttention(12, 3, head_dim=8, bias=True, scale=scale).double()
    x = torch.randn(2, 5, 12, dtype=D64, requires_grad=True)
    out, weights = mha(x, causal=causal, need_weights=True)
    exp_out, exp_weights = _reference_attention(mha, x, scale, causal)
    assert torch.isfinite(out).all()
    assert_close(out, exp_out, atol=1e-12, rtol=1e-12)
    assert_close(weights, exp_weights, atol=1e-12, rtol=1e-12)
    # the gradients are those of softmax(q k^T * scale), for the query projection in particular
    g = torch.randn_like(out)
    grads = torch.autograd.grad(out, (x, mha.q_proj.weight), g)
    exp_grads = torch.autograd.grad(exp_out, (x, mha.q_proj.weight), g)
    for got, exp in zip(grads, exp_grads):
        assert_close(got, exp, atol=1e-12, rtol=1e-10)


def test_scaled_attention_default_is_the_library_module():
    torch.manual_seed(1)
    ours = E.ScaledMultiHeadAttention(16, 2, head_dim=32)
    plain = MultiHeadAttention(16, 2, head_dim=32)
    plain.load_state_dict(ours.state_dict())  # same parameter names
    x = torch.randn(3, 4, 16)
    assert ours.scale == 1 / math.sqrt(32)
    assert torch.equal(ours(x, causal=True), plain(x, causal=True))


def test_scale_zero_gives_equal_weights_on_visible_keys():
    torch.manual_seed(2)
    mha = E.ScaledMultiHeadAttention(8, 2, scale=0.0).double()
    _, w = mha(torch.randn(1, 4, 8, dtype=D64), causal=True, need_weights=True)
    # hand-derived: all scores 0, so query i (sees keys 0..i) gives each visible key 1/(i+1)
    expected = torch.tril(torch.ones(4, 4, dtype=D64)) / torch.arange(1, 5, dtype=D64)[:, None]
    assert_close(w[0, 0], expected, atol=1e-15, rtol=0)
    assert_close(w[0, 1], expected, atol=1e-15, rtol=0)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_scaled_attention_rejects_bad_scale(bad):
    with pytest.raises(ValueError, match="scale"):
        E.ScaledMultiHeadAttention(8, 2, scale=bad)


@pytest.mark.parametrize("bad", ["1.0", True, 1j])
def test_scaled_attention_rejects_a_scale_that_is_not_a_real_number(bad):
    with pytest.raises(TypeError, match="scale"):
        E.ScaledMultiHeadAttention(8, 2, scale=bad)


def test_scaled_attention_accepts_numpy_and_0d_scales():
    a = E.ScaledMultiHeadAttention(8, 2, scale=np.float32(0.5))
    b = E.ScaledMultiHeadAttention(8, 2, scale=np.array(0.5))
    assert a.scale == b.scale == 0.5


# --------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------


def test_kv_recall_batch_answer_is_the_value_stored_under_the_query_key():
    keys, values, query, target = E.kv_recall_batch(50, 5, 7, 4, torch.Generator().manual_seed(0))
    assert keys.shape == values.shape == (50, 5) and query.shape == target.shape == (50,)
    for b in range(50):
        row = keys[b].tolist()
        assert len(set(row)) == 5  # distinct keys
        assert 0 <= min(row) and max(row) < 7
        assert query[b].item() in row
        assert target[b].item() == values[b, row.index(query[b].item())].item()
    assert 0 <= int(values.min()) and int(values.max()) < 4
    with pytest.raises(ValueError, match="n_pairs 8 must be <= n_keys 7"):
        E.kv_recall_batch(2, 8, 7, 4, torch.Generator())


def test_copy_batch_layout():
    ids, x = E.copy_batch(6, 5, 9, torch.Generator().manual_seed(1))
    assert ids.shape == (6, 11) and x.shape == (6, 5)
    assert torch.equal(ids[:, :5], x) and torch.equal(ids[:, 6:], x)
    assert (ids[:, 5] == 9).all() and int(x.max()) < 9


def test_delayed_recall_batch_puts_the_answer_k_back_from_the_query():
    gen = torch.Generator().manual_seed(2)
    ids, target, k = E.delayed_recall_batch(40, 6, 3, 5, gen)
    assert ids.shape == (40, 7)
    for b in range(40):
        kb = int(k[b])
        assert 1 <= kb <= 6
        assert ids[b, -1] == 8  # the query token n_signal + n_noise
        assert ids[b, 6 - kb] == target[b] and 0 <= int(target[b]) < 3
        others = [int(t) for j, t in enumerate(ids[b, :-1]) if j != 6 - kb]
        assert all(3 <= t < 8 for t in others)  # noise only
    fixed = torch.tensor([1, 6])
    ids, target, k = E.delayed_recall_batch(2, 6, 3, 5, gen, k=fixed)
    assert torch.equal(k, fixed) and ids[0, 5] == target[0] and ids[1, 0] == target[1]
    with pytest.raises(ValueError, match="k must be"):
        E.delayed_recall_batch(2, 6, 3, 5, gen, k=torch.tensor([0, 3]))
    with pytest.raises(TypeError, match="k must be an integer"):
        E.delayed_recall_batch(2, 6, 3, 5, gen, k=torch.tensor([1.0, 3.0]))


def test_delayed_recall_batch_with_a_longer_sequence_adds_noise_in_front():
    gen = torch.Generator().manual_seed(3)
    fixed = torch.tensor([1, 6])
    ids, target, k = E.delayed_recall_batch(2, 6, 3, 5, gen, k=fixed, seq_len=11)
    assert ids.shape == (2, 11) and bool((ids[:, -1] == 8).all())
    assert ids[0, 9] == target[0] and ids[1, 4] == target[1]  # k back from the query
    for b, pos in ((0, 9), (1, 4)):
        others = [int(t) for j, t in enumerate(ids[b, :-1]) if j != pos]
        assert all(3 <= t < 8 for t in others)  # noise only
    # The default is max_k + 1, drawn exactly as without the argument.
    a = E.delayed_recall_batch(4, 6, 3, 5, torch.Generator().manual_seed(5))
    b = E.delayed_recall_batch(4, 6, 3, 5, torch.Generator().manual_seed(5), seq_len=7)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="seq_len"):
        E.delayed_recall_batch(2, 6, 3, 5, gen, seq_len=6)
    with pytest.raises(TypeError, match="seq_len"):
        E.delayed_recall_batch(2, 6, 3, 5, gen, seq_len=7.0)


@pytest.mark.parametrize(
    "make,exc,name",
    [
        (lambda g: E.kv_recall_batch(2.0, 3, 4, 4, g), TypeError, "batch_size"),
        (lambda g: E.kv_recall_batch(2, 0, 4, 4, g), ValueError, "n_pairs"),
        (lambda g: E.copy_batch(2, True, 4, g), TypeError, "n"),
        (lambda g: E.delayed_recall_batch(2, 4, 3, 0, g), ValueError, "n_noise"),
        (lambda g: E.reversal_batch(2, 3, 4.5, g), TypeError, "vocab"),
    ],
)
def test_task_generators_check_sizes(make, exc, name):
    with pytest.raises(exc, match=name):
        make(torch.Generator())


def test_reversal_batch_layout():
    src, tgt_in, tgt_out = E.reversal_batch(4, 6, 10, torch.Generator().manual_seed(3))
    assert torch.equal(tgt_out, src.flip(1))
    assert (tgt_in[:, 0] == 10).all() and torch.equal(tgt_in[:, 1:], tgt_out[:, :-1])


def test_first_step_below_hand_cases():
    curve = [3.0, 2.0, 1.0, 0.5, 0.1]
    assert E.first_step_below(curve, 1.0, window=1) == 3
    assert E.first_step_below(curve, 1.0, window=2) == 3  # window means 2.5, 1.5, 0.75, ...
    assert E.first_step_below(curve, 0.0) is None  # never, and shorter than the window
    assert E.first_step_below([np.nan, 0.0, 0.0], 0.5, window=2) == 2  # NaN window fails
    with pytest.raises(ValueError, match="window"):
        E.first_step_below(curve, 1.0, window=0)
    with pytest.raises(TypeError, match="window"):
        E.first_step_below(curve, 1.0, window=2.0)
    with pytest.raises(TypeError, match="threshold"):
        E.first_step_below(curve, "1.0")
    with pytest.raises(ValueError, match="1-D"):
        E.first_step_below([[1.0]], 1.0)


# --------------------------------------------------------------------------------------------
# The runs, at tiny sizes
# --------------------------------------------------------------------------------------------


#: A small ``scaling_run`` (one head of 64, 8 keys and values) for the tests that rebuild or
#: compare its arms; each test adds its steps, eval_size, seed and arm options.
TINY_SCALING = dict(
    head_dim=64, d_model=32, d_ff=64, n_pairs=4, n_keys=8, n_values=8, batch_size=32
)


def test_scaling_run_learns_and_differs_only_by_the_scale():
    before = torch.get_num_threads()
    r = E.scaling_run(
        head_dim=64,
        d_model=32,
        d_ff=64,
        n_pairs=4,
        n_keys=8,
        n_values=8,
        steps=150,
        batch_size=32,
        eval_size=256,
        seed=0,
    )
    assert torch.get_num_threads() == before  # restored
    assert r.chance_loss == pytest.approx(math.log(8))
    for arm in ("scaled", "unscaled"):
        assert r.loss[arm].shape == (150,) and np.isfinite(r.loss[arm]).all()
        ent = r.entropy[arm]
        assert ent.shape == (150,) and np.isfinite(ent).all()
        assert (ent >= 0).all() and (ent <= math.log(5) + 1e-12).all()  # 5 slots
    assert r.max_entropy == pytest.approx(math.log(5))
    # Same initial weights and first batch in both arms, so the scores at initialisation differ
    # exactly by the ratio of the scales, sqrt(head_dim) = 8.
    assert r.score_std_init["unscaled"] / r.score_std_init["scaled"] == pytest.approx(8, rel=1e-5)
    # The default-scaled model (the control) learns the retrieval.
    assert r.eval_loss["scaled"] < learned_bound(8)
    assert r.eval_accuracy["scaled"] > 2 / 8
    assert np.isfinite(r.eval_loss["unscaled"])
    assert r.wall_time_s > 0 and r.cpu_time_s > 0


def test_score_gradient_is_autograd_through_the_softmax():
    """``score_gradient`` equals autograd of ``softmax(scale * s)`` with respect to ``s``."""
    gen = torch.Generator().manual_seed(0)
    s = torch.randn(3, 5, 7, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(3, 5, 7, dtype=torch.float64, generator=gen)
    for scale in (1.0, 0.125, 3.0):
        p = torch.softmax(scale * s, dim=-1)
        (want,) = torch.autograd.grad((p * g).sum(), s)
        got = E.score_gradient(p.detach(), g, scale)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
    # A one-hot row passes nothing back, whatever the upstream gradient (the Jacobian is 0).
    one_hot = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)
    assert torch.equal(
        E.score_gradient(one_hot, torch.tensor([[5.0, -2.0, 7.0]], dtype=torch.float64), 1.0),
        torch.zeros(1, 3, dtype=torch.float64),
    )


def test_score_gradient_refuses_bad_input():
    p = torch.full((2, 4), 0.25)
    with pytest.raises(ValueError, match=r"same shape, got \(2, 4\) and \(2, 3\)"):
        E.score_gradient(p, torch.zeros(2, 3), 1.0)
    with pytest.raises(TypeError, match="grad_weights must be a torch.Tensor"):
        E.score_gradient(p, np.zeros((2, 4)), 1.0)
    with pytest.raises(TypeError, match="scale must be a real number"):
        E.score_gradient(p, torch.zeros(2, 4), "1")
    with pytest.raises(ValueError, match="scale must be finite"):
        E.score_gradient(p, torch.zeros(2, 4), float("nan"))


def test_scaling_run_records_saturation_and_its_gradient_share():
    """The per-step saturation record agrees with the weights and gradients of a rebuilt step.

    Rebuilds the unscaled arm's model and first batch from the documented seeds, runs one
    forward and backward pass by hand, and recomputes the share of saturated queries and the
    share of the score gradient they carry with autograd through a softmax of the raw scores.
    """
    kw = dict(
        **TINY_SCALING,
        eval_size=8,
        seed=2,
    )
    r = E.scaling_run(steps=3, saturation_threshold=0.9, **kw)
    assert r.saturation_threshold == 0.9
    for arm in ("scaled", "unscaled"):
        for curve in (r.saturated[arm], r.saturated_grad_share[arm]):
            assert curve.shape == (3,) and ((curve >= 0) & (curve <= 1)).all()
    torch.manual_seed(kw["seed"])
    model = E._RetrievalModel(8, 8, 32, 64, 64, 1.0)
    keys, values, query, target = E.kv_recall_batch(
        32, 4, 8, 8, torch.Generator().manual_seed(kw["seed"])
    )
    captured = {}
    model.attn.register_forward_pre_hook(lambda m, args: captured.__setitem__("x", args[0]))
    logits, weights = model(keys, values, query)
    x = captured["x"]
    # The raw dot products q k^T of the query row, as a leaf (q_proj's output carries the
    # subclass's factor q_factor = scale * sqrt(head_dim), divided out here): their softmax
    # (scale 1, the unscaled arm) is the weights.
    qk = (
        torch.einsum(
            "bd,bld->bl", model.attn.q_proj(x)[:, -1] / model.attn.q_factor, model.attn.k_proj(x)
        )
        .detach()
        .double()
        .requires_grad_(True)
    )
    p = torch.softmax(qk, dim=-1)  # scale 1: the unscaled arm
    torch.testing.assert_close(p.float(), weights[:, 0, -1].detach(), rtol=1e-4, atol=1e-6)
    weights.retain_grad()
    F.cross_entropy(logits, target).backward()
    (g_qk,) = torch.autograd.grad((p * weights.grad[:, 0, -1].double()).sum(), qk)
    norms = g_qk.norm(dim=-1)
    saturated = p.detach().max(dim=-1).values > 0.9
    assert r.saturated["unscaled"][0] == pytest.approx(float(saturated.double().mean()))
    want = float(norms[saturated].sum() / norms.sum())
    assert r.saturated_grad_share["unscaled"][0] == pytest.approx(want, rel=1e-5, abs=1e-9)
    assert 0 < r.saturated["unscaled"][0] < 1  # the check compared a real split
    with pytest.raises(ValueError, match="saturation_threshold must be < 1"):
        E.scaling_run(steps=1, saturation_threshold=1.0, **kw)


def test_scaling_run_control_starts_with_the_unscaled_scores():
    """``q_init_gain = sqrt(d_k)``: the control's first forward pass is the unscaled arm's.

    The control is scaled by ``1/sqrt(d_k)`` with ``W_Q`` initialised ``sqrt(d_k)`` times larger,
    so at initialisation its scores ``(c W_Q x) k / sqrt(d_k)`` are the unscaled arm's: the same
    score spread, the same weights (entropy, saturated share, the saturated queries' gradient
    share) and the same first loss on the same seed. With gain 1 it is the scaled arm, step for
    step; and without ``q_init_gain`` there is no control.
    """
    kw = dict(
        **TINY_SCALING,
        eval_size=8,
        seed=1,
        saturation_threshold=0.9,
    )
    r = E.scaling_run(steps=3, q_init_gain=8.0, **kw)  # sqrt(64) = 8
    assert set(r.loss) == {"scaled", "unscaled", "control"} and r.q_init_gain == 8.0
    assert r.scales["control"] == r.scales["scaled"] == 1 / 8
    assert r.score_std_init["control"] == pytest.approx(r.score_std_init["unscaled"], rel=1e-6)
    assert r.score_std_init["control"] == pytest.approx(8 * r.score_std_init["scaled"], rel=1e-5)
    assert r.loss["control"][0] == pytest.approx(r.loss["unscaled"][0], rel=1e-6)
    assert r.entropy["control"][0] == pytest.approx(r.entropy["unscaled"][0], rel=1e-6)
    assert r.saturated["control"][0] == r.saturated["unscaled"][0]
    assert 0 < r.saturated["unscaled"][0] < 1  # a real split, not all or none
    assert r.saturated_grad_share["control"][0] == pytest.approx(
        r.saturated_grad_share["unscaled"][0], rel=1e-4, abs=1e-9
    )
    assert r.loss["scaled"][0] != pytest.approx(r.loss["unscaled"][0], rel=1e-6)
    # After the first update the control and the unscaled arm part: a step of W_Q moves the
    # control's scores 1/sqrt(d_k) as far.
    assert r.loss["control"][1] != pytest.approx(r.loss["unscaled"][1], rel=1e-6)
    same = E.scaling_run(steps=3, q_init_gain=1.0, **kw)
    np.testing.assert_array_equal(same.loss["control"], same.loss["scaled"])
    assert set(E.scaling_run(steps=1, **kw).loss) == {"scaled", "unscaled"}
    with pytest.raises(ValueError, match="q_init_gain"):
        E.scaling_run(steps=1, q_init_gain=0.0, **kw)
    with pytest.raises(ValueError, match="q_init_gain"):
        E.scaling_run(steps=1, q_init_gain=float("inf"), **kw)
    with pytest.raises(TypeError, match="q_init_gain"):
        E.scaling_run(steps=1, q_init_gain="8", **kw)
    with pytest.raises(ValueError, match="q_init_gain"):  # its scores would overflow
        E.scaling_run(steps=1, q_init_gain=1e300, **kw)


def test_qk_lr_gain_is_adam_with_that_learning_rate_on_w_q_and_w_k():
    """``qk_lr_gain = g`` is Adam with ``g`` times the learning rate on ``W_Q`` and ``W_K``.

    Reference: the plain module with the same initial weights, trained by torch's Adam with
    param groups (``lr * g`` and ``eps / g`` for ``q_proj`` and ``k_proj``, ``lr`` for the
    rest). Both compute the same function at every step; the effective weights (stored times
    ``g``) follow the reference's. (With Adam's own ``eps`` the two differ where a gradient is
    as small as ``eps``: a step there is damped less.)
    """
    g, lr = 16.0, 1e-2
    torch.manual_seed(0)
    fast = E.ScaledMultiHeadAttention(8, 2, head_dim=16, bias=True, qk_lr_gain=g).double()
    torch.manual_seed(0)
    ref = E.ScaledMultiHeadAttention(8, 2, head_dim=16, bias=True).double()
    qk = [*ref.q_proj.parameters(), *ref.k_proj.parameters()]
    rest = [p for p in ref.parameters() if all(p is not q for q in qk)]
    opt_ref = torch.optim.Adam(
        [{"params": qk, "lr": lr * g, "eps": 1e-8 / g}, {"params": rest}], lr=lr, eps=1e-8
    )
    opt_fast = torch.optim.Adam(fast.parameters(), lr=lr, eps=1e-8)
    x, y = torch.randn(4, 5, 8, dtype=D64), torch.randn(4, 5, 8, dtype=D64)
    for _ in range(5):
        for mod, opt in ((fast, opt_fast), (ref, opt_ref)):
            opt.zero_grad()
            loss = ((mod(x, causal=True) - y) ** 2).mean()
            loss.backward()
            opt.step()
        assert_close(fast(x, causal=True), ref(x, causal=True), atol=1e-10, rtol=1e-8)
    for name in ("q_proj", "k_proj"):
        for p_fast, p_ref in zip(getattr(fast, name).parameters(), getattr(ref, name).parameters()):
            assert_close(p_fast * g, p_ref, atol=1e-10, rtol=1e-8)
    # the reference moved W_Q by far more than one plain step: the gain mattered
    torch.manual_seed(0)
    start = E.ScaledMultiHeadAttention(8, 2, head_dim=16, bias=True).double()
    assert (ref.q_proj.weight - start.q_proj.weight).abs().max() > 5 * lr
    with pytest.raises(ValueError, match="qk_lr_gain"):
        E.ScaledMultiHeadAttention(8, 2, qk_lr_gain=0.0)


@pytest.mark.parametrize("gain", [1e-40, 1e-4, 1001.0, 1e30, float("inf"), float("nan")])
def test_qk_lr_gain_is_bounded_so_the_stored_weights_stay_finite(gain):
    # 1e-40 divided the stored W_Q, W_K into inf and the outputs into NaN
    with pytest.raises(ValueError, match="qk_lr_gain must"):
        E.ScaledMultiHeadAttention(8, 2, qk_lr_gain=gain)
    with pytest.raises(ValueError, match="qk_lr_gain must"):
        E.scaling_run(steps=1, qk_lr_gain=gain)


def test_qk_lr_gain_ends_of_its_range_and_repr():
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.manual_seed(0)
    ref = E.ScaledMultiHeadAttention(8, 2).double().eval()
    assert "qk_lr_gain" not in repr(ref)
    for gain in (1e-3, 1e3):
        torch.manual_seed(0)
        m = E.ScaledMultiHeadAttention(8, 2, qk_lr_gain=gain).double().eval()
        assert f"qk_lr_gain={gain:g}" in repr(m)
        # the same function, up to the float32 rounding of the divided weights at init
        assert_close(m(x), ref(x), atol=1e-6, rtol=1e-5)
        # the stored W_Q is the plain module's divided by the gain (state_dicts differ)
        assert_close(m.q_proj.weight * gain, ref.q_proj.weight, atol=1e-7, rtol=1e-6)


def test_scaling_run_big_step_arm_starts_as_the_scaled_arm_and_then_parts():
    """``qk_lr_gain``: the big-step arm has the scaled arm's first forward pass, not its steps."""
    kw = dict(
        **TINY_SCALING,
        eval_size=8,
        seed=1,
    )
    r = E.scaling_run(steps=3, qk_lr_gain=8.0, **kw)
    assert set(r.loss) == {"scaled", "unscaled", "big-step"} and r.qk_lr_gain == 8.0
    assert r.scales["big-step"] == r.scales["scaled"] == 1 / 8
    assert r.score_std_init["big-step"] == pytest.approx(r.score_std_init["scaled"], rel=1e-6)
    assert r.loss["big-step"][0] == pytest.approx(r.loss["scaled"][0], rel=1e-6)
    assert r.entropy["big-step"][0] == pytest.approx(r.entropy["scaled"][0], rel=1e-6)
    assert r.loss["big-step"][2] != pytest.approx(r.loss["scaled"][2], rel=1e-6)
    same = E.scaling_run(steps=3, qk_lr_gain=1.0, **kw)
    assert_close(same.loss["big-step"], same.loss["scaled"], atol=1e-6, rtol=1e-6)
    with pytest.raises(ValueError, match="qk_lr_gain"):
        E.scaling_run(steps=1, qk_lr_gain=-1.0, **kw)
    with pytest.raises(TypeError, match="qk_lr_gain"):
        E.scaling_run(steps=1, qk_lr_gain="8", **kw)


def test_scaling_run_small_step_arm_starts_as_the_unscaled_arm_and_then_parts():
    """``small_step_gain``: the small-step arm has the unscaled arm's first forward pass.

    Unscaled scores from the unscaled arm's weights, so on the same seed its scores at
    initialisation, first loss, entropy and saturation are the unscaled arm's; only its steps
    on ``W_Q`` and ``W_K`` are ``small_step_gain`` times as large, so the arms part after the
    first update. With gain 1 it is the unscaled arm, step for step.
    """
    kw = dict(**TINY_SCALING, eval_size=8, seed=1, saturation_threshold=0.9)
    r = E.scaling_run(steps=3, small_step_gain=1 / 8, **kw)  # 1/sqrt(64)
    assert set(r.loss) == {"scaled", "unscaled", "small-step"} and r.small_step_gain == 1 / 8
    assert r.scales["small-step"] == r.scales["unscaled"] == 1.0
    assert r.score_std_init["small-step"] == pytest.approx(r.score_std_init["unscaled"], rel=1e-6)
    assert r.loss["small-step"][0] == pytest.approx(r.loss["unscaled"][0], rel=1e-6)
    assert r.entropy["small-step"][0] == pytest.approx(r.entropy["unscaled"][0], rel=1e-6)
    assert r.saturated["small-step"][0] == r.saturated["unscaled"][0]
    assert 0 < r.saturated["unscaled"][0] < 1  # a real split, not all or none
    assert r.loss["small-step"][2] != pytest.approx(r.loss["unscaled"][2], rel=1e-6)
    same = E.scaling_run(steps=3, small_step_gain=1.0, **kw)
    assert_close(same.loss["small-step"], same.loss["unscaled"], atol=1e-6, rtol=1e-6)
    assert E.scaling_run(steps=1, **kw).small_step_gain is None
    with pytest.raises(ValueError, match="small_step_gain must"):
        E.scaling_run(steps=1, small_step_gain=1e-4, **kw)
    with pytest.raises(ValueError, match="small_step_gain"):
        E.scaling_run(steps=1, small_step_gain=-1.0, **kw)
    with pytest.raises(TypeError, match="small_step_gain"):
        E.scaling_run(steps=1, small_step_gain="0.125", **kw)


def _query_scores(model, batch):
    """The query slot's scores as the softmax sees them, ``(B, P + 1)``: ``q k^T * scale``."""
    captured = {}
    hook = model.attn.register_forward_pre_hook(lambda m, args: captured.__setitem__("x", args[0]))
    model(*batch[:3])
    hook.remove()
    x = captured["x"]
    q = model.attn.q_proj(x)[:, -1]  # (B, D), carries q_factor * qk_lr_gain
    k = model.attn.k_proj(x)  # (B, L, D), carries qk_lr_gain
    return torch.einsum("bd,bld->bl", q, k) / math.sqrt(model.attn.head_dim)


def test_one_step_moves_the_small_step_arms_scores_as_far_as_the_scaled_arms():
    """One Adam step on ``W_Q``, ``W_K`` moves the small-step arm's scores ``1/sqrt(d_k)`` as far.

    The three arms' models (scaled, unscaled, small-step with gain ``1/sqrt(d_k)``) start from
    the same weights; one Adam step on the query and key projections alone (the rest held, so
    the attention's input is the same before and after), on the same batch, moves the scores the
    softmax sees. To first order the small-step arm's move is the unscaled arm's divided by
    ``sqrt(d_k)``, of the scaled arm's size: the 2x2 design's "small step". Its scores before
    the step are the unscaled arm's, ``sqrt(d_k)`` times the scaled arm's.
    """
    head_dim, lr = 64, 1e-3
    batch = E.kv_recall_batch(32, 4, 8, 8, torch.Generator().manual_seed(0))
    moves, before = {}, {}
    for arm, scale, gain in (("scaled", None, 1.0), ("unscaled", 1.0, 1.0), ("small", 1.0, 1 / 8)):
        torch.manual_seed(3)
        model = E._RetrievalModel(8, 8, 32, head_dim, 64, scale, gain).double()
        s0 = _query_scores(model, batch).detach()
        params = [*model.attn.q_proj.parameters(), *model.attn.k_proj.parameters()]
        opt = torch.optim.Adam(params, lr=lr)
        logits, _ = model(*batch[:3])
        F.cross_entropy(logits, batch[3]).backward()
        opt.step()
        before[arm], moves[arm] = s0, (_query_scores(model, batch).detach() - s0).norm()
    assert_close(before["small"], before["unscaled"], atol=1e-9, rtol=1e-9)
    assert_close(before["unscaled"], 8 * before["scaled"], atol=1e-9, rtol=1e-9)
    assert moves["unscaled"] > 0
    ratio = float(moves["small"] / moves["unscaled"])
    assert ratio == pytest.approx(1 / 8, rel=0.05)  # first order; a plain step would give 1
    # The scaled arm's gradient points elsewhere (its softmax is not saturated), so its move is
    # of the small-step arm's size, not equal to it; the unscaled arm's is sqrt(d_k) times larger.
    assert 0.5 < float(moves["small"] / moves["scaled"]) < 2
    assert float(moves["unscaled"] / moves["scaled"]) > 4


def test_norm_placement_records_the_first_layers_gradient_and_update():
    """Step 0's gradient norms are those at initialisation; Adam's first step is lr * sign(g).

    Adam's first update is ``lr * m / (sqrt(v) + eps)`` with ``m = (1 - b1) g`` and
    ``v = (1 - b2) g^2`` bias-corrected to ``g`` and ``g^2``: ``lr * g / (|g| + eps)``, so a
    parameter with a nonzero gradient (|g| >> eps) moves by ``lr`` and one without does not,
    and the first layer's relative update is ``lr * sqrt(k) / ||theta||`` for ``k`` parameters
    with a nonzero gradient.
    """
    lr, seed = 2e-3, 1
    r = E.norm_placement_run(
        n_layers=3,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n=3,
        vocab=5,
        steps=4,
        batch_size=4,
        eval_size=8,
        lr=lr,
        warmup_steps=2,
        seed=seed,
    )
    for arm in E.NORM_PLACEMENT_ARMS:
        for curve in (r.grad_norm_first[arm], r.grad_norm_last[arm], r.update_first[arm]):
            assert curve.shape == (4,) and np.isfinite(curve).all() and (curve > 0).all()
    for arm in ("post_ln", "pre_ln"):
        assert r.grad_norm_first[arm][0] == pytest.approx(r.grad_norm_init[arm][0], rel=1e-9)
        assert r.grad_norm_last[arm][0] == pytest.approx(r.grad_norm_init[arm][-1], rel=1e-9)
        model = E._copy_model(
            arm == "pre_ln",
            vocab=5,
            d_model=16,
            n_heads=2,
            n_layers=3,
            d_ff=32,
            n=3,
            name=arm,
            seed=seed,
        )
        ids, x = E.copy_batch(4, 3, 5, torch.Generator().manual_seed(seed))
        E._copy_loss(model, ids, x)[0].backward()
        params = list(model.layers[0].parameters())
        k = sum(int((p.grad.abs() > 1e-6).sum()) for p in params)
        theta = math.sqrt(sum(float(p.detach().double().pow(2).sum()) for p in params))
        assert r.update_first[arm][0] == pytest.approx(lr * math.sqrt(k) / theta, rel=1e-3)
    # Warmup: the first step is at lr / warmup_steps of the peak (LambdaLR's first factor);
    # float32 weights, so equal to rounding.
    assert r.update_first["post_ln_warmup"][0] == pytest.approx(
        0.5 * r.update_first["post_ln"][0], rel=1e-5
    )


def test_norm_placement_records_the_norms_input_rms():
    """Step 0's recorded RMS of every norm's input equals a forward pass computed by hand."""
    seed, sizes = 2, dict(vocab=5, d_model=16, n_heads=2, n_layers=3, d_ff=32, n=3)
    r = E.norm_placement_run(steps=3, batch_size=4, eval_size=8, warmup_steps=2, seed=seed, **sizes)
    ids, _ = E.copy_batch(4, 3, 5, torch.Generator().manual_seed(seed))
    for arm, (norm_first, _) in E.NORM_PLACEMENT_ARMS.items():
        rms, final = r.ln_rms[arm], r.ln_rms_final[arm]
        assert rms.shape == (3, 3, 2) and final.shape == (3,)
        assert np.isfinite(rms).all() and (rms > 0).all()
        assert np.isfinite(final).all() if norm_first else np.isnan(final).all()
        model = E._copy_model(norm_first, name=arm, seed=seed, **sizes)
        want = norm_input_rms(model, ids)
        got = list(rms[0].ravel()) + ([final[0]] if norm_first else [])
        np.testing.assert_allclose(got, want, rtol=1e-6)
        # Later steps see updated weights: the records move.
        assert not np.allclose(rms[2], rms[0], rtol=1e-4)


def _head_input_by_hand(model, ids):
    """The states the LM head reads, the stack written out layer by layer (no hooks)."""
    with torch.no_grad():
        h = model.embed(ids, torch.arange(ids.shape[1]))
        for layer in model.layers:
            h = layer(h, causal=True)
        return (h if model.norm is None else model.norm(h)).double().numpy()


def _share_by_hand(h):
    """Variance across the sequences over the mean square, NumPy float64 (h: (B, n, d))."""
    return h.var(axis=0).sum() * len(h) / (h**2).sum()


def test_norm_placement_records_the_top_states_shares():
    """Step 0's shares equal NumPy's variance and class means of a forward pass by hand."""
    seed, sizes = 4, dict(vocab=5, d_model=16, n_heads=2, n_layers=3, d_ff=32, n=3)
    r = E.norm_placement_run(
        steps=3,
        batch_size=4,
        eval_size=64,
        warmup_steps=2,
        probe_steps=(0, 2, 9),
        probe_size=32,
        seed=seed,
        **sizes,
    )
    assert r.probe_steps.tolist() == [0, 2, 3]  # 9 >= steps is skipped; 3 = after training
    ids, x = E.copy_batch(64, 3, 5, torch.Generator().manual_seed(seed + 1))  # the held-out set
    ids, x = ids[:32], x[:32]  # the probe's sequences
    for arm, (norm_first, _) in E.NORM_PLACEMENT_ARMS.items():
        inp, tok = r.top_input_share[arm], r.top_token_share[arm]
        assert inp.shape == tok.shape == (3,)
        assert ((0 < tok) & (tok < inp) & (inp < 1)).all()
        h = _head_input_by_hand(E._copy_model(norm_first, name=arm, seed=seed, **sizes), ids)
        h = h[:, 3:6]  # (B, n, d): the positions that predict the copy
        total = (h**2).sum()
        want_inp = h.var(axis=0).sum() * len(h) / total
        between = sum(
            (x[:, i] == c).sum().item()
            * ((h[x[:, i] == c, i].mean(0) - h[:, i].mean(0)) ** 2).sum()
            for i in range(3)
            for c in range(5)
            if (x[:, i] == c).any()
        )
        assert inp[0] == pytest.approx(want_inp, rel=1e-5)
        assert tok[0] == pytest.approx(between / total, rel=1e-5)
        # Training changes the states: the later records move.
        assert inp[-1] != pytest.approx(inp[0], rel=1e-4)
        # Every norm's input, centred over the features, at the same positions.
        model = E._copy_model(norm_first, name=arm, seed=seed, **sizes)
        want, want_ms, want_parts = [], [], []
        for h in norm_inputs(model, ids):
            h = h.numpy()[:, 3:6]
            h = h - h.mean(-1, keepdims=True)
            want.append(_share_by_hand(h))
            want_ms.append((h**2).mean())
            # The varying part (deviation from the mean over the sequences) and the common
            # part (that mean), each as an RMS over the same entries.
            m = h.mean(axis=0)
            want_parts.append([np.sqrt(((h - m) ** 2).mean()), np.sqrt((m**2).mean())])
        got, final = r.norm_input_share[arm], r.norm_input_share_final[arm]
        ms = r.norm_input_ms[arm]
        assert ms.shape == (3, 3, 2) and (ms > 0).all()
        np.testing.assert_allclose(ms[0].ravel(), want_ms[:6], rtol=1e-5)
        # The split without a cross term: sqrt(share * ms) and sqrt((1 - share) * ms).
        parts = np.stack([np.sqrt(got * ms), np.sqrt((1 - got) * ms)], axis=-1)
        np.testing.assert_allclose(parts[0].reshape(6, 2), want_parts[:6], rtol=1e-5)
        assert not np.allclose(ms[-1], ms[0], rtol=1e-4)
        # The branches' outputs by difference of the residual stream around them.
        h_in = norm_inputs(model, ids)
        with torch.no_grad():
            stream = model.embed(ids, torch.arange(ids.shape[1])).double()
        branches = []
        for l, layer in enumerate(model.layers):
            if norm_first:  # stream before, between and after the two branches
                after = h_in[2 * l + 2]
                branches += [h_in[2 * l + 1] - h_in[2 * l], after - h_in[2 * l + 1]]
            else:  # norm1's input minus the block's input; norm2's minus norm1's output
                with torch.no_grad():
                    mid = layer.norm1(h_in[2 * l].float()).double()
                    nxt = layer.norm2(h_in[2 * l + 1].float()).double()
                branches += [h_in[2 * l] - stream, h_in[2 * l + 1] - mid]
                stream = nxt
        want_common, want_branch = [], []
        for b in branches:
            b = b.numpy()[:, 3:6]
            b = b - b.mean(-1, keepdims=True)
            want_common.append(np.sqrt((b.mean(axis=0) ** 2).mean()))
            want_branch.append(((b - b.mean(axis=0)) ** 2).sum() / (b**2).sum())
        common = r.branch_common_rms[arm]
        assert common.shape == (3, 3, 2) and (common > 0).all()
        np.testing.assert_allclose(common[0].ravel(), want_common, rtol=1e-4)
        assert not np.allclose(common[-1], common[0], rtol=1e-4)
        # The branches' varying share: variance across the sequences over the mean square.
        branch = r.branch_input_share[arm]
        assert branch.shape == (3, 3, 2) and ((0 < branch) & (branch < 1)).all()
        np.testing.assert_allclose(branch[0].ravel(), want_branch, rtol=1e-4)
        assert not np.allclose(branch[-1], branch[0], rtol=1e-4)
        assert got.shape == (3, 3, 2) and final.shape == (3,)
        assert ((0 < got) & (got < 1)).all()
        np.testing.assert_allclose(got[0].ravel(), want[:6], rtol=1e-5)
        if norm_first:
            assert final[0] == pytest.approx(want[6], rel=1e-5)
        else:
            assert np.isnan(final).all()
        assert not np.allclose(got[-1], got[0], rtol=1e-4)
    with pytest.raises(ValueError, match="probe_steps"):
        E.norm_placement_run(steps=2, batch_size=2, eval_size=2, probe_steps=(3, 1), **sizes)
    with pytest.raises(ValueError, match="warmup_steps=2 must be < steps=2"):
        E.norm_placement_run(steps=2, batch_size=2, eval_size=2, warmup_steps=2, **sizes)


@pytest.mark.parametrize(
    "probe_steps, exc, match",
    [
        (5, TypeError, r"probe_steps must be a sequence of integers, got 5"),
        ({0, 1}, TypeError, r"probe_steps must be a sequence .*\(set\)"),  # no order
        (np.array(1), TypeError, r"probe_steps must be a sequence .*array of shape \(\)"),
        ((), ValueError, "probe_steps must not be empty"),
        ((0, -1), ValueError, r"probe_steps\[1\] must be >= 0"),
        ((0, 1.0), TypeError, r"probe_steps\[1\] must be an integer"),
    ],
)
def test_norm_placement_run_checks_probe_steps_as_cross_attention_run(probe_steps, exc, match):
    sizes = dict(vocab=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, n=2)
    with pytest.raises(exc, match=match):
        E.norm_placement_run(steps=2, batch_size=2, eval_size=4, probe_steps=probe_steps, **sizes)


def test_norm_placement_run_probe_steps_none_and_probe_size():
    sizes = dict(vocab=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, n=2)
    kw = dict(steps=2, batch_size=2, eval_size=4, warmup_steps=1, **sizes)
    # None probes only the state after training, as snapshot_steps=None records no snapshot
    r = E.norm_placement_run(probe_steps=None, probe_size=2, **kw)
    assert r.probe_steps.tolist() == [2]
    assert all(v.shape == (1,) for v in r.top_input_share.values())
    # one sequence has no spread: its share would be 0.0 by construction
    with pytest.raises(ValueError, match="probe_size must be >= 2 .*got 1"):
        E.norm_placement_run(probe_size=1, **kw)


def test_norm_placement_run_trains_a_subset_of_arms_as_the_full_run():
    """An arm trained alone (a control at another lr, say) records what the full run does."""
    kw = dict(
        vocab=5,
        d_model=16,
        n_heads=2,
        n_layers=2,
        d_ff=32,
        n=3,
        steps=4,
        batch_size=4,
        eval_size=8,
        probe_steps=(0, 2),
        probe_size=4,
        warmup_steps=2,
        seed=3,
    )
    full = E.norm_placement_run(**kw)
    one = E.norm_placement_run(arms=["pre_ln_warmup", "post_ln"], **kw)
    assert list(one.loss) == ["post_ln", "pre_ln_warmup"]  # NORM_PLACEMENT_ARMS' order
    assert list(one.grad_norm_init) == ["post_ln"] and one.n_params == full.n_params
    for arm in one.loss:
        for name in (
            "loss",
            "update_first",
            "ln_rms",
            "top_input_share",
            "norm_input_share",
            "norm_input_ms",
            "branch_common_rms",
            "branch_input_share",
        ):
            np.testing.assert_array_equal(getattr(one, name)[arm], getattr(full, name)[arm])
        assert one.eval_loss[arm] == full.eval_loss[arm]
    # A lower lr is another run: the first loss (before any update) agrees, the second not.
    low = E.norm_placement_run(arms=("post_ln",), **(kw | {"warmup_steps": 0}), lr=1e-4)
    assert low.loss["post_ln"][0] == full.loss["post_ln"][0]
    assert low.loss["post_ln"][1] != full.loss["post_ln"][1]
    assert E.norm_placement_run(arms=("pre_ln",), **kw).n_params == 0
    with pytest.raises(ValueError, match=r"arms\[1\] must be one of .*'postln'"):
        E.norm_placement_run(arms=("pre_ln", "postln"), **kw)
    with pytest.raises(ValueError, match="arms must name at least one"):
        E.norm_placement_run(arms=(), **kw)
    with pytest.raises(TypeError, match="arms must be a list or tuple"):
        E.norm_placement_run(arms="post_ln", **kw)


def test_norm_placement_run_refuses_a_probe_larger_than_the_held_out_set():
    """probe_size > eval_size used to be cut to eval_size silently; now it names both."""
    sizes = dict(vocab=5, d_model=8, n_heads=2, n_layers=1, d_ff=8, n=2, steps=2, batch_size=2)
    with pytest.raises(ValueError, match=r"probe_size .*eval_size=4.* must be <= 4, got 5"):
        E.norm_placement_run(eval_size=4, probe_size=5, **sizes)
    r = E.norm_placement_run(eval_size=4, probe_size=4, **sizes)  # all of it is allowed
    assert r.probe_steps.tolist() == [0, 2] and np.isfinite(r.top_input_share["post_ln"]).all()


def test_norm_placement_run_refuses_one_feature_up_front():
    """d_model=1 used to end in a ZeroDivisionError in the probe (a LayerNorm over one
    feature outputs its bias alone); now it is refused before training, naming d_model."""
    sizes = dict(vocab=5, n_heads=1, n_layers=1, d_ff=8, n=2, steps=2, batch_size=2, eval_size=4)
    with pytest.raises(ValueError, match=r"d_model must be >= 2, got 1: a LayerNorm over one"):
        E.norm_placement_run(d_model=1, arms=("post_ln",), **sizes)
    r = E.norm_placement_run(d_model=2, arms=("post_ln", "pre_ln"), **sizes)  # two suffice
    for shares in (r.top_input_share, r.norm_input_share, r.branch_input_share):
        assert all(np.isfinite(v).all() for v in shares.values())


def test_norm_placement_gradient_norms_at_init_match_autograd():
    seed, n, vocab = 3, 3, 5
    r = E.norm_placement_run(
        n_layers=12,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n=n,
        vocab=vocab,
        steps=1,
        batch_size=4,
        eval_size=8,
        seed=seed,
        progress=True,
    )
    for arm, norm_first in (("post_ln", False), ("pre_ln", True)):
        # rebuild the model and first batch from the documented seeds
        torch.manual_seed(seed)
        model = DecoderOnlyModel(
            ModelConfig(
                vocab_size=vocab + 1,
                d_model=16,
                n_heads=2,
                n_layers=12,
                d_ff=32,
                arch="decoder",
                max_seq_len=2 * n + 1,
                norm_first=norm_first,
                positional="learned",
                tie_embeddings=False,
            )
        )
        ids, x = E.copy_batch(4, n, vocab, torch.Generator().manual_seed(seed))
        logits = model(ids)[:, n : 2 * n]  # predictions of the copied tokens
        loss = F.cross_entropy(logits.reshape(-1, vocab + 1), x.reshape(-1))
        expected = []
        for layer in model.layers:
            grads = torch.autograd.grad(loss, list(layer.parameters()), retain_graph=True)
            flat = torch.cat([g.flatten() for g in grads])
            expected.append(float(torch.linalg.vector_norm(flat)))
        assert r.grad_norm_init[arm].shape == (12,)
        assert_close(r.grad_norm_init[arm], np.array(expected), atol=0, rtol=1e-5)
        assert r.loss[arm][0] == pytest.approx(float(loss.detach()), rel=1e-6)
    # warmup changes only the updates: the first loss (before any update) is the plain arm's
    assert r.loss["post_ln_warmup"][0] == r.loss["post_ln"][0]
    assert r.loss["pre_ln_warmup"][0] == r.loss["pre_ln"][0]
    assert r.warmup_steps == 0  # steps // 5 with steps = 1
    assert (
        set(r.loss)
        == set(E.NORM_PLACEMENT_ARMS)
        == {"post_ln", "pre_ln", "post_ln_warmup", "pre_ln_warmup"}
    )


def test_norm_placement_warmup_arms_differ_only_by_the_schedule():
    # Without warmup (warmup_steps=0) a warmup arm is its plain arm: same weights, batches, lr.
    kw = dict(
        n_layers=2,
        d_model=16,
        n_heads=2,
        d_ff=32,
        n=3,
        vocab=5,
        steps=6,
        batch_size=4,
        eval_size=8,
        seed=1,
    )
    r0 = E.norm_placement_run(warmup_steps=0, **kw)
    for plain in ("post_ln", "pre_ln"):
        np.testing.assert_array_equal(r0.loss[plain + "_warmup"], r0.loss[plain])
    # With warmup the first update is lr / warmup_steps instead of lr: the second loss differs,
    # the first (before any update) does not.
    r = E.norm_placement_run(warmup_steps=4, **kw)
    for plain in ("post_ln", "pre_ln"):
        assert r.loss[plain + "_warmup"][0] == r.loss[plain][0]
        assert r.loss[plain + "_warmup"][1] != r.loss[plain][1]
        np.testing.assert_array_equal(r.loss[plain], r0.loss[plain])


def test_gradient_norms_at_init_for_several_depths_match_autograd():
    # Each depth's entry: the per-layer norms of a model rebuilt from the documented seeds.
    seed, n, vocab = 3, 3, 5
    g = E.gradient_norms_at_init(
        (1, 4), d_model=16, n_heads=2, d_ff=32, n=n, vocab=vocab, batch_size=4, seed=seed
    )
    assert sorted(g) == [1, 4]
    for L in (1, 4):
        for arm, norm_first in (("post_ln", False), ("pre_ln", True)):
            torch.manual_seed(seed)
            model = DecoderOnlyModel(
                ModelConfig(
                    vocab_size=vocab + 1,
                    d_model=16,
                    n_heads=2,
                    n_layers=L,
                    d_ff=32,
                    arch="decoder",
                    max_seq_len=2 * n + 1,
                    norm_first=norm_first,
                    positional="learned",
                    tie_embeddings=False,
                )
            )
            ids, x = E.copy_batch(4, n, vocab, torch.Generator().manual_seed(seed))
            logits = model(ids)[:, n : 2 * n]
            loss = F.cross_entropy(logits.reshape(-1, vocab + 1), x.reshape(-1))
            expected = [
                float(
                    torch.linalg.vector_norm(
                        torch.cat(
                            [
                                t.flatten()
                                for t in torch.autograd.grad(
                                    loss, list(layer.parameters()), retain_graph=True
                                )
                            ]
                        )
                    )
                )
                for layer in model.layers
            ]
            assert g[L][arm].shape == (L,) and g[L][arm].dtype == np.float64
            assert_close(g[L][arm], np.array(expected), atol=0, rtol=1e-5)


@pytest.mark.parametrize(
    "depths, exc",
    [((3, 2), ValueError), ((), ValueError), ((0, 2), ValueError), ((2, 3.0), TypeError)],
)
def test_gradient_norms_at_init_rejects_bad_depths_naming_them(depths, exc):
    with pytest.raises(exc, match="depth_values"):
        E.gradient_norms_at_init(depths)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"d_model": 0}, ValueError, "d_model"),
        ({"batch_size": 1.5}, TypeError, "batch_size"),
        ({"seed": -1}, ValueError, "seed"),
    ],
)
def test_gradient_norms_at_init_rejects_bad_sizes_naming_them(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        E.gradient_norms_at_init((2,), **kwargs)


def test_norm_placement_run_learns_the_copy():
    r = E.norm_placement_run(
        n_layers=3,
        d_model=32,
        n_heads=2,
        d_ff=64,
        n=4,
        vocab=8,
        steps=150,
        batch_size=16,
        lr=1e-3,
        eval_size=128,
        seed=0,
    )
    assert r.chance_loss == pytest.approx(math.log(8)) and r.warmup_steps == 30
    for arm in ("post_ln", "pre_ln", "post_ln_warmup", "pre_ln_warmup"):
        assert r.loss[arm].shape == (150,)
    # Pre-LN is the control that must learn; the Post-LN arms are what the chapter reports.
    assert r.eval_loss["pre_ln"] < learned_bound(8)
    assert r.eval_accuracy["pre_ln"] > 2 / 8


def test_long_range_recall_run_learns_and_matches_parameter_counts():
    r = E.long_range_recall_run(
        max_k=4,
        n_signal=4,
        n_noise=4,
        d_model=16,
        n_heads=2,
        d_ff=32,
        steps=150,
        batch_size=32,
        eval_every=10,
        eval_per_k=32,
        window=20,
        seed=0,
    )
    # One model alone trains exactly as it does beside the others (chapter 1, exercise 5).
    alone = E.long_range_recall_run(
        max_k=4,
        n_signal=4,
        n_noise=4,
        d_model=16,
        n_heads=2,
        d_ff=32,
        steps=150,
        batch_size=32,
        eval_every=10,
        eval_per_k=32,
        window=20,
        seed=0,
        models=("rnn",),
    )
    assert set(alone.loss) == set(alone.solved_step) == set(alone.hidden_size) == {"rnn"}
    assert alone.hidden_size["rnn"] == r.hidden_size["rnn"]
    assert np.array_equal(alone.loss["rnn"], r.loss["rnn"])
    assert r.seq_len == 5  # max_k + 1
    # A longer sequence: the held-out and training sequences have it, the signal gradient is
    # still read at the signal token, and the attention model's positions cover it.
    longer = E.long_range_recall_run(
        max_k=4,
        n_signal=4,
        n_noise=4,
        d_model=16,
        n_heads=2,
        d_ff=32,
        steps=20,
        batch_size=32,
        eval_every=10,
        eval_per_k=8,
        window=5,
        seed=0,
        seq_len=9,
    )
    assert longer.seq_len == 9 and longer.signal_gradient["rnn"].shape == (4,)
    # Longer sequences give the attention model more learned positions (4 more rows of
    # d_model = 16), so the hidden sizes matched to its parameter count grow with them: the
    # RNN's by a unit here, the LSTM's (4 gates per unit) not yet.
    assert longer.n_params["attention"] == r.n_params["attention"] + 4 * 16
    assert longer.hidden_size["rnn"] > r.hidden_size["rnn"]
    assert longer.hidden_size["lstm"] >= r.hidden_size["lstm"]
    assert np.isfinite(longer.signal_gradient["attention"]).all()
    with pytest.raises(ValueError, match="seq_len"):
        E.long_range_recall_run(max_k=4, steps=1, seq_len=4)
    assert alone.solved_step["rnn"] == r.solved_step["rnn"]
    vocab_size = 4 + 4 + 1
    assert np.array_equal(r.ks, np.arange(1, 5))
    for cell, torch_cls in (("rnn", torch.nn.RNN), ("lstm", torch.nn.LSTM)):
        H = r.hidden_size[cell]
        core = sum(p.numel() for p in torch_cls(16, H).parameters())  # torch's own count
        assert r.n_params[cell] == vocab_size * 16 + core + H * vocab_size
        assert abs(r.n_params[cell] - r.n_params["attention"]) <= 0.05 * r.n_params["attention"]
    # At distances up to 4 every model can carry the token; each must use the input.
    for name in ("rnn", "lstm", "attention"):
        n_run = len(r.loss[name])
        assert 1 <= n_run <= 150 and r.accuracy[name].shape == (4,)
        assert r.eval_loss[name] < learned_bound(4), name
        assert r.accuracy[name].mean() > 2 * r.chance_accuracy, name
        # Measurements every 10 updates from 0, the last one after the last update.
        at, hist = r.eval_steps[name], r.accuracy_history[name]
        assert at[0] == 0 and at[-1] == n_run and hist.shape == (len(at), 4)
        assert np.array_equal(at[:-1], np.arange(0, n_run, 10)[: len(at) - 1])
        assert_close(hist[-1], r.accuracy[name], atol=0, rtol=0)
        # Stopped early exactly when every distance reached solve_accuracy at once.
        solved = (hist >= r.solve_accuracy).all(axis=1)
        if r.solved_step[name] is None:
            assert n_run == 150 and not solved.any()
        else:
            assert r.solved_step[name] == n_run and solved[-1] and not solved[:-1].any()
        for j in range(4):  # first measurement at or above the threshold, by a loop
            hits = [s for s, a in zip(at, hist[:, j]) if a >= r.solve_accuracy]
            got = r.steps_to_solve[name][j]
            assert (got == hits[0]) if hits else np.isnan(got)
        if n_run >= 40:
            expected = np.mean(r.loss[name][-20:]) / np.mean(r.loss[name][-40:-20]) - 1
            assert r.loss_change[name] == pytest.approx(expected, rel=1e-12)
        else:
            assert np.isnan(r.loss_change[name])
        assert r.signal_gradient[name].shape == (4,)
        assert np.isfinite(r.signal_gradient[name]).all() and (r.signal_gradient[name] > 0).all()


def test_relative_loss_change_hand_cases():
    assert E.relative_loss_change([4.0, 4.0, 2.0, 2.0], 2) == pytest.approx(-0.5)
    assert E.relative_loss_change([9.0, 1.0, 1.0, 3.0, 3.0], 2) == pytest.approx(2.0)
    assert E.relative_loss_change([1.0, 1.0, 1.0], 1) == 0.0
    assert math.isnan(E.relative_loss_change([1.0, 2.0, 3.0], 2))  # needs 2 * window values
    with pytest.raises(ValueError, match="window"):
        E.relative_loss_change([1.0, 2.0], 0)
    with pytest.raises(TypeError, match="window"):
        E.relative_loss_change([1.0, 2.0], 1.0)
    with pytest.raises(ValueError, match="curve"):
        E.relative_loss_change([[1.0, 2.0]], 1)
    with pytest.raises(TypeError, match="curve"):
        E.relative_loss_change(["a", "b"], 1)


@pytest.mark.parametrize(
    "curve", [[1.0, math.nan, 1.0, 1.0], [1.0, 1.0, math.inf, 1.0], [math.nan, 2.0, 1.0, 1.0]]
)
def test_relative_loss_change_rejects_non_finite_losses(curve):
    # Was nan, or -1.0 for an inf (a plateau read as "the loss fell to 0").
    with pytest.raises(ValueError, match="curve"):
        E.relative_loss_change(curve, 1)


def test_relative_loss_change_when_the_earlier_window_averages_zero():
    # 0 / 0 gave nan with a RuntimeWarning; x / 0 gave inf.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert E.relative_loss_change([0.0, 0.0, 0.0, 0.0], 2) == 0.0
        with pytest.raises(ValueError, match="curve.*averages 0"):
            E.relative_loss_change([0.0, 0.0, 1.0, 1.0], 2)


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"clip_norm": 0.0}, ValueError, "clip_norm"),
        ({"clip_norm": "1"}, TypeError, "clip_norm"),
        ({"solve_accuracy": 1.5}, ValueError, "solve_accuracy"),
        ({"solve_accuracy": 0.0}, ValueError, "solve_accuracy"),
        ({"eval_every": 0}, ValueError, "eval_every"),
        ({"window": 0}, ValueError, "window"),
        ({"clip_norm": math.nan}, ValueError, "clip_norm"),
        ({"clip_norm": math.inf}, ValueError, "clip_norm"),
        ({"clip_norm": -1.0}, ValueError, "clip_norm"),
        ({"clip_norm": True}, TypeError, "clip_norm"),
        ({"window": 1.5}, TypeError, "window"),
        ({"progress": "no"}, TypeError, "progress"),
        ({"progress": 0}, TypeError, "progress"),
        ({"models": ()}, ValueError, "models"),
        ({"models": ("gru",)}, ValueError, "models"),
    ],
)
def test_long_range_recall_run_rejects_bad_settings(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        E.long_range_recall_run(**kwargs)


def test_signal_gradient_matches_autograd_on_the_embeddings():
    """The hook-based measurement against torch.autograd.grad on explicit embeddings."""
    max_k, n_signal, n_noise, d_model = 5, 3, 4, 8
    vocab = n_signal + n_noise + 1
    gen = torch.Generator().manual_seed(3)
    k = torch.tensor([1, 2, 3, 4, 5, 5, 2, 1, 3, 4])
    ids, target, _ = E.delayed_recall_batch(10, max_k, n_signal, n_noise, gen, k=k)
    torch.manual_seed(0)
    model = E._RecurrentClassifier("rnn", vocab, d_model, 6).double()
    got = E._signal_gradient(model, lambda m, x: m(x), ids, target, k, max_k)
    e = model.embed(ids).detach().requires_grad_(True)  # (N, T, d_model)
    _, h = model.rnn(e)
    per_seq = F.cross_entropy(model.head(h), target, reduction="none")  # (N,)
    norms = np.empty(len(k))
    for b in range(len(k)):  # each sequence's own loss, its own signal position
        (g,) = torch.autograd.grad(per_seq[b], e, retain_graph=True)
        norms[b] = g[b, max_k - int(k[b])].norm().item()
        assert g[np.arange(len(k)) != b].abs().max() == 0  # no leak between sequences
    expected = np.array([norms[(k == d).numpy()].mean() for d in range(1, max_k + 1)])
    assert_close(got, expected, atol=0, rtol=1e-10)
    assert all(p.grad is None for p in model.parameters())  # leaves no gradient behind


def test_cross_attention_run_learns_reversal_and_returns_a_stochastic_map():
    r = E.cross_attention_run(
        n=4,
        vocab=6,
        d_model=32,
        n_heads=2,
        d_ff=64,
        steps=150,
        batch_size=32,
        eval_size=128,
        seed=0,
    )
    assert np.array_equal(r.target, r.source[::-1])
    assert r.cross_attention.shape == (1, 2, 4, 4)
    assert (r.cross_attention >= 0).all()
    assert_close(r.cross_attention.sum(-1), np.ones((1, 2, 4)), atol=1e-6, rtol=0)
    assert r.mirror_mass.shape == (1, 2) and ((0 <= r.mirror_mass) & (r.mirror_mass <= 1)).all()
    assert r.eval_loss < learned_bound(6)
    assert r.eval_accuracy > 2 / 6
    assert r.ablation_accuracy is None and r.ablation_copied is None  # not asked for


def test_cross_attention_run_ablations_show_the_model_copies_where_it_attends():
    kw = dict(n=4, vocab=6, d_model=32, n_heads=2, d_ff=64, steps=150, batch_size=32, eval_size=128)
    r = E.cross_attention_run(**kw, seed=0, ablations=True)
    acc, copied = r.ablation_accuracy, r.ablation_copied
    assert set(acc) == {"mirror", "shifted", "uniform"} and set(copied) == {"mirror", "shifted"}
    assert all(0 <= v <= 1 for v in [*acc.values(), *copied.values()])
    # The mirrored source token is the target: for the exact mirror map, copying the token it
    # points to and being right are the same event.
    assert copied["mirror"] == acc["mirror"]
    # This seeded run (one thread, deterministic) learned the mirror map (tests above): the
    # exact map keeps its accuracy; moved by one position, the model copies the token the map
    # points to and so falls below what a learned model reaches.
    assert acc["mirror"] >= r.eval_accuracy - 0.1
    assert acc["shifted"] < 2 / 6 < r.eval_accuracy and copied["shifted"] > 0.9
    assert acc["uniform"] < r.eval_accuracy - 0.3


def _tiny_encoder_decoder(seed: int):
    """A float64 two-layer Pre-LN encoder-decoder in eval mode, a (3, 5) source and a (3, 4)
    target batch, all drawn after ``torch.manual_seed(seed)``."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=7,
        d_model=8,
        n_heads=2,
        n_layers=2,
        n_encoder_layers=1,
        d_ff=16,
        arch="encoder-decoder",
        max_seq_len=5,
        positional="learned",
        norm_first=True,
    )
    model = EncoderDecoderModel(cfg).double().eval()
    return model, torch.randint(6, (3, 5)), torch.randint(7, (3, 4))


def test_logits_with_cross_attention_replace_the_weights_and_nothing_else():
    model, src, tgt = _tiny_encoder_decoder(seed=5)
    with torch.no_grad():
        logits, w = E._cross_attention_weights(model, src, tgt)  # (B, n_layers, H, T, S)
        # The model's own weights give back its own logits (the trained map "ablated" by itself).
        own = E._logits_with_cross_attention(model, src, tgt, w)
        assert_close(own, logits, atol=1e-12, rtol=0)
        # Uniform weights: each cross-attention outputs o_proj of the mean of its value rows,
        # written out here for both layers (Pre-LN decoder layer as in the test above).
        uniform = torch.full((4, 5), 0.2, dtype=torch.float64)  # (T, S)
        got = E._logits_with_cross_attention(model, src, tgt, uniform)
        memory = model.encode(src)
        x = model.tgt_embed(tgt, torch.arange(4))
        for layer in model.decoder:
            x = x + layer.self_attn(layer.norm1(x), causal=True)
            ca = layer.cross_attn
            v = ca.v_proj(memory).view(3, 5, 2, 4)  # (B, S, H, D)
            mean_v = v.mean(dim=1).reshape(3, 1, 8).expand(3, 4, 8)  # (B, T, H*D)
            x = x + ca.o_proj(mean_v)
            x = x + layer.ffn(layer.norm3(x))
        expected = model.lm_head(model.decoder_norm(x))
        assert_close(got, expected, atol=1e-12, rtol=0)
        assert (got - logits).abs().max() > 1e-3  # the weights mattered
        # The hooks are gone: the model is its own again.
        assert torch.equal(model(src, tgt), logits)


def test_cross_attention_run_snapshots_record_the_map_as_it_is_learned():
    kw = dict(
        n=4, vocab=6, d_model=32, n_heads=2, d_ff=64, steps=30, batch_size=32, eval_size=64, seed=0
    )
    plain = E.cross_attention_run(**kw)
    r = E.cross_attention_run(**kw, snapshot_steps=range(0, 31, 10), ablations=True)
    assert plain.snapshots is None and plain.snapshot_steps is None
    assert plain.snapshot_mirror_mass is None
    # Snapshots (and the ablations after training) draw no random numbers and leave the model
    # training: the same run.
    assert_close(r.loss, plain.loss, atol=0, rtol=0)
    assert_close(r.cross_attention, plain.cross_attention, atol=0, rtol=0)
    assert r.snapshot_steps.dtype == np.int64 and list(r.snapshot_steps) == [0, 10, 20, 30]
    assert r.snapshots.dtype == np.float64 and r.snapshots.shape == (4, 1, 2, 4, 4)
    assert r.snapshot_mirror_mass.shape == (4, 1, 2)
    assert plain.snapshot_accuracy is None
    assert r.snapshot_accuracy.dtype == np.float64 and r.snapshot_accuracy.shape == (4,)
    assert_close(r.snapshots.sum(-1), np.ones((4, 1, 2, 4)), atol=1e-6, rtol=0)
    # The snapshot after the last update is the trained model's map.
    assert_close(r.snapshots[-1], r.cross_attention, atol=0, rtol=0)
    assert_close(r.snapshot_mirror_mass[-1], r.mirror_mass, atol=0, rtol=0)
    assert r.snapshot_accuracy[-1] == r.eval_accuracy
    # Snapshot 0 is the untrained model: the same seed with one update so small (Adam moves each
    # weight by about lr) that it changes nothing measurable ends where snapshot 0 is ...
    frozen = E.cross_attention_run(**{**kw, "steps": 1, "lr": 1e-12})
    assert_close(r.snapshots[0], frozen.cross_attention, atol=1e-9, rtol=0)
    assert_close(r.snapshot_mirror_mass[0], frozen.mirror_mass, atol=1e-9, rtol=0)
    assert r.snapshot_accuracy[0] == frozen.eval_accuracy
    # ... while ten real updates move it.
    assert np.abs(r.snapshots[1] - r.snapshots[0]).max() > 1e-3


@pytest.mark.parametrize(
    "snapshot_steps, exc, match",
    [
        ((0, 31), ValueError, "snapshot_steps\\[1\\] must be <= 30"),
        ((-1, 5), ValueError, "snapshot_steps\\[0\\] must be >= 0"),
        ((10, 5), ValueError, "strictly increasing"),
        ((), ValueError, "must not be empty"),
        ((0, 2.0), TypeError, "snapshot_steps\\[1\\]"),
        ("0", TypeError, "snapshot_steps"),
        (25, TypeError, "snapshot_steps"),
        (np.array(2), TypeError, r"snapshot_steps must be a sequence .*array of shape \(\)"),
        ({0, 3}, TypeError, r"snapshot_steps must be a sequence .*\(set\)"),
    ],
)
def test_cross_attention_run_rejects_bad_snapshot_steps(snapshot_steps, exc, match):
    with pytest.raises(exc, match=match):
        E.cross_attention_run(steps=30, snapshot_steps=snapshot_steps)


@pytest.mark.parametrize("ablations", [1, "yes", None])
def test_cross_attention_run_rejects_ablations_that_are_not_a_bool(ablations):
    with pytest.raises(TypeError, match="ablations"):
        E.cross_attention_run(steps=30, ablations=ablations)


def test_cross_attention_run_refuses_ablations_for_one_position():
    # With n=1 the "shifted" map (n - 2 - i) mod n is the mirror map: the ablation would
    # report two identical maps as if they were different.
    with pytest.raises(ValueError, match="ablations need n >= 2 .*got n=1"):
        E.cross_attention_run(n=1, steps=1, batch_size=2, eval_size=2, ablations=True)


def test_cross_attention_weights_match_a_float64_reference():
    model, src, tgt = _tiny_encoder_decoder(seed=4)
    with torch.no_grad():
        logits, w = E._cross_attention_weights(model, src, tgt)
        assert torch.equal(logits, model(src, tgt))  # the hooks change nothing
        memory = model.encode(src)
        x = model.tgt_embed(tgt, torch.arange(4))
        for i, layer in enumerate(model.decoder):  # Pre-LN decoder layer, written out
            x = x + layer.self_attn(layer.norm1(x), causal=True)
            h = layer.norm2(x)
            ca = layer.cross_attn
            q = ca.q_proj(h).view(3, 4, 2, 4).transpose(1, 2)  # (B, H, T, D)
            k = ca.k_proj(memory).view(3, 5, 2, 4).transpose(1, 2)  # (B, H, S, D)
            expected = torch.softmax(q @ k.transpose(-1, -2) / 2.0, dim=-1)  # sqrt(D) = 2
            assert_close(w[:, i], expected, atol=1e-12, rtol=0)
            x = x + ca(h, memory)
            x = x + layer.ffn(layer.norm3(x))


@pytest.mark.parametrize(
    "run",
    [
        E.scaling_run,
        E.norm_placement_run,
        E.long_range_recall_run,
        E.cross_attention_run,
        E.position_extrapolation_run,
        E.copy_capacity_run,
    ],
)
@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"steps": 0}, "steps"),
        ({"lr": 0.0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"num_threads": 0}, "num_threads"),
        ({"batch_size": 0}, "batch_size"),
    ],
)
def test_runs_reject_bad_arguments(run, kwargs, name):
    before = torch.get_num_threads()
    with pytest.raises(ValueError, match=name):
        run(**kwargs)
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    "run",
    [
        E.scaling_run,
        E.norm_placement_run,
        E.long_range_recall_run,
        E.cross_attention_run,
        E.position_extrapolation_run,
        E.copy_capacity_run,
    ],
)
@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"steps": 2.0}, TypeError, "steps"),
        ({"d_model": True}, TypeError, "d_model"),
        ({"lr": "0.01"}, TypeError, "lr"),
        ({"seed": -1}, ValueError, "seed"),
        ({"seed": 0.5}, TypeError, "seed"),
        ({"num_threads": 1.0}, TypeError, "num_threads"),
    ],
)
def test_runs_reject_arguments_of_the_wrong_kind(run, kwargs, exc, name):
    before = torch.get_num_threads()
    with pytest.raises(exc, match=name):
        run(**kwargs)
    assert torch.get_num_threads() == before


# ---- chapter 08: positions beyond the trained length ------------------------------------------


def test_offset_copy_batch_asks_for_the_token_offset_back():
    ids, target = E.offset_copy_batch(5, 9, 3, 4, torch.Generator().manual_seed(0))
    assert ids.shape == (5, 9) and target.shape == (5, 6)
    assert ids.dtype == target.dtype == torch.int64
    assert int(ids.min()) >= 0 and int(ids.max()) < 4
    for t in range(3, 9):  # the answer at position t is the token at t - 3
        assert torch.equal(target[:, t - 3], ids[:, t - 3])
    with pytest.raises(ValueError, match="seq_len 3 must be > offset 3"):
        E.offset_copy_batch(2, 3, 3, 4, torch.Generator())
    with pytest.raises(ValueError, match="offset"):
        E.offset_copy_batch(2, 3, 0, 4, torch.Generator())


def _attention_by_hand(model, ids, positions, rope):
    """First-layer causal self-attention weights of a one-layer Pre-LN decoder, float64."""
    attn = model.layers[0].self_attn
    x = model.embed(ids, positions)  # (B, T, d)
    h = model.layers[0].norm1(x)
    B, T, _ = h.shape
    q = attn.q_proj(h).view(B, T, 2, 4).transpose(1, 2)  # (B, H, T, D)
    k = attn.k_proj(h).view(B, T, 2, 4).transpose(1, 2)  # (B, H, T, D)
    if rope:
        q, k = ann_apply_rope(q, positions), ann_apply_rope(k, positions)
    scores = q @ k.transpose(-1, -2) / 2.0  # sqrt(D) = 2
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(scores, dim=-1)  # (B, H, T, T)


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_self_attention_weights_match_a_float64_reference(positional):
    torch.manual_seed(5)
    cfg = ModelConfig(
        vocab_size=7,
        d_model=8,
        n_heads=2,
        n_layers=1,
        d_ff=16,
        arch="decoder",
        max_seq_len=12,
        positional=positional,
        norm_first=True,
    )
    model = DecoderOnlyModel(cfg).double().eval()
    ids = torch.randint(7, (3, 6))
    pos = torch.arange(4, 10)  # not starting at 0
    with torch.no_grad():
        logits, w = E._self_attention_weights(model, ids, pos)
        assert torch.equal(logits, model(ids, positions=pos))  # the hook changes nothing
        expected = _attention_by_hand(model, ids, pos, positional == "rope")
    assert_close(w, expected, atol=1e-12, rtol=0)


def test_position_extrapolation_run_measures_every_kind():
    r = E.position_extrapolation_run(
        train_len=8,
        eval_len=16,
        offset=2,
        vocab=6,
        d_model=16,
        n_heads=2,
        d_ff=32,
        steps=200,
        batch_size=32,
        eval_size=128,
        kinds=("learned", "rope", "none"),
    )
    assert r.kinds == ("learned", "rope", "none")
    assert np.array_equal(r.positions, np.arange(2, 16))
    for kind in r.kinds:
        assert r.accuracy[kind].shape == (14,) and r.loss[kind].shape == (200,)
        assert_close(r.inside_accuracy[kind], r.accuracy[kind][:6].mean(), atol=1e-15, rtol=0)
        assert_close(r.beyond_accuracy[kind], r.accuracy[kind][6:].mean(), atol=1e-15, rtol=0)
        # before position train_len no key is train_len or more positions back
        assert (r.unseen_weight[kind][:6] == 0).all()
        assert ((r.unseen_weight[kind] >= 0) & (r.unseen_weight[kind] <= 1 + 1e-6)).all()
    # Without absolute positions a causal model cannot tell a shifted sequence from the
    # original (RoPE: scores depend on i - j only), and its outputs at positions < train_len
    # of the long sequences do not see the later tokens: the two accuracies agree, up to
    # argmax flips from rounding (at most one in a hundred answers allowed).
    for kind in ("rope", "none"):
        assert abs(r.shifted_accuracy[kind] - r.inside_accuracy[kind]) <= 0.01
    # The learned table's rows 8..15 were never looked up in training: not one bit moved.
    assert r.untrained_rows_change == 0.0
    assert r.inside_accuracy["learned"] > 2 / 6  # it learned the task where it was trained
    assert r.chance_accuracy == 1 / 6 and r.chance_loss == math.log(6)
    assert r.n_params["learned"] - r.n_params["rope"] == 16 * 16  # the table: eval_len rows


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"train_len": 3, "offset": 3}, ValueError, "train_len"),
        ({"eval_len": 32}, ValueError, "eval_len"),
        ({"kinds": ()}, ValueError, "kinds"),
        ({"kinds": ("rope", "rope")}, ValueError, "kinds"),
        ({"kinds": ("alibi",)}, ValueError, "kinds"),
        ({"kinds": "rope"}, TypeError, "kinds"),
        ({"embed_scale": 1}, TypeError, "embed_scale"),
    ],
)
def test_position_extrapolation_run_rejects_bad_settings(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        E.position_extrapolation_run(**kwargs)


# --------------------------------------------------------------------------------------------
# Chapter 07: multi_source_batch and heads_run
# --------------------------------------------------------------------------------------------


def test_multi_source_batch_targets_are_the_marked_tokens_contents():
    x, target, types = E.multi_source_batch(64, 8, 3, 4, torch.Generator().manual_seed(0))
    assert x.shape == (64, 8, 4 + 3 + 2) and target.shape == (64, 12) and types.shape == (64, 8)
    assert x.dtype == torch.float32 and types.dtype == torch.int64
    for b in range(64):
        t = types[b].tolist()
        assert t[-1] == 1 and t.count(1) == 1  # one query, the last token
        assert sorted(v for v in t if v >= 2) == [2, 3, 4]  # one token of each source type
        # The one-hot type after the contents, written out.
        assert torch.equal(x[b, :, 4:], torch.eye(5)[types[b]])
        for k in range(3):  # source k's contents, found by its type, in slot k of the target
            j = t.index(k + 2)
            assert torch.equal(target[b, 4 * k : 4 * (k + 1)], x[b, j, :4])


def test_multi_source_batch_rejects_too_short_sequences():
    gen = torch.Generator()
    with pytest.raises(ValueError, match="seq_len 3 must be > n_sources 3"):
        E.multi_source_batch(2, 3, 3, 4, gen)
    with pytest.raises(ValueError, match="content_dim"):
        E.multi_source_batch(2, 8, 3, 0, gen)


def test_heads_run_several_heads_gather_what_one_head_cannot():
    """The claim of chapter 07 at a smaller budget: 3 heads solve 3 sources, 1 head does not.

    The bound 1 - 1/K = 2/3 for one head whose weights ignore the contents (hand derivation in
    the chapter); a trained head may use the contents and do a little better, never near 0.
    """
    r = E.heads_run(n_heads=(1, 3), seeds=(0,), steps=200, eval_size=512, n_examples=2)
    assert r.n_params[0] == r.n_params[1] == (9 * 24 + 24) + 4 * 24 * 24 + (24 * 12 + 12)
    assert_close(r.bound, np.array([2 / 3, 0.0]), atol=1e-15, rtol=0)
    assert r.unexplained[0, 0] > 0.4, r.unexplained
    assert r.unexplained[1, 0] < 0.02, r.unexplained
    assert r.weights[0].shape == (2, 1, 8) and r.weights[1].shape == (2, 3, 8)
    assert_close(r.weights[1].sum(-1), np.ones((2, 3)), atol=1e-6, rtol=0)
    assert r.prediction.shape == (2, 2, 3, 4) and r.target.shape == (2, 3, 4)
    assert r.loss.shape == (2, 1, 200) and np.isfinite(r.loss).all()
    # The unexplained variance, recomputed from the kept examples' outputs, is small too.
    assert np.abs(r.prediction[1] - r.target).max() < 0.5


def test_heads_run_standard_error_of_the_missed_variance():
    """``unexplained_se``, recomputed from every held-out output, and checked by resampling.

    With ``n_examples = eval_size`` the run keeps all held-out outputs (first seed), so the
    ratio and its delta-method standard error can be recomputed in NumPy; a bootstrap over
    the sequences must give about the same spread.
    """
    r = E.heads_run(n_heads=(1,), seeds=(0,), steps=30, eval_size=400, n_examples=400)
    pred = r.prediction[0].reshape(400, -1)  # (E, K m)
    target = r.target.reshape(400, -1)
    a = ((pred - target) ** 2).sum(-1)
    b = ((target - target.mean(0)) ** 2).sum(-1)
    assert r.unexplained[0, 0] == pytest.approx(a.sum() / b.sum(), rel=1e-9)
    ratio = a.sum() / b.sum()
    se = np.sqrt(400 / 399 * ((a - ratio * b) ** 2).sum()) / b.sum()
    assert r.unexplained_se[0, 0] == pytest.approx(se, rel=1e-9)
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(400):
        i = rng.integers(0, 400, 400)
        t = target[i]
        boot.append(((pred[i] - t) ** 2).sum() / ((t - t.mean(0)) ** 2).sum())
    assert 0.8 < np.std(boot) / r.unexplained_se[0, 0] < 1.25


def test_heads_run_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_heads 5 must divide d_model 24"):
        E.heads_run(n_heads=(5,))
    with pytest.raises(ValueError, match="n_examples 9 must be <= eval_size 8"):
        E.heads_run(eval_size=8, n_examples=9)
    with pytest.raises(ValueError, match="n_heads and seeds"):
        E.heads_run(seeds=())
    with pytest.raises(ValueError, match="eval_size must be >= 2 .*got 1"):
        E.heads_run(eval_size=1, n_examples=1)  # was a ZeroDivisionError in _unexplained_se
    # A bare int was a TypeError from deep inside ("'int' object is not iterable").
    with pytest.raises(TypeError, match="n_heads must be a list or tuple"):
        E.heads_run(n_heads=4)
    with pytest.raises(TypeError, match="seeds must be a list or tuple"):
        E.heads_run(seeds=0)
    with pytest.raises(ValueError, match=r"seeds\[0\]"):
        E.heads_run(seeds=(-1,))
    with pytest.raises(TypeError, match="progress"):
        E.heads_run(progress="no")


def test_runs_name_a_progress_that_is_not_a_bool():
    with pytest.raises(TypeError, match="progress"):
        E.cross_attention_run(steps=1, progress="no")
    with pytest.raises(TypeError, match="progress"):
        E.scaling_run(steps=1, progress="no")
    with pytest.raises(TypeError, match="progress"):
        E.norm_placement_run(steps=1, progress="no")
    with pytest.raises(ValueError, match="names an entry twice"):
        E.norm_placement_run(steps=1, arms=("post_ln", "post_ln"))
    with pytest.raises(ValueError, match="eval_size must be >= 2"):  # not probe_size
        E.norm_placement_run(steps=1, eval_size=1)
    with pytest.raises(TypeError, match="models must be a list or tuple"):
        E.long_range_recall_run(models="lstm")


# ---- chapter 01: the copy run -------------------------------------------------------------------


def test_copy_capacity_run_counts_and_learns_a_short_copy():
    """Tiny grid: counts by hand and from torch's own LSTM; attention copies two tokens; the
    same seed gives the same accuracies (chapter 1 checks a live point against the CSV)."""
    kw = dict(
        n_items=(2, 3),
        hidden_sizes=(4, 8),
        vocab=3,
        d_model=16,
        n_heads=2,
        d_ff=32,
        steps=80,
        batch_size=32,
        eval_size=64,
        seed=0,
    )
    r = E.copy_capacity_run(**kw)
    assert r.n_items.tolist() == [2, 3] and r.hidden_sizes.tolist() == [4, 8]
    assert r.lstm_accuracy.shape == (2, 2) and r.attention_accuracy.shape == (2,)
    assert r.time_s.shape == (3, 2) and (r.time_s > 0).all()
    for i, h in enumerate((4, 8)):
        core = sum(p.numel() for p in torch.nn.LSTM(16, h).parameters())  # torch's own count
        assert r.lstm_params[i] == 4 * 16 + core + h * 4  # embedding (3 + SEP) and readout
    assert r.lstm_state_floats.tolist() == [8, 16]  # h and c
    assert r.attention_read_floats.tolist() == [2 * 4 * 16, 2 * 6 * 16]  # K and V of 2n tokens
    for j, n in enumerate((2, 3)):  # learned positions: 2n + 1 rows of width 16
        torch.manual_seed(0)
        config = ModelConfig(
            vocab_size=4,
            d_model=16,
            n_heads=2,
            n_layers=1,
            d_ff=32,
            arch="decoder",
            max_seq_len=2 * n + 1,
            norm="layernorm",
            norm_first=True,
            ffn="relu",
            bias=True,
            positional="learned",
            tie_embeddings=False,
        )
        assert r.attention_params[j] == sum(
            p.numel() for p in DecoderOnlyModel(config).parameters()
        )
    assert r.chance_accuracy == 1 / 3
    # Accuracy is a fraction of 64 * n held-out tokens.
    for acc, n in (
        (r.lstm_accuracy[:, 0], 2),
        (r.lstm_accuracy[:, 1], 3),
        (r.attention_accuracy, np.array([2, 3])),
    ):
        assert np.allclose(np.round(acc * 64 * n), acc * 64 * n)
    assert r.attention_accuracy[0] > 0.9
    again = E.copy_capacity_run(**{**kw, "n_items": (2,), "hidden_sizes": (8,)})
    assert again.lstm_accuracy[0, 0] == r.lstm_accuracy[1, 0]
    assert again.attention_accuracy[0] == r.attention_accuracy[0]


@pytest.mark.parametrize(
    "kwargs, exc, name",
    [
        ({"n_items": ()}, ValueError, "n_items"),
        ({"n_items": (8, 4)}, ValueError, "n_items"),
        ({"n_items": (0, 4)}, ValueError, "n_items"),
        ({"n_items": 4}, TypeError, "n_items"),
        ({"hidden_sizes": (16, 16)}, ValueError, "hidden_sizes"),
        ({"hidden_sizes": (2.0,)}, TypeError, "hidden_sizes"),
        ({"vocab": 1}, ValueError, "vocab"),
        ({"d_model": 10, "n_heads": 3}, ValueError, "n_heads"),
        ({"clip_norm": 0.0}, ValueError, "clip_norm"),
    ],
)
def test_copy_capacity_run_rejects_bad_settings(kwargs, exc, name):
    with pytest.raises(exc, match=name):
        E.copy_capacity_run(**kwargs)


def test_the_largest_seed_is_accepted_and_its_held_out_seed_wraps():
    # seed + 1 (the held-out set's generator) wraps modulo 2**64 instead of overflowing torch.
    r = E.cross_attention_run(
        n=3,
        vocab=4,
        d_model=4,
        n_heads=1,
        n_layers=1,
        d_ff=4,
        steps=1,
        batch_size=2,
        eval_size=2,
        seed=2**64 - 1,
    )
    assert np.isfinite(r.loss).all()


def test_scaling_run_score_step_measures_the_2x2_designs_step_sizes():
    """``score_step``: how far each of the first updates moves the softmax's scores (probe batch).

    The 2x2 design's premise, measured: with ``qk_lr_gain = sqrt(d_k)`` the big-step arm's
    scores move about as far per step as the unscaled arm's, ``sqrt(d_k)`` times the scaled
    arm's; with ``small_step_gain = 1/sqrt(d_k)`` the small-step arm's move about as far as the
    scaled arm's. The first record is checked by hand: the probe batch is the first training
    batch, so a fresh model's probe scores, one Adam step (on that batch) later, give it.
    """
    kw = dict(**TINY_SCALING, eval_size=8, seed=2)
    r = E.scaling_run(steps=6, score_steps=5, qk_lr_gain=8.0, small_step_gain=1 / 8, **kw)
    for arm in ("scaled", "unscaled", "big-step", "small-step"):
        assert r.score_step[arm].shape == (5,) and (r.score_step[arm] > 0).all()
    move = {arm: float(np.mean(v)) for arm, v in r.score_step.items()}
    assert move["unscaled"] / move["scaled"] > 4  # sqrt(64) = 8, to first order
    assert move["big-step"] / move["scaled"] > 4
    assert 0.5 < move["small-step"] / move["scaled"] < 2
    assert 0.5 < move["unscaled"] / move["big-step"] < 2
    # By hand, the scaled arm's first update.
    torch.manual_seed(2)
    model = E._RetrievalModel(
        TINY_SCALING["n_keys"],
        TINY_SCALING["n_values"],
        TINY_SCALING["d_model"],
        TINY_SCALING["head_dim"],
        TINY_SCALING["d_ff"],
        None,
        1.0,
    )
    batch = E.kv_recall_batch(
        TINY_SCALING["batch_size"],
        TINY_SCALING["n_pairs"],
        TINY_SCALING["n_keys"],
        TINY_SCALING["n_values"],
        torch.Generator().manual_seed(2),
    )
    before = _query_scores(model, batch).detach()
    opt = torch.optim.Adam(model.parameters(), lr=r.lr, foreach=True)
    F.cross_entropy(model(*batch[:3])[0], batch[3]).backward()
    opt.step()
    by_hand = float((_query_scores(model, batch).detach() - before).abs().mean())
    assert r.score_step["scaled"][0] == pytest.approx(by_hand, rel=1e-5)
    assert E.scaling_run(steps=2, score_steps=0, **kw).score_step["scaled"].shape == (0,)
    assert E.scaling_run(steps=2, score_steps=3, **kw).score_step["scaled"].shape == (2,)
    with pytest.raises(ValueError, match="score_steps"):
        E.scaling_run(steps=2, score_steps=-1, **kw)


def test_scaling_run_arms_trains_only_the_named_arms_as_the_full_run_does():
    """``arms``: a subset of the arms, each trained exactly as in the run with all of them."""
    kw = dict(**TINY_SCALING, eval_size=8, seed=3, steps=3, qk_lr_gain=4.0)
    full = E.scaling_run(**kw)
    one = E.scaling_run(arms=("big-step",), **kw)
    assert set(one.loss) == set(one.score_step) == set(one.scales) == {"big-step"}
    assert_close(one.loss["big-step"], full.loss["big-step"], atol=1e-6, rtol=1e-6)
    assert_close(one.score_step["big-step"], full.score_step["big-step"], atol=1e-9, rtol=1e-6)
    two = E.scaling_run(arms=["unscaled", "scaled"], **kw)
    assert list(two.loss) == ["scaled", "unscaled"]  # the usual order
    with pytest.raises(ValueError, match=r"arms\[0\]"):  # small-step needs small_step_gain
        E.scaling_run(arms=("small-step",), **kw)
    with pytest.raises(ValueError, match="arms"):
        E.scaling_run(arms=(), **kw)
    with pytest.raises(ValueError, match="twice"):
        E.scaling_run(arms=("scaled", "scaled"), **kw)
    with pytest.raises(TypeError, match="arms"):
        E.scaling_run(arms="scaled", **kw)


def test_match_step_gain_finds_the_gain_whose_steps_match_the_target_arms():
    """The gain found makes the arm's first updates move the scores as far as the target's.

    Checked independently of the search: a full :func:`scaling_run` with the gain it returns
    (both arms, the usual run) gives the same ratio of mean score changes, within ``rtol`` of 1.
    At this tiny size the first-order gain sqrt(d_k) = 8 falls short for the big-step arm (at the
    book's size it overshoots: the ``dq . dk`` term grows like the gain squared), so the search
    has to move away from it.
    """
    kw = dict(**TINY_SCALING, seed=4, score_steps=4)
    for arm, gain_name, target in (
        ("big-step", "qk_lr_gain", "unscaled"),
        ("small-step", "small_step_gain", "scaled"),
    ):
        m = E.match_step_gain(arm, rtol=0.05, **kw)
        assert m.arm == arm and m.target == target == E.STEP_MATCH_TARGETS[arm]
        assert m.matched and abs(math.log(m.ratio)) <= math.log(1.05)
        assert m.trials[0][0] == pytest.approx(8.0 if arm == "big-step" else 1 / 8)
        assert m.trials[-1] == (m.gain, m.ratio) and 1 <= len(m.trials) <= 8
        run = E.scaling_run(steps=4, eval_size=8, **{gain_name: m.gain}, **kw)
        ratio = run.score_step[arm].mean() / run.score_step[target].mean()
        assert ratio == pytest.approx(m.ratio, rel=1e-5)
        assert m.arm_step == pytest.approx(run.score_step[arm].mean(), rel=1e-5)
        assert m.target_step == pytest.approx(run.score_step[target].mean(), rel=1e-5)
    big = E.match_step_gain("big-step", **kw)
    assert big.trials[0][1] < 1 / 1.05 and big.gain > 8.0 and len(big.trials) > 1
    # One trial only: returned unmatched, not raised.
    once = E.match_step_gain("big-step", max_trials=1, rtol=0.01, **kw)
    assert len(once.trials) == 1 and once.matched is False and once.gain == 8.0


def test_match_step_gain_names_lr_arm_and_keeps_the_first_gain_in_range():
    kw = dict(**TINY_SCALING, score_steps=1, max_trials=1)
    # an lr too small to move float32 weights: the target's steps are 0 (was ZeroDivisionError)
    with pytest.raises(
        ValueError,
        match=r"the scores of the unscaled arm did not move at lr=1e-300 \(mean score change "
        r"per update 0\)",
    ):
        E.match_step_gain("big-step", lr=1e-300, **kw)
    # an lr far past training (was a probabilities error that did not name lr)
    with pytest.raises(ValueError, match=r"lr must be <= 1 to measure training steps, got 1e\+30"):
        E.match_step_gain("big-step", lr=1e30, **kw)
    for bad in (math.inf, math.nan):
        with pytest.raises(ValueError, match="lr must be finite"):
            E.match_step_gain("big-step", lr=bad, **kw)
    with pytest.raises(TypeError, match="lr must be a real number"):
        E.match_step_gain("big-step", lr="1e-3", **kw)
    # not a string: TypeError, as the docstring says (was ValueError)
    for bad in (None, 1):
        with pytest.raises(TypeError, match=r"arm must be a string, one of \['big-step', "):
            E.match_step_gain(bad, **kw)
    # the settings come back as Python ints
    m = E.match_step_gain("big-step", **{**kw, "score_steps": np.int64(1)}, seed=np.int64(2))
    assert type(m.score_steps) is int and type(m.seed) is int and m.seed == 2
    # 1/sqrt(head_dim) below 1e-3: the first gain is clamped as later ones are (was refused)
    tiny = dict(d_model=2, d_ff=2, n_pairs=1, n_keys=2, n_values=2, batch_size=1)
    m = E.match_step_gain("small-step", head_dim=1_100_000, score_steps=1, max_trials=1, **tiny)
    assert m.trials[0][0] == 1e-3 and m.gain == 1e-3


def test_match_step_gain_refuses_bad_arguments():
    kw = dict(**TINY_SCALING, score_steps=2)
    with pytest.raises(ValueError, match="arm"):
        E.match_step_gain("scaled", **kw)
    with pytest.raises(ValueError, match="rtol"):
        E.match_step_gain("big-step", rtol=0.0, **kw)
    with pytest.raises(ValueError, match="rtol"):
        E.match_step_gain("big-step", rtol=1.5, **kw)
    with pytest.raises(ValueError, match="max_trials"):
        E.match_step_gain("big-step", max_trials=0, **kw)
    with pytest.raises(ValueError, match="score_steps"):
        E.match_step_gain("big-step", **{**kw, "score_steps": 0})
    with pytest.raises(ValueError, match=r"\['steps'\]"):
        E.match_step_gain("big-step", steps=10, **kw)
    with pytest.raises(TypeError, match="no_such"):
        E.match_step_gain("big-step", no_such=1, **kw)

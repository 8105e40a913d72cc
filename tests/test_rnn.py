"""Tests for attnbook.rnn.

References: torch.nn.RNN and torch.nn.LSTM with copied weights; torch.autograd.functional.jacobian
of the unrolled map h_t -> h_L; and the hand-derived case of a linear RNN whose recurrent matrix
is gamma times an orthogonal matrix, where ||dh_L/dh_t|| = gamma^Δ, Δ = L - t, exactly (the
tests' code names the last step T and the distance k).
"""

import numpy as np
import pytest
import torch

from attnbook.rnn import (
    LSTM,
    VanillaRNN,
    gamma_estimate,
    jacobian_norms,
    jacobian_norms_core,
    lstm_step_core,
    rnn_step_core,
)
from attnbook.testing import assert_close

D64 = torch.float64


def copy_weights(ours, ref):
    """Give torch's one-layer ``nn.RNN``/``nn.LSTM`` ``ref`` the weights of our cell ``ours``."""
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.weight_ih)
        ref.weight_hh_l0.copy_(ours.weight_hh)
        ref.bias_ih_l0.copy_(ours.bias_ih)
        ref.bias_hh_l0.copy_(ours.bias_hh)


def test_vanilla_rnn_matches_torch_rnn():
    torch.manual_seed(0)
    ours = VanillaRNN(3, 5).double()
    ref = torch.nn.RNN(3, 5, batch_first=True, dtype=D64)
    copy_weights(ours, ref)
    x, h0 = torch.randn(2, 7, 3, dtype=D64), torch.randn(2, 5, dtype=D64)
    out, h = ours(x, h0)
    exp_out, exp_h = ref(x, h0[None])
    assert_close(out, exp_out, atol=1e-12, rtol=0)
    assert_close(h, exp_h[0], atol=1e-12, rtol=0)


def test_lstm_matches_torch_lstm():
    torch.manual_seed(1)
    ours = LSTM(3, 4).double()
    ref = torch.nn.LSTM(3, 4, batch_first=True, dtype=D64)
    copy_weights(ours, ref)
    x = torch.randn(2, 6, 3, dtype=D64)
    h0, c0 = torch.randn(2, 4, dtype=D64), torch.randn(2, 4, dtype=D64)
    out, (h, c) = ours(x, (h0, c0))
    exp_out, (exp_h, exp_c) = ref(x, (h0[None], c0[None]))
    assert_close(out, exp_out, atol=1e-12, rtol=0)
    assert_close(h, exp_h[0], atol=1e-12, rtol=0)
    assert_close(c, exp_c[0], atol=1e-12, rtol=0)


def test_linear_rnn_jacobian_norms_are_exactly_gamma_power():
    gamma, H, T = 0.9, 6, 60
    torch.manual_seed(2)
    q, _ = torch.linalg.qr(torch.randn(H, H, dtype=D64))  # orthogonal: ||Q^k||_2 = 1
    rnn = VanillaRNN(2, H, nonlinearity="identity").double()
    with torch.no_grad():
        rnn.weight_hh.copy_(gamma * q)
    norms = jacobian_norms(rnn, torch.randn(1, T, 2, dtype=D64))
    k = np.arange(T)
    assert_close(norms, gamma**k, atol=1e-12, rtol=1e-10)  # (gamma Q)^k has norm gamma^k
    assert_close(gamma_estimate(gamma, k), gamma**k, atol=0, rtol=0)
    assert abs(norms[50] - 0.9**50) < 1e-12
    assert 0.0051 < gamma_estimate(0.9, 50) < 0.0052  # about 0.5 %


def test_tanh_rnn_norms_below_gamma_power():
    gamma, H, T = 0.9, 8, 40
    torch.manual_seed(3)
    rnn = VanillaRNN(3, H).double()
    with torch.no_grad():
        w = torch.randn(H, H, dtype=D64)
        rnn.weight_hh.copy_(gamma * w / torch.linalg.matrix_norm(w, ord=2))  # ||W_hh||_2 = 0.9
    norms = jacobian_norms(rnn, torch.randn(1, T, 3, dtype=D64))
    bound = gamma_estimate(gamma, np.arange(T))
    assert np.isfinite(norms).all() and norms[0] == pytest.approx(1.0, abs=1e-12)
    assert (norms <= bound + 1e-12).all()
    assert norms[-1] < 1e-2  # vanished


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_jacobian_norms_match_autograd_jacobian_of_unrolled_map(kind):
    torch.manual_seed(4)
    model = (VanillaRNN(2, 3) if kind == "rnn" else LSTM(2, 3)).double()
    x = torch.randn(1, 6, 2, dtype=D64)
    norms = jacobian_norms(model, x)
    # independent reference: h_t -> h_T by running the remaining steps, differentiated directly
    state = model.init_state(x)
    states = []
    for t in range(6):
        state = model.step(x[:, t], state)
        states.append(state)
    for t in range(6):  # h_{t+1} in 1-based terms, distance 5 - t

        def f(h, t=t):
            s = (h[None], states[t][1]) if kind == "lstm" else h[None]
            for u in range(t + 1, 6):
                s = model.step(x[:, u], s)
            return model.hidden(s)[0]

        h_t = model.hidden(states[t])[0].detach()
        J = torch.autograd.functional.jacobian(f, h_t)
        expected = torch.linalg.matrix_norm(J, ord=2).item()
        assert abs(norms[5 - t] - expected) < 1e-12


def test_rnn_step_core_matches_torch_rnn_cell():
    torch.manual_seed(5)
    cell = torch.nn.RNNCell(3, 5, dtype=D64)
    x_t, h = torch.randn(4, 3, dtype=D64), torch.randn(4, 5, dtype=D64)
    b = cell.bias_ih + cell.bias_hh
    got = rnn_step_core(x_t, h, cell.weight_ih, cell.weight_hh, b)
    assert_close(got, cell(x_t, h), atol=1e-12, rtol=0)


def test_rnn_step_core_float64_formula_and_custom_activation():
    rng = np.random.default_rng(6)
    x_t, h = rng.standard_normal((2, 3)), rng.standard_normal((2, 4))
    w_ih, w_hh, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 4)), rng.standard_normal(4)
    pre = np.einsum("hd,bd->bh", w_ih, x_t) + np.einsum("hk,bk->bh", w_hh, h) + b
    t = [torch.from_numpy(a) for a in (x_t, h, w_ih, w_hh, b)]
    assert_close(rnn_step_core(*t), np.tanh(pre), atol=1e-12, rtol=0)
    assert_close(rnn_step_core(*t, act=lambda a: a), pre, atol=1e-12, rtol=0)


def test_lstm_step_core_matches_float64_gate_formula_and_torch_cell():
    rng = np.random.default_rng(7)
    B, d, H = 3, 2, 4
    x_t = rng.standard_normal((B, d))
    h, c = rng.standard_normal((B, H)), rng.standard_normal((B, H))
    w_ih, w_hh = rng.standard_normal((4 * H, d)), rng.standard_normal((4 * H, H))
    b = rng.standard_normal(4 * H)

    def sig(z):
        return 1 / (1 + np.exp(-z))

    pre = x_t @ w_ih.T + h @ w_hh.T + b  # gate order i, f, g, o (torch.nn.LSTM docs)
    i, f, g, o = pre[:, :H], pre[:, H : 2 * H], pre[:, 2 * H : 3 * H], pre[:, 3 * H :]
    c_exp = sig(f) * c + sig(i) * np.tanh(g)
    h_exp = sig(o) * np.tanh(c_exp)
    t = [torch.from_numpy(a) for a in (x_t, h, c, w_ih, w_hh, b)]
    h_new, c_new = lstm_step_core(*t)
    assert_close(h_new, h_exp, atol=1e-12, rtol=0)
    assert_close(c_new, c_exp, atol=1e-12, rtol=0)
    cell = torch.nn.LSTMCell(d, H, dtype=D64)
    with torch.no_grad():
        cell.weight_ih.copy_(t[3])
        cell.weight_hh.copy_(t[4])
        cell.bias_ih.copy_(t[5])
        cell.bias_hh.zero_()
    h_ref, c_ref = cell(t[0], (t[1], t[2]))
    assert_close(h_new, h_ref, atol=1e-12, rtol=0)
    assert_close(c_new, c_ref, atol=1e-12, rtol=0)


def test_jacobian_norms_core_linear_rnn_is_gamma_power():
    gamma, H, T = 0.8, 5, 12
    torch.manual_seed(8)
    q, _ = torch.linalg.qr(torch.randn(H, H, dtype=D64))
    rnn = VanillaRNN(2, H, nonlinearity="identity").double()
    with torch.no_grad():
        rnn.weight_hh.copy_(gamma * q)
    x = torch.randn(1, T, 2, dtype=D64)
    norms = jacobian_norms_core(rnn, x, rnn.init_state(x))
    assert norms.shape == (T,)
    assert_close(norms, gamma ** np.arange(T), atol=1e-12, rtol=1e-10)


def test_jacobian_norms_works_under_no_grad_and_uses_first_sequence():
    torch.manual_seed(9)
    rnn = VanillaRNN(2, 3).double()
    x = torch.randn(2, 5, 2, dtype=D64)
    with torch.no_grad():
        inside = jacobian_norms(rnn, x)
    assert_close(inside, jacobian_norms(rnn, x[:1]), atol=0, rtol=0)


def test_rnn_errors():
    with pytest.raises(ValueError, match="nonlinearity"):
        VanillaRNN(2, 3, nonlinearity="relu6")
    with pytest.raises(ValueError, match=r"input_size=2.*\(1, 4, 3\)"):
        VanillaRNN(2, 3)(torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="3-D"):
        LSTM(2, 3)(torch.zeros(4, 2))
    with pytest.raises(TypeError, match="floating"):
        VanillaRNN(2, 3)(torch.zeros(1, 4, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="Tensor"):
        LSTM(2, 3)(np.zeros((1, 4, 2)))
    with pytest.raises(ValueError, match="gamma"):
        gamma_estimate(-0.5, 3)
    with pytest.raises(ValueError, match="distance"):
        gamma_estimate(0.5, [1, -2])
    with pytest.raises(TypeError, match="gamma"):
        gamma_estimate("0.5", 3)
    with pytest.raises(ValueError, match="time step"):
        jacobian_norms(VanillaRNN(2, 3), torch.zeros(1, 0, 2))


@pytest.mark.parametrize(
    "make,exc,name",
    [
        (lambda: VanillaRNN(2.0, 3), TypeError, "input_size"),
        (lambda: VanillaRNN(2, True), TypeError, "hidden_size"),
        (lambda: VanillaRNN(2, 0), ValueError, "hidden_size"),
        (lambda: VanillaRNN(2, 3, bias=1), TypeError, "bias"),
        (lambda: LSTM(0, 3), ValueError, "input_size"),
        (lambda: LSTM(2, 3.5), TypeError, "hidden_size"),
    ],
)
def test_constructor_arguments(make, exc, name):
    with pytest.raises(exc, match=name):
        make()

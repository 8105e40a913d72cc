"""Tests for attnbook.rnn.

References: torch.nn.RNN and torch.nn.LSTM with copied weights; torch.autograd.functional.jacobian
of the unrolled map h_t -> h_T; and the hand-derived case of a linear RNN whose recurrent matrix
is gamma times an orthogonal matrix, where ||dh_T/dh_t|| = gamma^(T-t) exactly.
"""

import numpy as np
import pytest
import torch

from attnbook.rnn import LSTM, VanillaRNN, gamma_estimate, jacobian_norms
from attnbook.testing import assert_close

D64 = torch.float64


def test_vanilla_rnn_matches_torch_rnn():
    torch.manual_seed(0)
    ours = VanillaRNN(3, 5).double()
    ref = torch.nn.RNN(3, 5, batch_first=True, dtype=D64)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.weight_ih)
        ref.weight_hh_l0.copy_(ours.weight_hh)
        ref.bias_ih_l0.copy_(ours.bias_ih)
        ref.bias_hh_l0.copy_(ours.bias_hh)
    x, h0 = torch.randn(2, 7, 3, dtype=D64), torch.randn(2, 5, dtype=D64)
    out, h = ours(x, h0)
    exp_out, exp_h = ref(x, h0[None])
    assert_close(out, exp_out, atol=1e-12, rtol=0)
    assert_close(h, exp_h[0], atol=1e-12, rtol=0)


def test_lstm_matches_torch_lstm():
    torch.manual_seed(1)
    ours = LSTM(3, 4).double()
    ref = torch.nn.LSTM(3, 4, batch_first=True, dtype=D64)
    with torch.no_grad():
        ref.weight_ih_l0.copy_(ours.weight_ih)
        ref.weight_hh_l0.copy_(ours.weight_hh)
        ref.bias_ih_l0.copy_(ours.bias_ih)
        ref.bias_hh_l0.copy_(ours.bias_hh)
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
    assert_close(norms, gamma ** k, atol=1e-12, rtol=1e-10)  # (gamma Q)^k has norm gamma^k
    assert_close(gamma_estimate(gamma, k), gamma ** k, atol=0, rtol=0)
    assert abs(norms[50] - 0.9 ** 50) < 1e-12
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


def test_rnn_errors():
    with pytest.raises(ValueError, match="nonlinearity"):
        VanillaRNN(2, 3, nonlinearity="relu6")
    with pytest.raises(ValueError, match=r"input_size=2.*\(1, 4, 3\)"):
        VanillaRNN(2, 3)(torch.zeros(1, 4, 3))
    with pytest.raises(ValueError, match="gamma"):
        gamma_estimate(-0.5, 3)

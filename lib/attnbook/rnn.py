"""Recurrent networks and the vanishing gradient that motivated attention.

A recurrent network carries one hidden state of size ``d_h`` (``hidden_size``, ``H`` in the
shape comments) through the sequence ``x_1 .. x_L``: ``h_t = f(h_{t-1}, x_t)``. What token ``t``
contributes to the last state ``h_L`` must pass through ``Δ = L - t`` applications of the
recurrence, so by the chain rule

``dh_L/dh_t = prod_{s=t+1..L} dh_s/dh_{s-1}``,

and for the vanilla RNN ``h_s = tanh(W_hh h_{s-1} + W_ih x_s + b)`` each factor is
``diag(tanh'(.)) W_hh``, whose norm is at most ``gamma = ||W_hh||_2``. Hence
``||dh_L/dh_t|| <= gamma^Δ``: with ``gamma = 0.9`` a distance of ``Δ = 50`` leaves
``0.9^50 = 0.52 %`` of the signal (Bengio et al., 1994; Pascanu et al., 2013, section 2.1).
Attention connects every pair of positions in one step instead.

This module holds a vanilla RNN and an LSTM (Hochreiter & Schmidhuber, 1997) in torch, with the
same parameter layout as ``torch.nn.RNN`` / ``torch.nn.LSTM`` (gate order i, f, g, o), and
:func:`jacobian_norms`, which measures ``||dh_L/dh_t||_2`` over the distance ``Δ = L - t``;
:func:`gradient_decay_data` measures it for a recurrent matrix of a chosen norm ``gamma`` (the
numbers chapter 1's explorer, :mod:`attnbook.explorers.rnn`, draws).

Each algorithm is a short core that the book shows (:func:`rnn_step_core`,
:func:`lstm_step_core`, :func:`jacobian_norms_core`); the modules and public functions check
their arguments through :mod:`attnbook.checks` and call the cores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import checks

__all__ = [
    "rnn_step_core",
    "VanillaRNN",
    "lstm_step_core",
    "LSTM",
    "jacobian_norms_core",
    "jacobian_norms",
    "gamma_estimate",
    "GradientDecay",
    "gradient_decay_data",
]


# fmt: off
def rnn_step_core(x_t, h, w_ih, w_hh, b, act=torch.tanh):
    """One Elman RNN step: ``h_t = act(W_ih x_t + W_hh h_{t-1} + b)``.

    x_t (B, d_in), h (B, H), w_ih (H, d_in), w_hh (H, H), b (H,).
    """
    a = x_t @ w_ih.T + h @ w_hh.T + b  # (B, H) pre-activation
    return act(a)  # (B, H)
# fmt: on


def _identity(a):
    return a


class VanillaRNN(nn.Module):
    """Elman RNN: ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``.

    Args:
        input_size: features of ``x_t``.
        hidden_size: features of ``h_t``, the hidden size ``d_h`` (``H`` below).
        nonlinearity: ``"tanh"`` (as ``torch.nn.RNN``) or ``"identity"`` (a linear RNN, whose
            Jacobians are exactly powers of ``W_hh``).
        bias: learn ``b_ih`` and ``b_hh``.

    Parameters ``weight_ih (H, input_size)``, ``weight_hh (H, H)``, ``bias_ih (H,)``,
    ``bias_hh (H,)`` — the layout of ``torch.nn.RNN``'s ``*_l0`` parameters. The step is
    :func:`rnn_step_core` with ``b = b_ih + b_hh``.

    Raises:
        TypeError: if a size is not an integer or ``bias`` is not a bool.
        ValueError: for an unknown nonlinearity or a size < 1.

    Source: Elman, "Finding Structure in Time" (1990).
    """

    def __init__(
        self, input_size: int, hidden_size: int, nonlinearity: str = "tanh", bias: bool = True
    ):
        super().__init__()
        input_size = checks.check_int(input_size, "input_size", 1)
        hidden_size = checks.check_int(hidden_size, "hidden_size", 1)
        checks.check_choice(nonlinearity, "nonlinearity", ("tanh", "identity"))
        bias = checks.check_bool(bias, "bias")
        self.hidden_size = hidden_size
        self.nonlinearity = nonlinearity
        bound = 1.0 / math.sqrt(hidden_size)
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size).uniform_(-bound, bound))
        if bias:
            self.bias_ih = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
            self.bias_hh = nn.Parameter(torch.empty(hidden_size).uniform_(-bound, bound))
        else:
            self.bias_ih = self.bias_hh = None

    def init_state(self, x: torch.Tensor) -> torch.Tensor:
        """Zero state ``(B, H)`` for input ``x (B, L, input_size)``.

        Args:
            x: ``(B, L, input_size)`` input; only its batch size, dtype and device are used.

        Returns:
            ``(B, hidden_size)`` zeros of the dtype and device of ``x``.
        """
        return x.new_zeros(x.shape[0], self.hidden_size)

    def step(self, x_t: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        """One step: ``x_t (B, input_size)``, ``h (B, H) -> h_new (B, H)``.

        Args:
            x_t: ``(B, input_size)`` input at step ``t``.
            h: ``(B, hidden_size)`` previous hidden state ``h_{t-1}``.

        Returns:
            ``(B, hidden_size)`` new state ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)``,
            computed by :func:`rnn_step_core`.
        """
        b = 0.0 if self.bias_ih is None else self.bias_ih + self.bias_hh  # (H,)
        act = torch.tanh if self.nonlinearity == "tanh" else _identity
        return rnn_step_core(x_t, h, self.weight_ih, self.weight_hh, b, act)

    @staticmethod
    def hidden(state: torch.Tensor) -> torch.Tensor:
        """The hidden vector ``h`` of a state (the state itself for the vanilla RNN).

        Args:
            state: ``(B, hidden_size)`` state, as returned by :meth:`step`.

        Returns:
            ``state`` itself.
        """
        return state

    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):
        """Run over ``x (B, L, input_size)``; return ``(outputs (B, L, H), h_L (B, H))``.

        Args:
            x: ``(B, L, input_size)`` input sequence (batch first).
            h0: ``(B, hidden_size)`` initial state, or ``None`` for zeros.

        Returns:
            ``(outputs, h_L)``: ``outputs (B, L, hidden_size)`` holds ``h_1 .. h_L`` (as
            ``torch.nn.RNN(batch_first=True)``'s output), ``h_L (B, hidden_size)`` the last.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor.
            ValueError: if ``x`` is not 3-D with ``input_size`` features.
        """
        checks.check_features(x, "x", self.weight_ih.shape[1], ndim=3, size_name="input_size")
        h = self.init_state(x) if h0 is None else h0
        outs = []
        for t in range(x.shape[1]):
            h = self.step(x[:, t], h)
            outs.append(h)
        return torch.stack(outs, dim=1), h  # (B, L, H), (B, H)


# fmt: off
def lstm_step_core(x_t, h, c, w_ih, w_hh, b):
    """One LSTM step, gate order i, f, g, o (as ``torch.nn.LSTM``).

    x_t (B, d_in), h and c (B, H), w_ih (4H, d_in), w_hh (4H, H), b (4H,).
    Returns the new ``(h, c)``, each (B, H).
    """
    gates = x_t @ w_ih.T + h @ w_hh.T + b  # (B, 4H)
    i, f, g, o = gates.chunk(4, dim=-1)  # (B, H) each
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)  # (B, H)
    h = torch.sigmoid(o) * torch.tanh(c)  # (B, H)
    return h, c
# fmt: on


class LSTM(nn.Module):
    """Long short-term memory, one layer, in the formulation of ``torch.nn.LSTM``.

    ``i, f, g, o = split(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` (gate order i, f, g, o);
    ``c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)``; ``h_t = sigmoid(o) * tanh(c_t)``.
    The additive cell update lets gradients pass through ``c`` without repeated
    multiplication by a weight matrix when the forget gate is open.

    Args:
        input_size: features of ``x_t``.
        hidden_size: features ``H`` of ``h_t`` and ``c_t``, the hidden size ``d_h``.

    Raises:
        TypeError: if a size is not an integer.
        ValueError: if a size is < 1.

    Parameters ``weight_ih (4H, input_size)``, ``weight_hh (4H, H)``, ``bias_ih (4H,)``,
    ``bias_hh (4H,)``. The step is :func:`lstm_step_core` with ``b = b_ih + b_hh``.

    Source: Hochreiter & Schmidhuber (1997); forget gate: Gers et al. (2000).
    """

    def __init__(self, input_size: int, hidden_size: int):
        super().__init__()
        input_size = checks.check_int(input_size, "input_size", 1)
        hidden_size = checks.check_int(hidden_size, "hidden_size", 1)
        self.hidden_size = hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        H = hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * H, input_size).uniform_(-bound, bound))
        self.weight_hh = nn.Parameter(torch.empty(4 * H, H).uniform_(-bound, bound))
        self.bias_ih = nn.Parameter(torch.empty(4 * H).uniform_(-bound, bound))
        self.bias_hh = nn.Parameter(torch.empty(4 * H).uniform_(-bound, bound))

    def init_state(self, x: torch.Tensor):
        """Zero ``(h, c)``, each ``(B, H)``.

        Args:
            x: ``(B, L, input_size)`` input; only its batch size, dtype and device are used.

        Returns:
            ``(h, c)``, each ``(B, hidden_size)`` zeros of the dtype and device of ``x``.
        """
        z = x.new_zeros(x.shape[0], self.hidden_size)
        return z, z

    def step(self, x_t: torch.Tensor, state):
        """One step: ``x_t (B, input_size)``, ``(h, c) -> (h_new, c_new)``, each ``(B, H)``.

        Args:
            x_t: ``(B, input_size)`` input at step ``t``.
            state: ``(h, c)``, the previous hidden and cell states, each ``(B, hidden_size)``.

        Returns:
            ``(h_t, c_t)``, each ``(B, hidden_size)``, computed by :func:`lstm_step_core`.
        """
        h, c = state
        b = self.bias_ih + self.bias_hh  # (4H,)
        return lstm_step_core(x_t, h, c, self.weight_ih, self.weight_hh, b)

    @staticmethod
    def hidden(state) -> torch.Tensor:
        """The hidden vector ``h`` of an ``(h, c)`` state.

        Args:
            state: ``(h, c)``, each ``(B, hidden_size)``.

        Returns:
            ``h``, ``(B, hidden_size)``.
        """
        return state[0]

    def forward(self, x: torch.Tensor, state=None):
        """Run over ``x (B, L, input_size)``; return ``(outputs (B, L, H), (h_L, c_L))``.

        Args:
            x: ``(B, L, input_size)`` input sequence (batch first).
            state: initial ``(h_0, c_0)``, each ``(B, hidden_size)``, or ``None`` for zeros.

        Returns:
            ``(outputs, (h_L, c_L))``: ``outputs (B, L, hidden_size)`` holds ``h_1 .. h_L``,
            ``h_L`` and ``c_L`` are ``(B, hidden_size)``.

        Raises:
            TypeError: if ``x`` is not a floating-point tensor.
            ValueError: if ``x`` is not 3-D with ``input_size`` features.
        """
        checks.check_features(x, "x", self.weight_ih.shape[1], ndim=3, size_name="input_size")
        state = self.init_state(x) if state is None else state
        outs = []
        for t in range(x.shape[1]):
            state = self.step(x[:, t], state)
            outs.append(state[0])
        return torch.stack(outs, dim=1), state


# fmt: off
def jacobian_norms_core(model, x, state):
    """Norms ||dh_L/dh_{L-Δ}||_2, Δ = 0 .. L-1, of one sequence x (1, L, d_in).

    Runs the steps, then backpropagates each unit vector of h_L to every h_t.
    """
    hs = []
    for t in range(x.shape[1]):
        state = model.step(x[:, t], state)
        hs.append(model.hidden(state))  # h_t (1, H), a node of the graph
    h_L = hs[-1]  # (1, H)
    H = h_L.shape[-1]
    jac = h_L.new_zeros(len(hs), H, H)  # jac[t][i, j] = dh_L[i] / dh_t[j]
    for i in range(H):
        e = torch.zeros_like(h_L)  # (1, H)
        e[0, i] = 1.0
        grads = torch.autograd.grad(h_L, hs, grad_outputs=e,
                                    retain_graph=True, allow_unused=True)
        for t, g in enumerate(grads):
            if g is not None:  # h_t that h_L does not depend on: row stays 0
                jac[t, i] = g[0]
    norms = torch.linalg.matrix_norm(jac, ord=2)  # (L,) indexed by step t
    return norms.flip(0)  # (L,) indexed by distance Δ = L - t
# fmt: on


def jacobian_norms(model, x: torch.Tensor, state=None) -> np.ndarray:
    """Spectral norms ``||dh_L/dh_t||_2`` for every distance ``Δ = L - t``, ``Δ = 0 .. L - 1``.

    ``h_t`` is the hidden vector after step ``t`` (``t = 1 .. L``); entry ``Δ`` of the result is
    the largest singular value of the ``(d_h, d_h)`` Jacobian ``dh_L / dh_{L-Δ}`` (entry 0 is
    the identity, norm 1). For the LSTM the derivative is taken with respect to ``h_t`` with the
    cell ``c_t`` held fixed. Computed by :func:`jacobian_norms_core`, which backpropagates the
    ``d_h`` unit vectors from ``h_L`` to every intermediate ``h_t``, for the first sequence of the
    batch (with gradients enabled, also inside ``torch.no_grad()``).

    Args:
        model: :class:`VanillaRNN` or :class:`LSTM` (anything with ``weight_ih``,
            ``init_state``, ``step`` and ``hidden``).
        x: ``(B, L, input_size)`` floating-point input; only ``x[0]`` is used.
        state: initial state, default zeros.

    Returns:
        float64 array ``(L,)``: ``norms[Δ] = ||dh_L/dh_{L-Δ}||_2``.

    Raises:
        TypeError: if ``x`` is not a floating-point tensor.
        ValueError: if ``x`` is not ``(B, L, input_size)`` with ``B >= 1`` and ``L >= 1``.

    Source: Pascanu, Mikolov & Bengio, "On the difficulty of training recurrent neural
    networks" (2013), eqs. 3-7.
    """
    checks.check_features(x, "x", model.weight_ih.shape[1], ndim=3, size_name="input_size")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(
            f"x needs at least one sequence and one time step; got shape {tuple(x.shape)}"
        )
    x = x[:1]
    state = model.init_state(x) if state is None else state
    with torch.enable_grad():
        norms = jacobian_norms_core(model, x, state)
    return norms.detach().double().numpy()


def gamma_estimate(gamma: float, distance) -> np.ndarray:
    """The bound ``gamma^Δ`` on ``||dh_L/dh_{L-Δ}||`` when every step's Jacobian has norm <= gamma.

    ``gamma_estimate(0.9, 50) = 0.00515`` (about 0.5 %).

    Args:
        gamma: bound on the per-step Jacobian norm, e.g. ``||W_hh||_2`` for a tanh RNN.
        distance: int or array of distances ``Δ >= 0``.

    Returns:
        float64 array (or scalar) ``gamma ** Δ``.

    Raises:
        TypeError: if ``gamma`` is not a real number or ``distance`` is not numeric.
        ValueError: if ``gamma`` is negative or not finite, or a distance is negative or not
            finite.
    """
    gamma = checks.check_real(gamma, "gamma", minimum=0)
    k = checks.as_float_array(distance, "distance").astype(np.float64)
    checks.check_finite(k, "distance")
    if (k < 0).any():
        raise ValueError(f"distance must be >= 0, got min {k.min()} (shape {k.shape})")
    return np.float64(gamma) ** k  # the shape of distance


@dataclass(frozen=True)
class GradientDecay:
    """Gradient norms against distance for one ``gamma``, from :func:`gradient_decay_data`.

    Attributes:
        gamma: spectral norm of the recurrent matrix ``W_hh``.
        distances: int64 ``(K + 1,)`` distances ``Δ = 0 .. K``.
        bound: float64 ``(K + 1,)`` ``gamma^Δ``.
        linear: float64 ``(K + 1,)`` measured ``||dh_L/dh_{L-Δ}||_2`` of the linear RNN.
        tanh: float64 ``(K + 1,)`` the same for the tanh RNN.
        hidden_size, input_size, seed: settings (``hidden_size`` is ``d_h``).
    """

    gamma: float
    distances: np.ndarray
    bound: np.ndarray
    linear: np.ndarray
    tanh: np.ndarray
    hidden_size: int
    input_size: int
    seed: int


def gradient_decay_data(
    gamma: float,
    *,
    max_distance: int = 100,
    hidden_size: int = 16,
    input_size: int = 4,
    seed: int = 0,
) -> GradientDecay:
    """Measure ``||dh_L/dh_{L-Δ}||_2`` for ``Δ = 0 .. max_distance``, ``||W_hh||_2 = gamma``.

    Two :class:`VanillaRNN` s in float64 (``nonlinearity="identity"`` and ``"tanh"``) share
    every parameter: ``W_ih`` and the biases from torch's default initialisation after
    ``torch.manual_seed(seed)``, and ``W_hh = gamma * Q`` with ``Q`` the orthogonal factor of a
    seeded standard-normal matrix (so ``||W_hh||_2 = gamma`` exactly, and the linear RNN's
    every step's Jacobian is ``gamma Q``: its norms lie on the bound ``gamma^Δ``). Both read the
    same input ``x (1, max_distance + 1, input_size)``, i.i.d. standard normal (seed
    ``seed + 1``), and :func:`jacobian_norms` measures the norms.

    Args:
        gamma: the spectral norm ``||W_hh||_2``, in ``(0, 2]``.
        max_distance: largest distance ``K`` (1..400); the sequences have ``L = K + 1`` steps.
        hidden_size: the hidden size ``d_h`` (1..64).
        input_size: features of ``x_t`` (1..64).
        seed: seed of the weights (``seed``) and the inputs (``seed + 1``), >= 0.

    Returns:
        :class:`GradientDecay` with arrays of length ``max_distance + 1``.

    Raises:
        TypeError: naming the argument, if ``gamma`` is not a real number or a size or
            ``seed`` is not an integer.
        ValueError: naming the argument, if a value is out of range.

    Source: Pascanu, Mikolov & Bengio (2013), eqs. 5-7 (the bound); Bengio et al. (1994).
    """
    gamma = checks.check_real(gamma, "gamma", minimum=0.0, strict=True)
    gamma = checks.check_real(gamma, "gamma", maximum=2.0)
    K = checks.check_int(max_distance, "max_distance", 1, 400)
    H = checks.check_int(hidden_size, "hidden_size", 1, 64)
    d_in = checks.check_int(input_size, "input_size", 1, 64)
    seed = checks.check_int(seed, "seed", 0, 2**31 - 1)
    torch.manual_seed(seed)
    tanh_rnn = VanillaRNN(d_in, H, nonlinearity="tanh").double()
    linear_rnn = VanillaRNN(d_in, H, nonlinearity="identity").double()
    gen = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(H, H, generator=gen, dtype=torch.float64))  # (H, H)
    with torch.no_grad():
        tanh_rnn.weight_hh.copy_(gamma * q)
        linear_rnn.load_state_dict(tanh_rnn.state_dict())
    x = torch.randn(
        1, K + 1, d_in, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64
    )  # (1, K + 1, input_size)
    distances = np.arange(K + 1)
    return GradientDecay(
        gamma=gamma,
        distances=distances,
        bound=np.asarray(gamma_estimate(gamma, distances)),
        linear=jacobian_norms(linear_rnn, x),
        tanh=jacobian_norms(tanh_rnn, x),
        hidden_size=H,
        input_size=d_in,
        seed=seed,
    )

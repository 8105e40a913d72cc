"""Linear attention: a kernel feature map instead of the softmax, at O(n) cost (NumPy).

Softmax attention weighs value ``j`` for query ``i`` by ``exp(q_i . k_j)``, which couples every
query with every key: ``L x S`` scores. Linear attention (Katharopoulos et al., 2020) replaces
the exponential by a product of feature maps, ``sim(q, k) = phi(q) . phi(k)``, with
``phi(x) = elu(x) + 1 > 0``. Then the sums factor::

    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j)
          = phi(q_i)^T [sum_j phi(k_j) v_j^T] / phi(q_i)^T [sum_j phi(k_j)]

The bracketed sums — a ``(D, Dv)`` matrix and a ``(D,)`` vector — are computed once (or, when
causal, as running sums), so the cost is ``O((L + S) D Dv)``: linear in the sequence length, and
for decoding a state of fixed size instead of a growing KV cache. The price: the weights are no
longer a softmax of ``q . k / sqrt(D)`` — the model is a different one, with a weaker ability
to focus sharply on one key.

:func:`linear_attention` computes the factored form; the causal case is processed in chunks
(within a chunk the few ``chunk x chunk`` similarities directly, across chunks the running
state), which is exact and still linear in the length. Conventions as in
:mod:`attnbook.attention`: inputs ``(..., L, D)``, causal aligned bottom-right (query ``i`` sees
keys ``j <= i + S - L``), a query with no visible key outputs 0.

Source: Katharopoulos et al., "Transformers are RNNs: Fast Autoregressive Transformers with
Linear Attention" (ICML 2020), equations 4-6 (factored form), 7 (``elu + 1``) and 10-12 (the
causal running sums).
"""

from __future__ import annotations

import numpy as np

from .checks import as_float_array as _as_float_array

__all__ = ["elu_feature_map", "linear_attention", "linear_state_size"]


def elu_feature_map(x):
    """The feature map ``phi(x) = elu(x) + 1`` of linear attention (elementwise, positive).

    ``elu(x) + 1`` is ``x + 1`` for ``x > 0`` and ``exp(x)`` for ``x <= 0``.

    Args:
        x: array of any shape, real.

    Returns:
        float array of the same shape, every entry ``> 0`` (for finite input).

    Raises:
        TypeError: for non-numeric input.

    Source: Katharopoulos et al. (2020), equation 7.
    """
    x = _as_float_array(x, "x")
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def _safe_divide(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast_shapes(num.shape, den.shape), dtype=num.dtype)
    np.divide(num, den, out=out, where=den > 0)
    return out


def linear_attention(q, k, v, *, causal: bool = False, chunk_size: int = 64,
                     feature_map=elu_feature_map):
    """Linear attention ``phi(Q) [phi(K)^T V] / phi(Q) [phi(K)^T 1]`` in O(L + S) time.

    Non-causal: the key summary ``sum_j phi(k_j) v_j^T`` ``(..., D, Dv)`` and normaliser
    ``sum_j phi(k_j)`` ``(..., D)`` are computed once and read by every query. Causal: query
    ``i`` sees keys ``j <= i + S - L``; keys before the first query's horizon enter the running
    state at once, then the queries are processed ``chunk_size`` at a time — similarities inside
    the chunk directly (a ``chunk x chunk`` lower triangle), everything earlier through the
    state, which is then advanced by the chunk's keys.

    Args:
        q: queries ``(..., L, D)``, real.
        k: keys ``(..., S, D)``.
        v: values ``(..., S, Dv)``; the leading dimensions of ``q``, ``k``, ``v`` broadcast.
        causal: hide future keys (bottom-right aligned).
        chunk_size: queries per chunk in the causal case, >= 1 (memory ``chunk_size**2`` per
            batch element; any value gives the same result).
        feature_map: ``phi``, applied to queries and keys; must return positive values for
            the normaliser to be positive (default :func:`elu_feature_map`).

    Returns:
        ``(..., L, Dv)`` float array; 0 for a query that sees no key (causal with ``L > S``).

    Raises:
        ValueError: if the head dims of ``q`` and ``k`` or the lengths of ``k`` and ``v``
            differ, an input is not at least 2-D, the leading dimensions do not broadcast, or
            ``chunk_size < 1``.
        TypeError: for non-numeric inputs or a non-integer ``chunk_size``.

    Source: Katharopoulos et al. (2020), equations 5-6 and 10-12.
    """
    q = _as_float_array(q, "q")
    k = _as_float_array(k, "k")
    v = _as_float_array(v, "v")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        if arr.ndim < 2:
            raise ValueError(f"{name} must have shape (..., seq, dim); got shape {arr.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q has head_dim {q.shape[-1]} but k has {k.shape[-1]} "
                         f"(q.shape={q.shape}, k.shape={k.shape})")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k has {k.shape[-2]} keys but v has {v.shape[-2]} values "
                         f"(k.shape={k.shape}, v.shape={v.shape})")
    try:
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError("the leading dimensions of q, k and v do not broadcast: "
                         f"q.shape={q.shape}, k.shape={k.shape}, v.shape={v.shape}") from None
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)):
        raise TypeError(f"chunk_size must be an integer, got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    L, S, D, Dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    fq = np.broadcast_to(feature_map(q), (*batch, L, D))  # (..., L, D)
    fk = np.broadcast_to(feature_map(k), (*batch, S, D))  # (..., S, D)
    v = np.broadcast_to(v, (*batch, S, Dv))  # (..., S, Dv)
    dtype = np.result_type(fq, fk, v)

    if not causal:
        kv = np.swapaxes(fk, -1, -2) @ v  # (..., D, Dv)  sum_j phi(k_j) v_j^T
        z = fk.sum(axis=-2)  # (..., D)  sum_j phi(k_j)
        num = fq @ kv  # (..., L, Dv)
        den = (fq @ z[..., None])  # (..., L, 1)
        return _safe_divide(num, den)

    out = np.zeros((*batch, L, Dv), dtype=dtype)
    offset = S - L  # query i sees keys j <= i + offset
    first = max(0, -offset)  # queries before `first` see no key: their output stays 0
    # Keys every remaining query sees (j < first + offset + 1 - 1 = the horizon of query
    # `first`, exclusive of the key aligned with it) go straight into the state.
    start_key = first + offset  # the key aligned with query `first`
    state = np.swapaxes(fk[..., :start_key, :], -1, -2) @ v[..., :start_key, :]  # (..., D, Dv)
    z = fk[..., :start_key, :].sum(axis=-2)  # (..., D)
    for q0 in range(first, L, chunk_size):
        q1 = min(q0 + chunk_size, L)
        k0, k1 = q0 + offset, q1 + offset  # the keys aligned with this chunk's queries
        fq_c = fq[..., q0:q1, :]  # (..., c, D)
        fk_c, v_c = fk[..., k0:k1, :], v[..., k0:k1, :]  # (..., c, D), (..., c, Dv)
        sim = fq_c @ np.swapaxes(fk_c, -1, -2)  # (..., c, c)
        sim = np.tril(sim)  # query q0 + a sees chunk key k0 + b for b <= a
        num = fq_c @ state + sim @ v_c  # (..., c, Dv)
        den = fq_c @ z[..., None] + sim.sum(axis=-1, keepdims=True)  # (..., c, 1)
        out[..., q0:q1, :] = _safe_divide(num, den)
        state = state + np.swapaxes(fk_c, -1, -2) @ v_c  # (..., D, Dv)
        z = z + fk_c.sum(axis=-2)  # (..., D)
    return out


def linear_state_size(head_dim: int, value_dim: int | None = None) -> int:
    """Numbers in linear attention's decoding state per head: ``D * Dv + D``.

    The state replaces the KV cache: ``sum_j phi(k_j) v_j^T`` and ``sum_j phi(k_j)``, of fixed
    size whatever the number of tokens seen (a KV cache holds ``2 * S * D`` numbers per head).

    Args:
        head_dim: ``D``, >= 1.
        value_dim: ``Dv``; ``None`` means ``head_dim``.

    Returns:
        ``D * Dv + D``, an ``int``.

    Raises:
        ValueError: if a dimension is not a positive integer.

    Source: Katharopoulos et al. (2020), section 3.4 (the RNN form, equations 18-20).
    """
    dv = head_dim if value_dim is None else value_dim
    for name, val in (("head_dim", head_dim), ("value_dim", dv)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ValueError(f"{name} must be a positive integer, got {val!r}")
    return int(head_dim * dv + head_dim)

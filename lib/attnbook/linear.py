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

:func:`linear_attention_core` is the factored form; :func:`linear_attention_causal_core` the
causal one, processed in chunks (within a chunk the few ``chunk x chunk`` similarities directly,
across chunks the running state), which is exact and still linear in the length.
:func:`linear_attention` checks its arguments and calls one of them. Conventions as in
:mod:`attnbook.attention`: inputs ``(..., L, D)``, causal aligned bottom-right (query ``i`` sees
keys ``j <= i + S - L``), a query with no visible key outputs 0.

Source: Katharopoulos et al., "Transformers are RNNs: Fast Autoregressive Transformers with
Linear Attention" (ICML 2020), equations 4-6 (factored form), 7 (``elu + 1``) and 10-12 (the
causal running sums).
"""

from __future__ import annotations

import numpy as np

from . import checks
from .attention import compute_dtype

__all__ = [
    "elu_feature_map",
    "linear_attention_core",
    "linear_attention_causal_core",
    "linear_attention",
    "linear_state_size",
]


def elu_feature_map(x):
    """The feature map ``phi(x) = elu(x) + 1`` of linear attention (elementwise, positive).

    ``elu(x) + 1`` is ``x + 1`` for ``x > 0`` and ``exp(x)`` for ``x <= 0``.

    Args:
        x: array of any shape, real.

    Returns:
        float array of the same shape and floating dtype, every entry ``> 0`` (for finite
        input that does not underflow ``exp``).

    Raises:
        TypeError: for non-numeric input.

    Source: Katharopoulos et al. (2020), equation 7.
    """
    x = checks.as_float_array(x, "x")
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


# fmt: off
def linear_attention_core(q, k, v, feature_map=elu_feature_map):
    """phi(q) [phi(k)^T v] / phi(q) [phi(k)^T 1]: every query sees every key.

    q (..., L, D), k (..., S, D), v (..., S, Dv) -> (..., L, Dv).
    """
    fq, fk = feature_map(q), feature_map(k)  # (..., L, D), (..., S, D)
    kv = np.swapaxes(fk, -1, -2) @ v  # (..., D, Dv)  sum_j phi(k_j) v_j^T
    z = fk.sum(axis=-2)[..., None]  # (..., D, 1)  sum_j phi(k_j)
    num, den = fq @ kv, fq @ z  # (..., L, Dv), (..., L, 1)
    return num / den  # (..., L, Dv)
# fmt: on


def linear_attention_causal_core(q, k, v, chunk_size=64, feature_map=elu_feature_map):
    """Causal linear attention: query i sees keys j <= i (one length L).

    Chunk by chunk: similarities inside the chunk directly (a lower triangle),
    earlier keys through the running sums. q, k (..., L, D), v (..., L, Dv)
    with the same leading dims.
    """
    fq, fk = feature_map(q), feature_map(k)  # (..., L, D)
    batch, D, Dv = fq.shape[:-2], fq.shape[-1], v.shape[-1]
    state = np.zeros((*batch, D, Dv), v.dtype)  # sum_j phi(k_j) v_j^T
    z = np.zeros((*batch, D, 1), v.dtype)  # sum_j phi(k_j)
    out = np.zeros((*batch, q.shape[-2], Dv), v.dtype)  # (..., L, Dv)
    for i in range(0, q.shape[-2], chunk_size):
        c = slice(i, i + chunk_size)
        fq_c, fk_c, v_c = fq[..., c, :], fk[..., c, :], v[..., c, :]
        sim = np.tril(fq_c @ np.swapaxes(fk_c, -1, -2))  # (..., c, c)
        num = fq_c @ state + sim @ v_c  # (..., c, Dv)
        den = fq_c @ z + sim.sum(axis=-1, keepdims=True)  # (..., c, 1)
        out[..., c, :] = num / den
        state = state + np.swapaxes(fk_c, -1, -2) @ v_c  # (..., D, Dv)
        z = z + fk_c.sum(axis=-2)[..., None]  # (..., D, 1)
    return out


def linear_attention(
    q, k, v, *, causal: bool = False, chunk_size: int = 64, feature_map=elu_feature_map
):
    """Linear attention ``phi(Q) [phi(K)^T V] / phi(Q) [phi(K)^T 1]`` in O(L + S) time.

    Checks its arguments and calls :func:`linear_attention_core` (non-causal) or
    :func:`linear_attention_causal_core` (causal) in at least float32. Non-causal: the key
    summary ``sum_j phi(k_j) v_j^T`` ``(..., D, Dv)`` and normaliser ``sum_j phi(k_j)``
    ``(..., D)`` are computed once and read by every query. Causal: query ``i`` sees keys
    ``j <= i + S - L`` (bottom-right). With ``S > L`` the queries are aligned with the last
    ``L`` keys (the core runs over ``S`` positions and the last ``L`` outputs are kept); with
    ``L > S`` the first ``L - S`` queries see no key and output 0.

    Args:
        q: queries ``(..., L, D)``, real.
        k: keys ``(..., S, D)``.
        v: values ``(..., S, Dv)``; the leading dimensions of ``q``, ``k``, ``v`` broadcast.
        causal: hide future keys (bottom-right aligned); a bool.
        chunk_size: queries per chunk in the causal case, an integer >= 1 (memory
            ``chunk_size**2`` per batch element; any value gives the same result).
        feature_map: ``phi``, applied to queries and keys; must return positive values for
            the normaliser to be positive (default :func:`elu_feature_map`).

    Returns:
        ``(..., L, Dv)`` array in the common floating dtype of the inputs (sums run in at least
        float32); 0 for a query that sees no key (causal with ``L > S``, or ``S = 0``).

    Raises:
        ValueError: if the head dims of ``q`` and ``k`` or the lengths of ``k`` and ``v``
            differ, an input is not at least 2-D or holds nan/inf, the leading dimensions do
            not broadcast, or ``chunk_size < 1``.
        TypeError: for non-numeric inputs, a non-integer ``chunk_size`` or a non-bool
            ``causal``.

    Source: Katharopoulos et al. (2020), equations 5-6 and 10-12.
    """
    q, k, v, batch = checks.check_qkv(q, k, v)
    causal = checks.check_bool(causal, "causal")
    chunk_size = checks.check_int(chunk_size, "chunk_size", 1)
    L, S, D, Dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    out_dtype = np.result_type(q, k, v)
    dtype = compute_dtype(out_dtype)  # float16 sums of phi(k) overflow past 65504
    q = np.broadcast_to(q, (*batch, L, D)).astype(dtype)  # (..., L, D)
    k = np.broadcast_to(k, (*batch, S, D)).astype(dtype)  # (..., S, D)
    v = np.broadcast_to(v, (*batch, S, Dv)).astype(dtype)  # (..., S, Dv)
    with np.errstate(divide="ignore", invalid="ignore"):
        if not causal:
            out = linear_attention_core(q, k, v, feature_map)
        elif S >= L:  # pad the queries to S; the first S - L outputs are dropped
            pad = np.zeros((*batch, S - L, D), dtype)  # (..., S - L, D)
            q_all = np.concatenate([pad, q], axis=-2)  # (..., S, D)
            out = linear_attention_causal_core(q_all, k, v, chunk_size, feature_map)
            out = out[..., S - L :, :]  # (..., L, Dv)
        else:  # L > S: the first L - S queries see no key
            out = np.zeros((*batch, L, Dv), dtype)
            out[..., L - S :, :] = linear_attention_causal_core(
                q[..., L - S :, :], k, v, chunk_size, feature_map
            )
    out = np.where(np.isnan(out), 0, out)  # 0 / 0: a query that sees no key
    return out.astype(out_dtype, copy=False)


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
        TypeError: if a dimension is not an integer (``True`` and ``4.0`` are refused).
        ValueError: if a dimension is below 1.

    Source: Katharopoulos et al. (2020), section 3.4 (the RNN form, equations 18-20).
    """
    head_dim = checks.check_int(head_dim, "head_dim", 1)
    dv = head_dim if value_dim is None else checks.check_int(value_dim, "value_dim", 1)
    return head_dim * dv + head_dim

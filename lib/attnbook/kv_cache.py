"""The KV cache: incremental decoding, sliding-window ring buffers, and what the cache costs.

During generation each new token's query attends to the keys and values of every earlier
token. Those do not change, so a KV cache keeps them and each step computes only the new
token's projections: ``O(T)`` work per step instead of re-running the whole prefix.

* :class:`KVCache` keeps every token's keys and values.
* :class:`SlidingWindowCache` keeps only the last ``window`` tokens in a ring buffer (Mistral's
  "rolling buffer cache", Jiang et al., 2023, section 2) — enough for sliding-window attention.
* :class:`LatentCache` keeps multi-head latent attention's compressed latent (DeepSeek-V2).
* :func:`greedy_generate` decodes greedily with or without a cache (the results are equal).
* :func:`kv_cache_bytes` (from :mod:`attnbook.cost`) computes the cache size of a
  configuration, and :data:`PRESETS` holds published configurations, each read from its
  ``config.json`` fields by :meth:`attnbook.config.ModelConfig.from_hf_config` and citing
  its source.

Every cache has ``seq_len`` (tokens seen so far), ``window`` (``None`` or the window) and
``update(...)``, which appends the new entries and returns everything the new queries may
attend to, together with the keys' absolute positions (from which the attention builds its
causal / window keep-mask).
"""

from __future__ import annotations

import torch

from .checks import (
    check_bool,
    check_generation,
    check_int,
    check_int_tensor,
    check_logits,
    check_positions,
)
from .config import DTYPE_BYTES, HF_CONFIGS, PRESETS, ModelConfig  # noqa: F401 (re-export)
from .cost import kv_cache_bytes  # the formula lives in attnbook.cost

__all__ = [
    "KVCache",
    "SlidingWindowCache",
    "LatentCache",
    "greedy_generate_core",
    "greedy_generate",
    "kv_cache_bytes",
    "DTYPE_BYTES",
    "HF_CONFIGS",
    "PRESETS",
]


def _check_kv(k: torch.Tensor, v: torch.Tensor, positions, *, per_row: bool = False):
    if k.ndim != 4 or v.ndim != 4 or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"k and v must be (B, H_kv, L, D) with the same (B, H_kv, L); got "
            f"k.shape={tuple(k.shape)}, v.shape={tuple(v.shape)}"
        )
    positions = check_int_tensor(positions, "positions")  # lists and arrays become tensors
    return check_positions(
        positions,
        k.shape[2],
        k.shape,
        batch=True,
        shared=not per_row,
        increasing=True,  # a cache stores tokens in order
        x_name="k",
    )


def _check_no_rewind(old: torch.Tensor | None, new: torch.Tensor) -> None:
    """New tokens must come after every cached one (per row for ``(B, .)`` positions)."""
    if old is None or old.numel() == 0 or new.numel() == 0:
        return
    last = old.amax(dim=-1)  # () or (B,)
    first = new.amin(dim=-1)  # () or (B,)
    if bool((first <= last).any()):
        raise ValueError(
            f"new positions (first {first.tolist()}) must come after the cached ones (last "
            f"{last.tolist()}); a cache cannot rewind — start a new cache for a new sequence"
        )


def _cat_positions(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """Cached and new key positions, concatenated: ``(S + L,)``, or ``(B, S + L)`` per row."""
    if old.ndim != new.ndim:  # per-row positions (left padding): make both (B, .)
        B = max(old.shape[0] if old.ndim == 2 else 1, new.shape[0] if new.ndim == 2 else 1)
        old = old.expand(B, -1) if old.ndim == 1 else old
        new = new.expand(B, -1) if new.ndim == 1 else new
    return torch.cat((old, new), dim=-1)


class KVCache:
    """A growing cache of every token's keys and values, for one attention layer.

    Attributes:
        k, v: ``(B, H_kv, S, D)`` tensors (``None`` before the first update).
        positions: ``(S,)`` (or per row ``(B, S)``) absolute positions of the cached keys.
        window: ``None`` (full attention).
    """

    window = None

    def __init__(self):
        self.k = self.v = self.positions = None

    @property
    def seq_len(self) -> int:
        """Number of cached tokens ``S`` (0 before the first update)."""
        return 0 if self.k is None else self.k.shape[2]

    def update(self, k, v, positions):
        """Append ``L`` new tokens; return all cached keys, values, positions.

        ``k``, ``v``: ``(B, H_kv, L, D)`` (RoPE applied); ``positions``: ``(L,)``
        or ``(B, L)``. Returns ``(B, H_kv, S + L, D)`` twice and the keys'
        positions ``(S + L,)`` or ``(B, S + L)``. Errors: :meth:`check_update`.
        """
        positions = self.check_update(k, v, positions)
        if self.k is None:  # the first call: the prompt (prefill)
            self.k, self.v, self.positions = k, v, positions
        else:  # a decoding step: append along the sequence axis
            self.k = torch.cat((self.k, k), dim=2)  # (B, H_kv, S + L, D)
            self.v = torch.cat((self.v, v), dim=2)  # (B, H_kv, S + L, D)
            self.positions = _cat_positions(self.positions, positions)
        return self.k, self.v, self.positions

    def check_update(self, k: torch.Tensor, v: torch.Tensor, positions) -> torch.Tensor:
        """Check the arguments of :meth:`update` against each other and the cache.

        Args:
            k: ``(B, H_kv, L, D)`` new keys (RoPE already applied).
            v: ``(B, H_kv, L, Dv)`` their values.
            positions: ``(L,)`` their absolute positions, or ``(B, L)`` per row (left-padded
                batches, see :func:`attnbook.masks.positions_from_attention_mask`).

        Returns:
            ``positions`` as an integer tensor on the device of ``k``.

        Raises:
            ValueError: if shapes disagree with each other or with the cached tensors, a
                position is negative, the new positions are out of order (``(L,)`` ones must
                strictly increase; a row of ``(B, L)`` ones must not decrease, and may repeat
                a position, as left padding does), or a new position does not come after
                every cached one (gaps are allowed, rewinds are not).
            TypeError: if ``positions`` is not an integer tensor.
        """
        positions = _check_kv(k, v, positions, per_row=True).to(k.device)
        if self.k is not None:
            if (
                k.shape[:2] != self.k.shape[:2]
                or k.shape[3] != self.k.shape[3]
                or v.shape[3] != self.v.shape[3]
            ):
                raise ValueError(
                    f"new k {tuple(k.shape)} / v {tuple(v.shape)} does not "
                    f"match the cache {tuple(self.k.shape)}, {tuple(self.v.shape)} "
                    "in (B, H_kv, ., D)"
                )
            _check_no_rewind(self.positions, positions)
        return positions

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached keys and values."""
        if self.k is None:
            return 0
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()


class SlidingWindowCache:
    """A ring buffer holding the keys and values of the last ``window`` tokens.

    Token ``t`` is written to slot ``t % window``, overwriting token ``t - window``, so memory
    stays ``window`` tokens however long the generation runs. A query at position ``p`` under
    sliding-window attention sees keys ``p - window + 1 .. p``: the ``window - 1`` most recent
    cached tokens and itself, so nothing it needs has been overwritten. ``update`` returns the
    buffered tokens in chronological order followed by the new ones, with their positions, and
    the attention hides keys outside each query's window.

    Args:
        window: the attention window (Mistral-7B-v0.1: 4096), at least 1.

    Raises:
        ValueError: if ``window < 1``.
        TypeError: if ``window`` is not an integer (bools, floats and strings are rejected).

    Source: Jiang et al., "Mistral 7B" (2023), section 2, "Rolling Buffer Cache".
    """

    def __init__(self, window: int):
        self.window = check_int(window, "window", 1)
        self.k = self.v = None  # (B, H_kv, window, D) ring buffers
        self.slot_positions = None  # (window,) position held by each slot, -1 = empty
        self._seen = 0

    @property
    def seq_len(self) -> int:
        """Tokens seen so far (not the number buffered, which is at most ``window``)."""
        return self._seen

    def update(self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor):
        """Attend-set for ``L`` new tokens, then store the last ``window`` of them.

        Args:
            k: ``(B, H_kv, L, D)`` new keys.
            v: ``(B, H_kv, L, Dv)`` their values.
            positions: ``(L,)`` absolute positions, strictly increasing and continuing the
                cached ones.

        Returns:
            ``(k_all, v_all, key_positions)``: the buffered tokens in chronological order and
            the new ones, ``(B, H_kv, n_buffered + L, D)`` and ``(n_buffered + L,)``.

        Raises:
            ValueError: for mismatched shapes (``k`` and ``v`` with each other, or either
                with the buffers, ``v``'s width ``Dv`` included), a negative position,
                positions that do not strictly increase, or a new position that does not
                come after every cached one.
            TypeError: if ``positions`` is not an integer tensor.
        """
        positions = _check_kv(k, v, positions).to(k.device)
        B, H_kv, L, D = k.shape
        if self.k is None:
            self.k = k.new_zeros(B, H_kv, self.window, D)
            self.v = v.new_zeros(B, H_kv, self.window, v.shape[3])
            self.slot_positions = torch.full((self.window,), -1, dtype=torch.long, device=k.device)
        elif (
            k.shape[:2] != self.k.shape[:2]
            or k.shape[3] != self.k.shape[3]
            or v.shape[3] != self.v.shape[3]
        ):
            raise ValueError(
                f"new k {tuple(k.shape)} / v {tuple(v.shape)} does not match the buffers "
                f"{tuple(self.k.shape)}, {tuple(self.v.shape)} in (B, H_kv, ., D)"
            )
        else:
            _check_no_rewind(self.slot_positions[self.slot_positions >= 0], positions)
        filled = self.slot_positions >= 0
        order = torch.argsort(
            torch.where(filled, self.slot_positions, self.slot_positions.max() + 1)
        )[: int(filled.sum())]
        k_all = torch.cat((self.k[:, :, order], k), dim=2)  # (B, H_kv, n + L, D)
        v_all = torch.cat((self.v[:, :, order], v), dim=2)
        pos_all = torch.cat((self.slot_positions[order], positions))  # (n + L,)
        keep_new = min(L, self.window)
        for i in range(L - keep_new, L):  # write the last `window` new tokens
            slot = (self._seen + i) % self.window
            self.k[:, :, slot] = k[:, :, i]
            self.v[:, :, slot] = v[:, :, i]
            self.slot_positions[slot] = positions[i]
        self._seen += L
        return k_all, v_all, pos_all

    @property
    def nbytes(self) -> int:
        """Bytes held by the ring buffers (constant once allocated)."""
        if self.k is None:
            return 0
        return self.k.numel() * self.k.element_size() + self.v.numel() * self.v.element_size()


class LatentCache:
    """Cache of multi-head latent attention: the latent ``c_kv`` and the shared RoPE key.

    Holds ``(B, S, kv_lora_rank)`` and ``(B, S, qk_rope_head_dim)`` — per token
    ``kv_lora_rank + qk_rope_head_dim`` numbers, whatever the number of heads. Used by
    :class:`attnbook.layers.MultiHeadLatentAttention`.

    Source: DeepSeek-AI, "DeepSeek-V2" (2024), section 2.1.
    """

    window = None

    def __init__(self):
        self.c_kv = self.k_pe = self.positions = None

    @property
    def seq_len(self) -> int:
        """Number of cached tokens ``S`` (0 before the first update)."""
        return 0 if self.c_kv is None else self.c_kv.shape[1]

    def update(self, c_kv: torch.Tensor, k_pe: torch.Tensor, positions: torch.Tensor):
        """Append ``L`` new tokens' latents and RoPE keys; return everything cached.

        Args:
            c_kv: ``(B, L, kv_lora_rank)`` normalized latents of the new tokens.
            k_pe: ``(B, L, qk_rope_head_dim)`` their RoPE keys (rotation already applied),
                shared by all heads.
            positions: ``(L,)`` absolute positions of the new tokens, continuing the cached
                ones.

        Returns:
            ``(c_kv_all, k_pe_all, key_positions)`` of shapes ``(B, S + L, kv_lora_rank)``,
            ``(B, S + L, qk_rope_head_dim)`` and ``(S + L,)``.

        Raises:
            ValueError: if ``c_kv`` or ``k_pe`` is not 3-D or they disagree in ``(B, L)``,
                ``positions`` is not ``(L,)``, non-negative, strictly increasing and after
                every cached position, or the new tensors disagree with the cached ones in
                batch or width.
            TypeError: if ``positions`` is not an integer tensor.
        """
        if c_kv.ndim != 3 or k_pe.ndim != 3 or c_kv.shape[:2] != k_pe.shape[:2]:
            raise ValueError(
                f"c_kv (B, L, d_c) and k_pe (B, L, D_rope) disagree: "
                f"{tuple(c_kv.shape)} vs {tuple(k_pe.shape)}"
            )
        positions = check_positions(
            check_int_tensor(positions, "positions"),
            c_kv.shape[1],
            c_kv.shape,
            shared=True,
            increasing=True,
            x_name="c_kv",
        ).to(c_kv.device)
        if self.c_kv is not None and (
            c_kv.shape[0] != self.c_kv.shape[0]
            or c_kv.shape[2] != self.c_kv.shape[2]
            or k_pe.shape[2] != self.k_pe.shape[2]
        ):
            raise ValueError(
                f"new c_kv {tuple(c_kv.shape)} / k_pe {tuple(k_pe.shape)} do not match the cache "
                f"{tuple(self.c_kv.shape)} / {tuple(self.k_pe.shape)} in (B, ., width)"
            )
        _check_no_rewind(self.positions, positions)
        if self.c_kv is None:
            self.c_kv, self.k_pe, self.positions = c_kv, k_pe, positions
        else:
            self.c_kv = torch.cat((self.c_kv, c_kv), dim=1)  # (B, S + L, d_c)
            self.k_pe = torch.cat((self.k_pe, k_pe), dim=1)  # (B, S + L, D_rope)
            self.positions = torch.cat((self.positions, positions))
        return self.c_kv, self.k_pe, self.positions

    @property
    def nbytes(self) -> int:
        """Bytes held by the cached latents and RoPE keys (0 before the first update)."""
        if self.c_kv is None:
            return 0
        return (
            self.c_kv.numel() * self.c_kv.element_size()
            + self.k_pe.numel() * self.k_pe.element_size()
        )


# fmt: off
@torch.no_grad()
def greedy_generate_core(model, ids, max_new_tokens):
    """Greedy decoding with a KV cache: prefill, then one token a step.

    ``ids``: ``(B, T)`` prompt; returns ``(B, T + max_new_tokens)`` ids.
    """
    caches = model.make_caches()  # one empty KV cache per layer
    logits = model(ids, kv_caches=caches)  # prefill the prompt: (B, T, vocab)
    for step in range(max_new_tokens):
        nxt = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
        ids = torch.cat((ids, nxt), dim=1)  # (B, T + step + 1)
        if step + 1 < max_new_tokens:  # decode: only the new token runs
            logits = model(nxt, kv_caches=caches)  # (B, 1, vocab)
    return ids
# fmt: on


@torch.no_grad()
def greedy_generate(
    model, ids: torch.Tensor, max_new_tokens: int, *, use_cache: bool = True
) -> torch.Tensor:
    """Greedy decoding: append the most likely next token ``max_new_tokens`` times.

    Without the cache every step re-runs the model on the whole sequence; with it the prompt is
    processed once (prefill) and each step feeds only the newest token
    (:func:`greedy_generate_core`). Both give the same tokens (up to floating-point ties). The
    arguments are checked as :func:`attnbook.sampling.generate` checks them
    (:func:`attnbook.checks.check_generation`), and, as there, the model runs in eval mode (no
    dropout) for the call and gets its mode back afterwards: this is ``generate`` with
    ``temperature=0``, written out without sampling.

    Args:
        model: a :class:`attnbook.models.DecoderOnlyModel` (a ``torch.nn.Module`` with a
            ``config``, ``make_caches()`` and ``model(ids, kv_caches=...) -> logits
            (B, T, vocab)``).
        ids: ``(B, T)`` prompt token ids, ``T >= 1``, in ``[0, vocab_size)`` (lists and NumPy
            arrays are converted; computed in int64).
        max_new_tokens: number of tokens to generate, ``>= 0``.
        use_cache: use per-layer KV caches.

    Returns:
        ``(B, T + max_new_tokens)`` int64 token ids: the prompt followed by the generated
        tokens (a new tensor, also when ``max_new_tokens`` is 0).

    Raises:
        ValueError: if ``ids`` is not ``(B, T)`` with ``T >= 1`` and ids in ``[0, vocab_size)``,
            ``max_new_tokens < 0``, the total length exceeds ``max_seq_len`` with learned or
            sinusoidal positions, or the model's next-token logits hold nan or +inf (or a row of
            only -inf) at some step.
        TypeError: if ``model`` is not a decoder-only model, ``ids`` is not integer,
            ``max_new_tokens`` is not an integer (bools and floats are rejected), or
            ``use_cache`` is not a bool.
    """
    ids, max_new_tokens = check_generation(model, ids, max_new_tokens)  # (B, T) int64
    use_cache = check_bool(use_cache, "use_cache")
    if max_new_tokens == 0:
        return ids.clone()  # never the caller's own tensor

    def check_output(module, args, output):  # a diverged model: name it, not token 0
        check_logits(output[:, -1], "the model's next-token logits")

    hook = model.register_forward_hook(check_output)
    was_training = model.training
    model.eval()
    try:
        if use_cache:
            return greedy_generate_core(model, ids, max_new_tokens)
        for _ in range(max_new_tokens):  # no cache: re-run the whole sequence
            nxt = model(ids)[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            ids = torch.cat((ids, nxt), dim=1)
        return ids
    finally:
        hook.remove()
        model.train(was_training)

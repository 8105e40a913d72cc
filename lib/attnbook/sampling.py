"""Generating text from a decoder: greedy, temperature and top-k sampling; attention maps.

* :func:`sample_next_core` picks the next token from the last position's logits: the argmax
  at temperature 0, otherwise a draw from ``softmax(logits / temperature)`` restricted to the
  ``top_k`` most likely tokens (Fan et al., 2018, section 5.4; Holtzman et al., 2020,
  section 3).
* :func:`generate` appends ``max_new_tokens`` tokens. With the KV cache it processes the prompt
  once (prefill) and then feeds one token per step, as
  :func:`attnbook.kv_cache.greedy_generate_core` does; without it every step re-runs the model
  on the whole sequence. Both paths draw from the same generator in the same order, so with the
  same seed they give the same tokens (up to floating-point ties).
* :func:`attention_maps` returns every layer's and head's attention weights for a sequence.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from .checks import (
    check_bool,
    check_fits_positions,
    check_generation,
    check_generator,
    check_int,
    check_int_tensor,
    check_logits,
    check_real,
    check_seed,
    check_tensor,
    check_token_ids,
)

__all__ = ["sample_next_core", "sample_next", "generate_core", "generate", "attention_maps"]


# fmt: off
def sample_next_core(logits, temperature, top_k, generator):
    """Next token ids ``(B, 1)`` from the last position's logits ``(B, V)``.

    Temperature 0 is greedy (argmax); otherwise divide by the temperature,
    keep the ``top_k`` largest logits (``None``: all), softmax, draw one.
    """
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)  # (B, 1)
    logits = logits - logits.amax(dim=-1, keepdim=True)  # max 0: no overflow
    logits = (logits.double() / temperature).float()  # (B, V); tiny T ok
    if top_k is not None:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, -math.inf)  # drop the rest
    probs = torch.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)
# fmt: on


def _check_sampling(temperature, top_k, vocab_size):
    temperature = check_real(temperature, "temperature", minimum=0.0)
    if top_k is not None:
        top_k = check_int(top_k, "top_k", 1, vocab_size)
    return temperature, top_k


def _make_generator(seed, generator):
    if seed is not None and generator is not None:
        raise ValueError("pass seed or generator, not both")
    if generator is not None:
        return check_generator(generator)
    gen = torch.Generator()
    if seed is not None:
        gen.manual_seed(check_seed(seed))
    else:
        gen.seed()
    return gen


def sample_next(
    logits,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    generator: torch.Generator | None = None,
):
    """Next token ids from logits: greedy at temperature 0, else temperature and top-k sampling.

    The logits are shifted so that each row's maximum is 0 before the division by the
    temperature (the softmax does not change), so any temperature > 0, however small, gives
    finite scores: as ``temperature -> 0`` the draw becomes the argmax (among tied maxima, a
    uniform draw).

    Args:
        logits: ``(B, V)`` floating tensor (unnormalized scores of the next token), ``V >= 1``;
            no nan or +inf; ``-inf`` bans a token, but each row needs a finite logit.
        temperature: >= 0 and finite; 0 is greedy (argmax), 1 samples the model's
            distribution, lower sharpens it, higher flattens it.
        top_k: sample only among the ``top_k`` largest logits (ties at the k-th value are
            kept), ``1 <= top_k <= V``; ``None`` keeps all.
        seed: seed of a fresh ``torch.Generator``, ``0 <= seed < 2**64`` (``None``: a random
            seed).
        generator: a ``torch.Generator`` to draw from instead of ``seed``.

    Returns:
        ``(B, 1)`` int64 token ids.

    Raises:
        TypeError: if ``logits`` is not a floating tensor, ``top_k``/``seed`` not an integer,
            ``temperature`` not a real number or ``generator`` not a ``torch.Generator``.
        ValueError: if ``logits`` is not 2-D with ``V >= 1``, holds nan or +inf or a row of
            only -inf; ``temperature`` is negative or not finite, ``top_k`` is outside
            ``[1, V]``, ``seed`` is outside ``[0, 2**64)``, or both ``seed`` and
            ``generator`` are given.

    Source: Fan et al., "Hierarchical Neural Story Generation" (2018), section 5.4 (top-k);
    Ackley, Hinton & Sejnowski (1985) for the temperature of a Boltzmann distribution.
    """
    check_tensor(logits, "logits", ndim=2)  # (B, V) floating
    if logits.shape[1] < 1:
        raise ValueError(f"logits must be (B, V) with V >= 1; got shape {tuple(logits.shape)}")
    check_logits(logits, "logits")
    temperature, top_k = _check_sampling(temperature, top_k, logits.shape[1])
    return sample_next_core(logits, temperature, top_k, _make_generator(seed, generator))


# fmt: off
@torch.no_grad()
def generate_core(model, ids, max_new_tokens, temperature, top_k, generator):
    """Sampling with a KV cache: prefill the prompt, then one token a step.

    ``ids``: ``(B, T)`` prompt; returns ``(B, T + max_new_tokens)`` ids.
    """
    caches = model.make_caches()  # one empty KV cache per layer
    logits = model(ids, kv_caches=caches)  # prefill: (B, T, V)
    for step in range(max_new_tokens):
        last = logits[:, -1]  # (B, V): the newest position's logits
        nxt = sample_next_core(last, temperature, top_k, generator)  # (B, 1)
        ids = torch.cat((ids, nxt), dim=1)  # (B, T + step + 1)
        if step + 1 < max_new_tokens:  # decode: only the new token runs
            logits = model(nxt, kv_caches=caches)  # (B, 1, V)
    return ids
# fmt: on


@torch.no_grad()
def generate(
    model,
    ids,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    use_cache: bool = True,
    seed: int | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Append ``max_new_tokens`` sampled tokens to ``ids``, with or without the KV cache.

    The model is put in eval mode (no dropout) for the call and its mode restored afterwards.
    With ``use_cache`` the prompt runs once and each step feeds only the newest token
    (:func:`generate_core`); without, each step re-runs the whole sequence. Both draw one
    token per step from the same generator, so the same seed gives the same tokens.

    Args:
        model: a :class:`attnbook.models.DecoderOnlyModel` (anything with ``config``,
            ``make_caches()`` and ``model(ids, kv_caches=...) -> (B, T, V)`` logits).
        ids: ``(B, T)`` prompt token ids, ``T >= 1`` (tensor, array or nested list, any
            integer dtype; computed in int64).
        max_new_tokens: tokens to append, >= 0.
        temperature: >= 0; 0 is greedy decoding (see :func:`sample_next`).
        top_k: keep the ``top_k`` most likely tokens, ``1 <= top_k <= vocab_size``, or
            ``None``.
        use_cache: decode with per-layer KV caches.
        seed: seed of a fresh generator (``None``: random, unless ``generator`` is given).
        generator: a ``torch.Generator`` to draw from.

    Returns:
        ``(B, T + max_new_tokens)`` int64 token ids: the prompt, then the new tokens (a new
        tensor, also when ``max_new_tokens`` is 0).

    Raises:
        ValueError: if ``ids`` is not ``(B, T)`` with ``T >= 1`` and ids in
            ``[0, vocab_size)``; the total length exceeds ``max_seq_len`` with absolute
            (learned or sinusoidal) positions; ``temperature``, ``top_k`` or ``seed`` is out
            of range; both ``seed`` and ``generator`` are given; or the model's next-token
            logits hold nan or +inf (or a row of only -inf) at some step.
        TypeError: if ``model`` is not a ``torch.nn.Module`` with a ``config`` and
            ``make_caches()`` (an encoder-decoder model is refused), or an argument has the
            wrong type.
    """
    ids, max_new_tokens = check_generation(model, ids, max_new_tokens)  # (B, T) int64
    temperature, top_k = _check_sampling(temperature, top_k, model.config.vocab_size)
    use_cache = check_bool(use_cache, "use_cache")
    gen = _make_generator(seed, generator)
    if max_new_tokens == 0:
        return ids.clone()  # int64, never the caller's own tensor

    def check_output(module, args, output):  # a diverged model: name it, not multinomial
        check_logits(output[:, -1], "the model's next-token logits")

    hook = model.register_forward_hook(check_output)
    was_training = model.training
    model.eval()
    try:
        if use_cache:
            return generate_core(model, ids, max_new_tokens, temperature, top_k, gen)
        for _ in range(max_new_tokens):  # no cache: re-run the whole sequence
            logits = model(ids)[:, -1]  # (B, V)
            ids = torch.cat((ids, sample_next_core(logits, temperature, top_k, gen)), dim=1)
        return ids
    finally:
        hook.remove()
        model.train(was_training)


@torch.no_grad()
def attention_maps(model, ids) -> np.ndarray:
    """Every layer's and head's attention weights of a decoder-only model on one sequence.

    Each layer's self-attention is run a second time on the input it received during a plain
    forward pass, asking for its weights (``need_weights=True``), in eval mode (no dropout).

    Args:
        model: a :class:`attnbook.models.DecoderOnlyModel`.
        ids: ``(T,)`` or ``(1, T)`` token ids in ``[0, vocab_size)``.

    Returns:
        ``(n_layers, n_heads, T, T)`` float64 array: entry ``[l, h, i, j]`` is the weight of
        key ``j`` in query ``i``'s output in head ``h`` of layer ``l``; each row sums to 1 and
        is 0 above the diagonal (and outside a sliding window).

    Raises:
        TypeError: if ``model`` has no ``layers`` of self-attention blocks or ``ids`` are not
            integers.
        ValueError: if ``ids`` is not one sequence of ``T >= 1`` ids in ``[0, vocab_size)``,
            ``T`` exceeds ``max_seq_len`` with learned or sinusoidal positions, or the weights
            are not finite (a model with nan parameters).
    """
    layers = getattr(model, "layers", None)
    if (
        not isinstance(model, nn.Module)
        or layers is None
        or not hasattr(model, "config")
        or not all(hasattr(layer, "self_attn") for layer in layers)
    ):
        raise TypeError(f"model must be a DecoderOnlyModel, got {type(model).__name__}")
    ids = check_int_tensor(ids, "ids", None)
    if ids.ndim == 1:
        ids = ids[None]
    ids = check_token_ids(ids, "ids", model.config.vocab_size).to(torch.int64)
    if ids.shape[0] != 1 or ids.shape[1] < 1:
        raise ValueError(
            f"ids must be one sequence of T >= 1 ids, (T,) or (1, T); got shape {tuple(ids.shape)}"
        )
    cfg = model.config
    check_fits_positions(
        ids.shape[1], cfg.max_seq_len, cfg.positional, f"ids of shape {tuple(ids.shape)}"
    )
    calls = []

    def keep(module, args, kwargs):  # record the self-attention's input and keyword args
        calls.append((module, args, dict(kwargs)))

    hooks = [layer.self_attn.register_forward_pre_hook(keep, with_kwargs=True) for layer in layers]
    was_training = model.training
    model.eval()
    try:
        try:
            model(ids)
        finally:
            for h in hooks:
                h.remove()
        maps = []
        for module, args, kwargs in calls:
            kwargs.update(need_weights=True, kv_cache=None)
            _, w = module(*args, **kwargs)  # (1, H, T, T)
            maps.append(w[0].double().cpu().numpy())
    finally:
        model.train(was_training)
    maps = np.stack(maps)  # (n_layers, H, T, T)
    if not np.isfinite(maps).all():
        raise ValueError(
            f"the attention weights of shape {maps.shape} contain nan or inf: "
            "the model's parameters or activations are not finite"
        )
    return maps

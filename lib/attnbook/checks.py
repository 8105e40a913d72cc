"""Argument checks: the one place where ``attnbook`` validates what a caller passes in.

Every public function checks its arguments here and then calls its core (the short function
the book shows). One behaviour per kind of argument, so the same mistake gets the same error
everywhere:

* ``TypeError`` when the argument is the wrong *kind* of thing: a float, a bool or a string
  where an integer count is needed (``2.5``, ``True``, even ``2.0``), a string where a number
  is needed, a non-boolean array where a keep-mask is needed, an integer tensor where a
  floating-point one is needed, a list where a tensor is needed.
* ``ValueError`` when it is the right kind with a wrong *value*: out of range, nan or inf,
  a shape that does not match another argument, a name that is not one of the choices.

Scalars may be Python or NumPy numbers, or 0-d NumPy arrays and torch tensors
(``np.array(0.5)`` is a real number; ``np.int64(3)`` an integer). Messages name the argument
and the value or shapes it got, e.g. ``q has head_dim 64 but k has 32``.

This module imports only NumPy; the torch checks import torch when they are called.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

__all__ = [
    "check_causal_context",
    "check_kv_cache",
    "check_kv_caches",
    "check_int",
    "check_real",
    "check_qk_lr_gain",
    "check_bool",
    "check_choice",
    "check_callable",
    "check_divides",
    "check_seed",
    "check_warmup_steps",
    "check_rng",
    "check_increasing",
    "check_axis",
    "check_ndim",
    "check_rope_dim",
    "check_mla_sizes",
    "MLA_SIZES",
    "as_array",
    "as_float_array",
    "check_finite",
    "check_no_nan_or_posinf",
    "check_logits",
    "check_qkv",
    "check_kv_lengths",
    "check_leading_dims",
    "check_scale",
    "check_broadcast",
    "check_key_mask_length",
    "check_keep_mask",
    "check_int_array",
    "check_id_sequence",
    "check_tensor",
    "check_generator",
    "check_input_dtype",
    "check_int_tensor",
    "check_positions",
    "check_fits_positions",
    "check_generation",
    "check_rope_positions",
    "check_strings",
    "check_name",
    "check_names",
    "check_text",
    "check_features",
    "check_token_ids",
    "check_qkv_tensors",
    "check_head_counts",
    "check_dropout",
    "check_window",
    "check_masks_broadcast",
    "check_padding_mask",
    "check_mask",
    "check_module_input",
]


def _describe(value) -> str:
    return f"{value!r} ({type(value).__name__})"


def _unwrap_scalar(value):
    """A 0-d NumPy array or torch tensor becomes its Python/NumPy scalar; anything else as is."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    if type(value).__module__ == "torch" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def check_int(value, name: str, minimum: int | None = 0, maximum: int | None = None) -> int:
    """An integer count or index in ``[minimum, maximum]`` (either bound may be ``None``).

    Raises:
        TypeError: ``value`` is not an integer (bools and floats, even ``2.0``, are refused).
        ValueError: it lies outside the bounds.
    """
    value = _unwrap_scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {_describe(value)}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {value}")
    return value


def check_real(
    value,
    name: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    strict: bool = False,
    allow_inf: bool = False,
) -> float:
    """A real number, finite unless ``allow_inf``, within the bounds (exclusive if ``strict``).

    Raises:
        TypeError: ``value`` is not a real number (bools, strings and complex numbers refused).
        ValueError: it is nan, infinite (unless allowed) or outside the bounds.
    """
    value = _unwrap_scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {_describe(value)}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {value}")
    if minimum is not None and (value <= minimum if strict else value < minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum}, got {value}")
    if maximum is not None and (value >= maximum if strict else value > maximum):
        raise ValueError(f"{name} must be {'<' if strict else '<='} {maximum}, got {value}")
    return value


#: The range of a learning-rate gain that divides stored weights (see check_qk_lr_gain).
QK_LR_GAIN_RANGE = (1e-3, 1e3)


def check_qk_lr_gain(value, name: str = "qk_lr_gain") -> float:
    """A gain ``g`` in ``[1e-3, 1e3]`` by which stored ``W_Q``, ``W_K`` are divided.

    :class:`attnbook.experiments.ScaledMultiHeadAttention` stores its projections divided by
    ``g`` and multiplies their outputs by ``g``; a gain of ``1e-40`` made the stored weights
    ``inf`` (and the outputs NaN), one of ``1e30`` pushed them into the subnormals. 1000 is
    ``sqrt(d_k)`` of ``d_k = 10**6``, far past the book's sizes; ``1e-3`` its mirror.

    Raises:
        TypeError: ``value`` is not a real number.
        ValueError: it is not finite or lies outside ``[1e-3, 1e3]``.
    """
    lo, hi = QK_LR_GAIN_RANGE
    value = check_real(value, name)
    if not lo <= value <= hi:
        raise ValueError(
            f"{name} must lie in [{lo:g}, {hi:g}] (the stored W_Q and W_K are divided by "
            f"it and must stay finite and normal), got {value:g}"
        )
    return value


def check_bool(value, name: str) -> bool:
    """A Python or NumPy bool (or a 0-d boolean array/tensor); ``0``/``1`` are refused.

    Raises:
        TypeError: ``value`` is not a bool.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype == np.bool_:
        value = value[()]
    elif (
        type(value).__module__ == "torch"
        and getattr(value, "ndim", None) == 0
        and str(value.dtype) == "torch.bool"
    ):
        value = value.item()
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {_describe(value)}")
    return bool(value)


def check_instance(value, cls: type, name: str, made_by: str):
    """``value`` itself if it is a ``cls`` (the data an explorer's ``draw`` takes).

    Args:
        value: what was passed.
        cls: the class it must be.
        name: the argument's name, for the message.
        made_by: the function that makes a ``cls``, named in the message.

    Raises:
        TypeError: ``value`` is not a ``cls``.
    """
    if not isinstance(value, cls):
        raise TypeError(
            f"{name} must be a {cls.__name__} (from {made_by}), got {type(value).__name__}"
        )
    return value


def check_callable(fn, name: str = "fn", detail: str = ""):
    """A function (anything callable), returned as is.

    Args:
        fn: what was passed.
        name: the argument's name, for the message.
        detail: appended to "must be callable", e.g. how it will be called.

    Raises:
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"{name} must be callable{detail}, got {_describe(fn)}")
    return fn


def check_choice(value, name: str, allowed: Sequence):
    """One of ``allowed`` (compared with ``==``).

    Raises:
        ValueError: ``value`` is not among ``allowed``.
    """
    try:
        ok = any(value == a and type(value) is not bool for a in allowed)
    except Exception:  # an array compared with a scalar, say
        ok = False
    if not ok:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return value


def check_divides(n: int, name: str, size: int, size_name: str, hint: str = "") -> int:
    """``n`` (already an integer >= 1) divides ``size``: heads split a width into equal parts.

    Args:
        n: the divisor, e.g. ``n_heads``.
        name: its name in the message.
        size: the number it must divide, e.g. ``d_model``.
        size_name: what ``size`` is, in the message (``"d_model"``, ``"the feature size"``).
        hint: appended to the message, e.g. ``" (or set head_dim)"``.

    Returns:
        ``size // n``.

    Raises:
        ValueError: ``n`` does not divide ``size``, e.g. ``n_heads 3 must divide d_model 8``.
    """
    if size % n:
        raise ValueError(f"{name} {n} must divide {size_name} {size}{hint}")
    return size // n


def check_seed(value, name: str = "seed") -> int:
    """A seed for ``np.random.default_rng`` or ``torch.manual_seed``: ``0 <= seed < 2**64``.

    Raises:
        TypeError: ``value`` is not an integer.
        ValueError: it is negative or above ``2**64 - 1`` (torch's 64-bit unsigned seed).
    """
    return check_int(value, name, 0, 2**64 - 1)


def check_axis(axis, ndim: int, shape) -> int:
    """An axis of an array of rank ``ndim`` (negative counts from the end).

    Raises:
        TypeError: ``axis`` is not an integer.
        ValueError: it is out of range for ``shape``.
    """
    axis = _unwrap_scalar(axis)
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, numbers.Integral):
        raise TypeError(f"axis must be an integer, got {_describe(axis)}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {tuple(shape)}")
    return int(axis)


def check_ndim(x, name: str, layout: str):
    """``x`` has the axes ``layout`` names: exactly those, or at least those after a ``...``.

    Args:
        x: an array or tensor.
        name: its name in messages.
        layout: its shape in words, e.g. ``"(B, H, L, D)"`` (exactly 4 axes) or
            ``"(..., L, D)"`` (at least 2).

    Returns:
        ``x`` unchanged.

    Raises:
        ValueError: ``x`` has another number of axes (the message gives ``layout`` and the
            shape it got).
    """
    axes = [a.strip() for a in layout.strip("()").split(",") if a.strip()]
    n = len(axes) - axes.count("...")
    if (x.ndim < n) if "..." in axes else (x.ndim != n):
        raise ValueError(f"{name} must have shape {layout}; got shape {tuple(x.shape)}")
    return x


def check_warmup_steps(warmup_steps, steps: int) -> int:
    """Updates of learning-rate warm-up: an integer in ``[0, steps)`` (0: no warm-up).

    A warm-up as long as the run or longer would never reach the peak rate (nor start the
    decay that follows it), so it is refused rather than quietly cut short.

    Args:
        warmup_steps: the warm-up's length in updates.
        steps: the run's number of updates (an integer already checked, >= 1).

    Raises:
        TypeError: ``warmup_steps`` is not an integer.
        ValueError: it is negative, or not below ``steps`` (the message gives both).
    """
    warmup_steps = check_int(warmup_steps, "warmup_steps", 0)
    if warmup_steps >= steps:
        raise ValueError(
            f"warmup_steps={warmup_steps} must be < steps={steps}: a warm-up as long as the "
            "run never reaches the peak learning rate"
        )
    return warmup_steps


def check_causal_context(causal, context) -> bool:
    """``causal`` as a bool, refused together with a cross-attention ``context``.

    A cross-attention source is known in full: there is no later key to hide.

    Raises:
        TypeError: ``causal`` is not a bool.
        ValueError: ``causal`` is True and ``context`` is not None.
    """
    causal = check_bool(causal, "causal")
    if causal and context is not None:
        raise ValueError(
            "causal=True needs self-attention (context=None): a cross-attention "
            "source is known in full, there is no later key to hide"
        )
    return causal


def check_rope_dim(dim: int, name: str = "head_dim", detail: str = "") -> int:
    """A dimension that RoPE rotates: even and at least 2, since RoPE rotates pairs.

    Args:
        dim: the dimension (an integer already checked).
        name: its name in messages (``head_dim``, ``qk_rope_head_dim``).
        detail: appended to the message, e.g. the shape it comes from.

    Raises:
        ValueError: ``dim`` is odd or below 2.
    """
    if dim < 2:
        raise ValueError(
            f"RoPE rotates pairs of dimensions; {name} must be >= 2, got {dim}{detail}"
        )
    if dim % 2:
        raise ValueError(
            f"RoPE rotates pairs of dimensions; {name} must be even, got {dim}{detail}"
        )
    return dim


#: The sizes of multi-head latent attention (DeepSeek-V2's names), as :func:`check_mla_sizes`
#: checks them.
MLA_SIZES = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def check_mla_sizes(
    kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, q_lora_rank=None
) -> tuple:
    """The sizes of multi-head latent attention: positive integers, an even RoPE part.

    Shared by :class:`attnbook.layers.MultiHeadLatentAttention` and
    :class:`attnbook.config.ModelConfig` (an MLA config).

    Args:
        kv_lora_rank: the latent size ``d_c``.
        qk_nope_head_dim: per-head query/key dimension without position.
        qk_rope_head_dim: per-head RoPE dimension (even: RoPE rotates pairs).
        v_head_dim: per-head value dimension.
        q_lora_rank: the query's latent size, or ``None`` for a plain query projection.

    Returns:
        ``(kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, q_lora_rank)`` as
        ``int`` (``q_lora_rank`` may stay ``None``).

    Raises:
        TypeError: a size is not an integer (``None`` is only allowed for ``q_lora_rank``).
        ValueError: a size is < 1, or ``qk_rope_head_dim`` is odd.
    """
    values = (kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim)
    out = [check_int(v, name, 1) for v, name in zip(values, MLA_SIZES)]
    check_rope_dim(out[2], "qk_rope_head_dim")
    out.append(None if q_lora_rank is None else check_int(q_lora_rank, "q_lora_rank", 1))
    return tuple(out)


def as_array(x, name: str) -> np.ndarray:
    """``x`` as a NumPy array of its own dtype (bool stays bool).

    A torch tensor is detached and moved to the CPU (bfloat16 becomes float32, which NumPy
    lacks), so tensors that require grad are accepted.

    Raises:
        TypeError: ``x`` cannot be an array (a ragged nested list, an object NumPy refuses).
    """
    if type(x).__module__ == "torch" and hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        x = x.numpy()
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array, got {type(x).__name__} ({exc})") from None


def as_float_array(x, name: str) -> np.ndarray:
    """``x`` as a floating-point NumPy array; integers and bools become float64.

    A torch tensor is detached and moved to the CPU (bfloat16 becomes float32, which NumPy
    lacks), so tensors that require grad are accepted. The dtype of a float input is kept.

    Raises:
        TypeError: ``x`` is not real and numeric (strings, objects, complex numbers, a ragged
            nested list).
    """
    arr = as_array(x, name)
    if np.issubdtype(arr.dtype, np.floating):
        return arr
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real, got dtype {arr.dtype} (shape {arr.shape})")
    if not (np.issubdtype(arr.dtype, np.integer) or arr.dtype == np.bool_):
        raise TypeError(f"{name} must be a real numeric array, got dtype {arr.dtype}")
    return arr.astype(np.float64)


def check_finite(arr, name: str) -> None:
    """Raise ``ValueError`` if the array or tensor ``arr`` holds a nan or an inf."""
    if type(arr).__module__ == "torch":
        import torch

        finite = bool(torch.isfinite(arr).all())
    else:
        finite = bool(np.isfinite(arr).all())
    if not finite:
        raise ValueError(f"{name} of shape {tuple(arr.shape)} contains nan or inf")


def check_no_nan_or_posinf(arr, name: str, detail: str = "") -> None:
    """Refuse a nan or ``+inf`` entry; ``-inf`` (a hidden score, a banned token) is allowed.

    The rule of everything a softmax reads: scores, logits, additive masks.

    Args:
        arr: a NumPy array or torch tensor.
        name: its name in the message.
        detail: appended to the message (why it matters, what to do instead).

    Raises:
        ValueError: ``arr`` holds a nan or ``+inf`` (the message gives its shape and the
            first such index).
    """
    if type(arr).__module__ == "torch":
        import torch

        bad = torch.isnan(arr) | torch.isposinf(arr)
        first = tuple(bad.nonzero()[0].tolist()) if bool(bad.any()) else None
    else:
        bad = np.isnan(arr) | np.isposinf(arr)
        first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    if first is not None:
        raise ValueError(
            f"{name} of shape {tuple(arr.shape)} contains nan or +inf at index {first}{detail}"
        )


def check_logits(logits, name: str) -> None:
    """Next-token logits a decoder can pick from: no nan or ``+inf``, a finite entry per row.

    ``-inf`` marks a banned token and is allowed while its row keeps a finite logit. Used on
    every step of :func:`attnbook.sampling.generate` and :func:`attnbook.kv_cache.greedy_generate`
    (a diverged model is named there, not met as a sampling error or a silent token 0).

    Args:
        logits: ``(..., V)`` floating-point tensor.
        name: its name in messages.

    Raises:
        ValueError: a nan or ``+inf`` entry, or a row of only ``-inf`` (its index given).
    """
    import torch  # the NumPy checks above do not need it

    check_no_nan_or_posinf(logits, name)
    dead = ~torch.isfinite(logits).any(dim=-1)  # rows of -inf only
    if bool(dead.any()):
        raise ValueError(
            f"{name} of shape {tuple(logits.shape)} has a row with no finite "
            f"logit (all -inf) at index {tuple(dead.nonzero()[0].tolist())}"
        )


def check_qkv(q, k, v):
    """NumPy attention inputs: ``q (..., L, D)``, ``k (..., S, D)``, ``v (..., S, Dv)``.

    Returns:
        ``(q, k, v, batch)``: float arrays and the broadcast batch (leading) shape.

    Raises:
        TypeError: an input is not a real numeric array.
        ValueError: rank below 2, nan/inf, ``q``/``k`` head dims or ``k``/``v`` lengths that
            differ, or leading dimensions that do not broadcast.
    """
    q, k, v = as_float_array(q, "q"), as_float_array(k, "k"), as_float_array(v, "v")
    for name, arr in (("q", q), ("k", k), ("v", v)):
        check_ndim(arr, name, "(..., seq, dim)")
        check_finite(arr, name)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q has head_dim {q.shape[-1]} but k has {k.shape[-1]} "
            f"(q.shape={q.shape}, k.shape={k.shape})"
        )
    check_kv_lengths(k, v)
    return q, k, v, check_leading_dims(q=q, k=k, v=v)


def check_kv_lengths(k, v) -> None:
    """Keys ``(..., S, D)`` and values ``(..., S, Dv)``: one value per key.

    Raises:
        ValueError: ``k`` and ``v`` have different lengths ``S`` (the message gives both
            shapes).
    """
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k has {k.shape[-2]} keys but v has {v.shape[-2]} values "
            f"(k.shape={k.shape}, v.shape={v.shape})"
        )


def check_leading_dims(**arrays) -> tuple:
    """The broadcast batch shape of NumPy attention inputs ``(..., seq, dim)``.

    Args:
        **arrays: the inputs by name, e.g. ``q=q, k=k, v=v`` (each at least 2-D).

    Returns:
        The broadcast shape of their leading (batch/head) dimensions.

    Raises:
        ValueError: those do not broadcast (the message names every input and its shape).
    """
    try:
        return np.broadcast_shapes(*(a.shape[:-2] for a in arrays.values()))
    except ValueError:
        names = list(arrays)
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        shapes = ", ".join(f"{n}.shape={a.shape}" for n, a in arrays.items())
        raise ValueError(
            f"the leading (batch/head) dimensions of {listed} do not broadcast: {shapes}"
        ) from None


def check_scale(scale, head_dim: int) -> float:
    """The score scale: ``1/sqrt(head_dim)`` if ``scale`` is None, else a finite real number.

    Raises:
        TypeError: ``scale`` is not a real number (0-d arrays and tensors are accepted).
        ValueError: it is nan or infinite.
    """
    if scale is None:
        return 1.0 / math.sqrt(head_dim) if head_dim > 0 else 1.0
    return check_real(scale, "scale")


def check_key_mask_length(mask, name: str, L: int, S: int) -> None:
    """A 1-D mask is a key mask ``(S,)``: refuse one whose length is neither ``S`` nor 1.

    Masks broadcast to the scores' ``(..., L, S)`` as NumPy and torch broadcast, from the last
    axis, so a 1-D mask always lines up with the keys, also when ``L == S``. A per-query mask
    is ``(L, 1)``. Masks of another rank pass unchecked.

    Raises:
        ValueError: ``mask`` is 1-D of a length other than ``S`` and 1 (the message gives
            the shapes and how to write a per-query mask).
    """
    if len(mask.shape) == 1 and mask.shape[0] not in (1, S):
        raise ValueError(
            f"a 1-D {name} is a key mask of shape (S,) = ({S},), lined up with the keys of "
            f"the scores (..., L={L}, S={S}); got shape {tuple(mask.shape)}. For a "
            f"per-query mask pass shape (L, 1), e.g. {name}[:, None]"
        )


def check_broadcast(arr, name: str, target_shape) -> None:
    """Raise ``ValueError`` unless ``arr`` broadcasts to ``target_shape`` without enlarging it.

    A 1-D ``arr`` is read as ``(S,)`` against scores ``(..., L, S)``
    (:func:`check_key_mask_length`).
    """
    target_shape = tuple(target_shape)
    if len(target_shape) >= 2:
        check_key_mask_length(arr, name, *target_shape[-2:])
    try:
        result = np.broadcast_shapes(tuple(arr.shape), target_shape)
    except ValueError:
        result = None
    if result != target_shape:
        raise ValueError(
            f"{name} of shape {tuple(arr.shape)} does not broadcast to the scores' shape "
            f"{target_shape} (expected e.g. (L, S) or (B, 1, 1, S))"
        )


def check_keep_mask(mask, name: str, target_shape=None):
    """A boolean keep-mask (``True`` = may attend), as a NumPy array or a torch tensor.

    Args:
        mask: the mask; a torch tensor stays one, anything else becomes a NumPy array.
        name: its name in messages (e.g. ``mask`` or ``masks[1]``).
        target_shape: if given, the scores' shape the mask must broadcast to.

    Raises:
        TypeError: ``mask`` is not boolean.
        ValueError: it does not broadcast to ``target_shape``.
    """
    if type(mask).__module__ != "torch":
        mask = np.asarray(mask)
    if str(mask.dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"{name} must be a boolean keep-mask (True = may attend); got dtype {mask.dtype} "
            f"(shape {tuple(mask.shape)})"
        )
    if target_shape is not None:
        check_broadcast(mask, name, target_shape)
    return mask


def check_masks_broadcast(masks, name: str = "masks") -> tuple:
    """Masks that broadcast together (to combine them by logical AND).

    Args:
        masks: NumPy arrays or torch tensors.
        name: what they are called in the message.

    Returns:
        Their common broadcast shape.

    Raises:
        ValueError: their shapes do not broadcast together (the message lists them).
    """
    shapes = [tuple(m.shape) for m in masks]
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise ValueError(
            f"{name} do not broadcast together: shapes " + ", ".join(str(s) for s in shapes)
        ) from None


def check_padding_mask(attention_mask, name: str = "attention_mask", shape=None) -> np.ndarray:
    """A Hugging Face style ``(B, S)`` padding mask: 1 (or True) at tokens, 0 at padding.

    Args:
        attention_mask: the mask (array, tensor or nested list).
        name: its name in messages.
        shape: if given, the ``(B, S)`` shape of the token ids the mask goes with.

    Returns:
        The mask as a NumPy array of its own dtype (bool, integer or float).

    Raises:
        TypeError: it is not numeric (strings, objects).
        ValueError: it is not 2-D, holds a value other than 0 and 1, or has another shape
            than ``shape``.
    """
    am = as_array(attention_mask, name)
    if am.dtype != np.bool_ and not (
        np.issubdtype(am.dtype, np.integer) or np.issubdtype(am.dtype, np.floating)
    ):
        raise TypeError(
            f"{name} must hold 0 and 1 (integers or bools); got dtype {am.dtype} (shape {am.shape})"
        )
    if am.ndim != 2:
        raise ValueError(
            f"{name} must have shape (B, S) with 1 = real token, 0 = pad; got shape {am.shape}"
        )
    if am.dtype != np.bool_ and not np.isin(am, (0, 1)).all():
        bad = np.unique(am[~np.isin(am, (0, 1))])[:5]
        raise ValueError(f"{name} of shape {am.shape} must hold only 0 and 1; found {bad.tolist()}")
    if shape is not None and tuple(am.shape) != tuple(shape):
        raise ValueError(
            f"{name} must be (B, S) = {tuple(shape)} like the token ids; got shape {am.shape}"
        )
    return am


def check_int_array(values, name: str, minimum: int | None = 0, ndim: int | None = None):
    """An integer NumPy array (e.g. token ids, lengths, positions), all ``>= minimum``.

    Every entry fits in int64, so callers may compute in int64 (``astype(np.int64)``).

    Raises:
        TypeError: the entries are not integers (bools and floats refused, also a bool inside
            a list of ints, which NumPy would read as 0 or 1).
        ValueError: wrong rank, an entry below ``minimum``, or an entry above the int64
            maximum ``2**63 - 1`` (an unsigned one, or a Python int of any size).
    """
    arr = np.asarray(values)
    _check_int_sequence(values, arr, name, minimum)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if arr.size == 0 and arr.dtype == np.float64:  # [] reads as float64
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"{name} must hold integers, got dtype {arr.dtype} (shape {arr.shape})")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {arr.shape}")
    if minimum is not None and arr.size and int(arr.min()) < minimum:
        raise ValueError(
            f"{name} must be >= {minimum}, got min {int(arr.min())} (shape {arr.shape})"
        )
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > np.iinfo(np.int64).max:
        # uint64 beyond int64 would wrap negative where callers compute in int64
        raise ValueError(
            f"{name} must be <= {np.iinfo(np.int64).max} (int64), got max "
            f"{int(arr.max())} (dtype {arr.dtype}, shape {arr.shape})"
        )
    return arr


_INT64 = np.iinfo(np.int64)


def _entry_types(values) -> set:
    """The types of the entries of a (nested) list or tuple, at C speed row by row."""
    types = set(map(type, values))
    if list in types or tuple in types:
        types -= {list, tuple}
        for row in values:
            if type(row) in (list, tuple):
                types |= _entry_types(row)
    return types


def _leaves(values):
    """The entries of a (nested) list or tuple, in NumPy's (row-major) order."""
    for v in values:
        if type(v) in (list, tuple):
            yield from _leaves(v)
        else:
            yield v


def _check_int_sequence(values, arr, name: str, minimum: int | None) -> None:
    """What NumPy's conversion ``arr`` of a list or tuple ``values`` hides, named.

    ``np.asarray([0, True, 2])`` is ``[0, 1, 2]`` (the bool passes as an int) and
    ``np.asarray([0, 1, 2**70])`` an object array (not "too large"). Arrays, tensors and
    ragged lists (``arr`` is ``None``) are left to the caller's checks.
    """
    if not isinstance(values, (list, tuple)) or arr is None:
        return
    types = _entry_types(values)
    if bool in types or np.bool_ in types:
        index, entry = next(
            (i, e) for i, e in enumerate(_leaves(values)) if isinstance(e, (bool, np.bool_))
        )
        raise TypeError(
            f"{name} must hold integers, got the bool {entry!r} at flat index {index} "
            f"(bools are refused, not read as 0 or 1)"
        )
    if (
        arr.dtype.kind in "iu"
        or not types
        or not all(issubclass(t, numbers.Integral) for t in types)
    ):
        return  # NumPy read them as integers (unsigned ones are checked after), or not ints
    ints = [int(e) for e in _leaves(values)]  # Python ints beyond int64: object or float64
    lo, hi, shape = min(ints), max(ints), arr.shape
    if minimum is not None and lo < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got min {lo} (shape {shape})")
    if lo < _INT64.min:
        raise ValueError(f"{name} must be >= {_INT64.min} (int64), got min {lo} (shape {shape})")
    if hi > _INT64.max:  # the message of an unsigned array beyond int64, below
        raise ValueError(f"{name} must be <= {_INT64.max} (int64), got max {hi} (shape {shape})")


def check_text(value, name: str) -> str:
    """A string that UTF-8 can encode (what a tokenizer needs): no lone surrogate.

    Raises:
        TypeError: ``value`` is not a string.
        ValueError: it holds a lone surrogate (a code point U+D800 to U+DFFF on its own),
            which is not text.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {_describe(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{name} holds a lone surrogate {value[exc.start]!r} at index "
            f"{exc.start} (of {len(value)} characters), which is not text "
            "UTF-8 can encode"
        ) from None
    return value


def check_strings(values, name: str) -> list:
    """A list or tuple of strings (e.g. sentences), returned as a list; a bare string is refused.

    Each entry is checked by :func:`check_text`.

    Raises:
        TypeError: ``values`` is not a list or tuple, or an entry is not a string (the message
            names the entry, e.g. ``sentences[1]``).
        ValueError: an entry holds a lone surrogate.
    """
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list or tuple of strings, got {type(values).__name__}")
    for i, s in enumerate(values):
        if not isinstance(s, str):
            raise TypeError(f"{name}[{i}] must be a string, got {type(s).__name__}")
        check_text(s, f"{name}[{i}]")
    return list(values)


def check_name(value, name: str, allowed: Sequence[str]) -> str:
    """One name among ``allowed``: which arm or model a function is about.

    Raises:
        TypeError: ``value`` is not a string (``None`` and numbers included).
        ValueError: it is not one of ``allowed``.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {list(allowed)}, got {_describe(value)}")
    return check_choice(value, name, list(allowed))


def check_names(values, name: str, allowed: Sequence[str]) -> list:
    """A non-empty list or tuple of distinct names, each one of ``allowed``.

    Which arms or models a run trains; a bare string is refused, as :func:`check_strings`
    refuses it.

    Returns:
        The names as a list, in the caller's order.

    Raises:
        TypeError: ``values`` is not a list or tuple of strings.
        ValueError: it is empty, names something not in ``allowed`` (the entry named, e.g.
            ``models[1]``) or names one twice.
    """
    values = check_strings(values, name)
    if not values:
        raise ValueError(f"{name} must name at least one of {list(allowed)}")
    for i, v in enumerate(values):
        check_choice(v, f"{name}[{i}]", list(allowed))
    if len(set(values)) != len(values):
        raise ValueError(f"{name} names an entry twice: {values}")
    return values


def check_rng(value, name: str = "rng"):
    """A ``numpy.random.Generator`` (returned as is) or a seed (an integer >= 0, or ``None``).

    Returns:
        A ``numpy.random.Generator``.

    Raises:
        TypeError: ``value`` is neither a Generator nor an integer (bools and floats refused).
        ValueError: the seed is negative.
    """
    if isinstance(value, np.random.Generator):
        return value
    if value is not None:
        value = _unwrap_scalar(value)
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise TypeError(
                f"{name} must be a numpy.random.Generator or an integer seed, got "
                f"{_describe(value)}"
            )
        value = check_int(value, f"{name} seed", 0)
    return np.random.default_rng(value)


def check_increasing(
    values, name: str, *, minimum=None, maximum=None, integer: bool = True
) -> tuple:
    """A non-empty, strictly increasing sequence of integers (or reals) within the bounds.

    E.g. the stops of an explorer's slider. Each entry is checked as :func:`check_int` (or
    :func:`check_real` if ``integer`` is false) would check it, named ``name[i]``.

    Returns:
        The entries as a tuple of ``int`` (or ``float``).

    Raises:
        TypeError: ``values`` is not a sequence (a string, a set and an array that is not 1-D,
            e.g. a 0-d one, are refused), or an entry is not an integer (a real number).
        ValueError: it is empty, an entry lies outside the bounds, or the entries do not
            strictly increase.
    """
    if isinstance(values, np.ndarray) and values.ndim != 1:
        raise TypeError(
            f"{name} must be a sequence of {'integers' if integer else 'numbers'}, got an "
            f"array of shape {values.shape} (a 1-D array or a list is expected)"
        )
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise TypeError(
            f"{name} must be a sequence of "
            f"{'integers' if integer else 'numbers'}, got {_describe(values)}"
        )
    if len(values) == 0:
        raise ValueError(f"{name} must not be empty")
    if integer:
        out = tuple(check_int(v, f"{name}[{i}]", minimum, maximum) for i, v in enumerate(values))
    else:
        out = tuple(
            check_real(v, f"{name}[{i}]", minimum=minimum, maximum=maximum)
            for i, v in enumerate(values)
        )
    if any(b <= a for a, b in zip(out, out[1:])):
        raise ValueError(f"{name} must be strictly increasing, got {out}")
    return out


# ------------------------------------------------------------------------------------------
# torch
# ------------------------------------------------------------------------------------------


def check_id_sequence(
    ids, name: str, minimum_len: int = 1, vocab_size: int | None = None, len_hint: str = ""
) -> np.ndarray:
    """A 1-D sequence of token ids as int64: integers, none negative, at least ``minimum_len``.

    Args:
        ids: 1-D integer array, list or tensor of token ids.
        name: the argument's name, used in the messages.
        minimum_len: fewest ids accepted.
        vocab_size: if given, every id must be below it.
        len_hint: appended to the length message (e.g. why that many ids are needed).

    Returns:
        The ids as a 1-D int64 NumPy array.

    Raises:
        TypeError: if ``ids`` are not integers.
        ValueError: if ``ids`` is not 1-D, holds a negative id (or an unsigned one beyond
            int64), fewer than ``minimum_len`` ids, or an id ``>= vocab_size``.
    """
    import torch  # torch is imported lazily here, as in check_int_tensor

    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    arr = check_int_array(ids, name, 0, ndim=1)  # 1-D, integer, no negative id
    if arr.size < minimum_len:
        raise ValueError(
            f"{name} must hold at least {minimum_len} ids{len_hint}; got shape {arr.shape}"
        )
    if vocab_size is not None and arr.size and int(arr.max()) >= vocab_size:
        raise ValueError(
            f"{name} must lie in [0, vocab_size={vocab_size}); got a maximum of "
            f"{int(arr.max())} (shape {arr.shape})"
        )
    return arr.astype(np.int64, copy=False)


def check_tensor(x, name: str, *, ndim: int | None = None, floating: bool = True):
    """A torch tensor, of rank ``ndim`` if given, floating-point if ``floating``.

    Raises:
        TypeError: ``x`` is not a tensor, or not floating-point when that is required.
        ValueError: it has the wrong rank.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if floating and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(x.shape)}")
    return x


def check_generator(generator, name: str = "generator"):
    """A ``torch.Generator`` (the random stream a sampler or batch drawer reads).

    Raises:
        TypeError: ``generator`` is not a ``torch.Generator``; the message gives both fully
            qualified names, so a ``numpy.random.Generator`` is told apart from the
            ``torch.Generator`` it must be (both are called "Generator").
    """
    import torch

    if not isinstance(generator, torch.Generator):
        got = type(generator)
        qualified = got.__qualname__ if got.__module__ == "builtins" else _qualified(got)
        raise TypeError(
            f"{name} must be a torch.Generator (from torch.Generator().manual_seed(seed)), "
            f"got {qualified}"
        )
    return generator


def _qualified(cls: type) -> str:
    """``numpy.random.Generator`` rather than ``numpy.random._generator.Generator``."""
    module = cls.__module__
    public = ".".join(p for p in module.split(".") if not p.startswith("_"))
    return f"{public}.{cls.__qualname__}" if public else cls.__qualname__


def check_input_dtype(x, weight, name: str = "x") -> None:
    """``x`` is a floating tensor of the dtype of a module's ``weight`` (else ``TypeError``)."""
    check_tensor(x, name)
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's parameters are {weight.dtype}; "
            f"convert one of them (e.g. {name}.to({weight.dtype}) or module.to({x.dtype}))"
        )


def check_int_tensor(values, name: str, minimum: int | None = 0):
    """An integer torch tensor (lists and NumPy arrays are converted), all ``>= minimum``.

    Unsigned NumPy arrays, and torch tensors of uint16/32/64 (which torch cannot compare),
    become int64; an empty list or tuple becomes an empty int64 tensor (as in
    :func:`check_int_array`).

    Raises:
        TypeError: not convertible, or not integer (floats and bools refused, also a bool
            inside a list of ints).
        ValueError: an entry below ``minimum``, or an entry above the int64 maximum
            ``2**63 - 1`` (an unsigned one, or a Python int of any size).
    """
    import torch

    if isinstance(values, torch.Tensor) and values.dtype in (
        getattr(torch, "uint16", None),
        getattr(torch, "uint32", None),
        getattr(torch, "uint64", None),
    ):
        values = values.cpu().numpy()  # torch has no min/max for these: check in NumPy
    if not isinstance(values, torch.Tensor):
        try:
            arr = np.asarray(values)
        except (TypeError, ValueError):
            arr = None  # ragged: refused below
        _check_int_sequence(values, arr, name, minimum)
        if arr is not None and arr.size == 0 and arr.dtype == np.float64:
            arr = arr.astype(np.int64)  # [] reads as float64
        try:
            if arr is None:
                raise TypeError
            tensor = None if arr.dtype.kind == "u" else torch.as_tensor(arr)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"{name} must be an integer tensor, got {type(values).__name__}"
            ) from None
        if tensor is None:  # unsigned: int64 holds them all (else a ValueError)
            tensor = torch.as_tensor(check_int_array(arr, name, None).astype(np.int64))
        values = tensor
    if values.is_floating_point() or values.is_complex() or values.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got dtype {values.dtype}")
    if minimum is not None and values.numel() and int(values.min()) < minimum:
        raise ValueError(
            f"{name} must be >= {minimum}, got min {int(values.min())} "
            f"(shape {tuple(values.shape)})"
        )
    return values


def check_positions(
    positions,
    seq_len: int,
    x_shape,
    name: str = "positions",
    *,
    batch: bool = False,
    shared: bool = False,
    increasing: bool = False,
    x_name: str = "x",
):
    """Token positions ``(..., seq_len)``: non-negative integers, one per token of ``x``.

    Returns a torch tensor if ``positions`` is one, else a NumPy array.

    Args:
        positions: the positions.
        seq_len: the number of tokens of ``x``.
        x_shape: the shape of ``x`` (for messages, and its batch ``x_shape[0]``).
        name: the argument's name in messages.
        batch: if true, ``positions`` is ``(L,)`` or ``(B, L)`` with ``B = x_shape[0]``.
        shared: if true, ``positions`` is ``(L,)`` only: one position per token, shared by
            every row of the batch (a cache that keeps one position per slot, such as
            :class:`attnbook.kv_cache.SlidingWindowCache`, has no per-row ``(B, L)``).
        increasing: if true, the positions follow the tokens' order, as a cache that appends
            them needs: ``(L,)`` positions strictly increase; per-row ``(B, L)`` positions
            never decrease within a row, and may repeat, as left padding repeats position 0
            at the pads (:func:`attnbook.masks.positions_from_attention_mask`).
        x_name: the name of ``x`` in messages (``ids`` for token ids).

    Raises:
        TypeError: not integers.
        ValueError: negative, the last dimension is not ``seq_len``, (with ``batch``) more
            than 2 axes, 2-D positions whose batch is not that of ``x``, (with ``shared``)
            more than 1 axis, or (with ``increasing``) positions out of order.
    """
    if type(positions).__module__ == "torch":
        positions = check_int_tensor(positions, name)
    else:
        positions = check_int_array(positions, name)
    if positions.ndim == 0 or positions.shape[-1] != seq_len:
        raise ValueError(
            f"{name} of shape {tuple(positions.shape)} must end in the sequence length "
            f"{seq_len} ({x_name} has shape {tuple(x_shape)}); pass one position per token"
        )
    if shared and positions.ndim != 1:
        raise ValueError(
            f"{name} must be (L,) = ({seq_len},), one position per token shared by the batch; "
            f"got shape {tuple(positions.shape)} ({x_name} has shape {tuple(x_shape)})"
        )
    if batch and positions.ndim > 2:
        raise ValueError(
            f"{name} must be (L,) or (B, L); got shape {tuple(positions.shape)} "
            f"({x_name} has shape {tuple(x_shape)})"
        )
    if batch and positions.ndim == 2 and positions.shape[0] != x_shape[0]:
        raise ValueError(
            f"{name} of shape {tuple(positions.shape)} do not match batch "
            f"{x_shape[0]} of {x_name} (shape {tuple(x_shape)})"
        )
    if increasing:
        _check_in_order(positions, name, x_name, x_shape)
    return positions


def _check_in_order(positions, name: str, x_name: str, x_shape) -> None:
    """``(L,)`` positions strictly increase; ``(B, L)`` rows never decrease."""
    pos = positions.cpu().numpy() if type(positions).__module__ == "torch" else positions
    pos = np.asarray(pos, dtype=np.int64)
    step = np.diff(pos, axis=-1)  # (..., L - 1); no overflow: every entry is in [0, 2**63)
    bad = step <= 0 if pos.ndim == 1 else step < 0
    if not bad.any():
        return
    where = tuple(int(i) for i in np.argwhere(bad)[0])  # the first pair out of order
    *row, i = where
    at = f"{name}[{', '.join(map(str, [*row, i]))}]"
    after = f"{name}[{', '.join(map(str, [*row, i + 1]))}]"
    line = f"{name}[{', '.join(map(str, row))}]" if row else name  # the row out of order
    values = pos[tuple(row)].tolist()
    shown = values if len(values) <= 16 else [*values[:16], "..."]
    rule = (
        "strictly increase (one position per token, in order)"
        if pos.ndim == 1
        else "never decrease within a row (a row may repeat one, as left padding does)"
    )
    raise ValueError(
        f"{name} must {rule}: {after} = {int(pos[(*row, i + 1)])} comes after "
        f"{at} = {int(pos[(*row, i)])}; got {line} = {shown} "
        f"({x_name} has shape {tuple(x_shape)})"
    )


def check_rope_positions(pos_shape, x_shape, name: str = "positions") -> tuple:
    """The shape RoPE positions take to broadcast over ``x (..., L, D)`` without enlarging it.

    Positions ``(L,)`` serve every row; ``(B, L)`` with a 4-D ``x (B, H, L, D)`` are read as
    ``(B, 1, L)``, one row per batch element shared by the heads. The NumPy and torch
    ``apply_rope`` both ask this.

    Args:
        pos_shape: the positions' shape (already checked to end in ``L``).
        x_shape: the shape of ``x``.
        name: the positions' name in the message.

    Returns:
        The shape to view the positions as.

    Raises:
        ValueError: they do not broadcast to ``x_shape[:-1]``, or would enlarge it.
    """
    pos_shape, x_shape = tuple(pos_shape), tuple(x_shape)
    shape = pos_shape
    if len(pos_shape) == 2 and len(x_shape) == 4:
        shape = (pos_shape[0], 1, pos_shape[1])  # (B, 1, L): broadcast over heads
    try:
        ok = np.broadcast_shapes(shape, x_shape[:-1]) == x_shape[:-1]
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{name} of shape {pos_shape} do not broadcast to x.shape[:-1] = "
            f"{x_shape[:-1]} without enlarging x of shape {x_shape} (expected (L,) or (B, L), "
            "a 2-D array being read as (B, L) with a 4-D x)"
        )
    return shape


def check_fits_positions(n: int, max_seq_len, positional, what: str, hint: str = "") -> None:
    """``n`` tokens fit a model's table of positions: ``n <= max_seq_len``.

    Only learned and sinusoidal positions have a table; RoPE and no positions (or a model
    without ``max_seq_len``) have no such limit, and pass.

    Args:
        n: the tokens needed (for a 0-based position ``p``: ``p + 1``).
        max_seq_len: the model's table size, or ``None``.
        positional: the model's ``config.positional`` (``"learned"``, ``"sinusoidal"``, ...).
        what: the tokens in words, e.g. ``"block_size 17"`` or ``"position 64"``.
        hint: appended to the message.

    Raises:
        ValueError: ``n > max_seq_len`` with learned or sinusoidal positions.
    """
    if positional in ("learned", "sinusoidal") and max_seq_len is not None and n > max_seq_len:
        raise ValueError(
            f"{what} exceeds the model's max_seq_len {max_seq_len} ({positional} positions){hint}"
        )


def check_generation(model, ids, max_new_tokens):
    """The arguments of a decoding loop: a decoder-only model, a prompt and a token count.

    Shared by :func:`attnbook.sampling.generate` and :func:`attnbook.kv_cache.greedy_generate`,
    so both refuse the same inputs with the same messages.

    Args:
        model: a ``torch.nn.Module`` with a ``config`` (``vocab_size``, ``max_seq_len``,
            ``positional``) and ``make_caches()``, e.g. :class:`attnbook.models.DecoderOnlyModel`.
        ids: ``(B, T)`` prompt token ids, ``T >= 1``, in ``[0, vocab_size)`` (a tensor on the
            model's device, or an array or nested list of integers, moved there).
        max_new_tokens: tokens to append, an integer ``>= 0``.

    Returns:
        ``(ids, max_new_tokens)``: ``ids`` as a ``(B, T)`` int64 tensor on the model's
        device, ``max_new_tokens`` as an ``int``.

    Raises:
        TypeError: ``model`` is not such a module (an encoder-decoder model has no
            ``make_caches()``), ``ids`` is not integer, ``max_new_tokens`` is not an integer.
        ValueError: ``ids`` is not ``(B, T)`` with ``T >= 1`` and ids in range;
            ``max_new_tokens < 0``; or ``T + max_new_tokens`` exceeds ``max_seq_len`` with learned
            or sinusoidal positions.
    """
    import torch  # the NumPy checks above do not need it

    if (
        not isinstance(model, torch.nn.Module)
        or not hasattr(model, "config")
        or not callable(getattr(model, "make_caches", None))
    ):
        raise TypeError(
            f"model must be a decoder-only model (a torch.nn.Module with a config "
            f"and make_caches(), e.g. DecoderOnlyModel), got "
            f"{type(model).__name__}"
        )
    cfg = model.config
    param = next(model.parameters(), None)  # lists and arrays go to the model's device
    device = None if param is None else param.device
    on = device if isinstance(ids, torch.Tensor) else None  # a tensor must be there already
    ids = check_token_ids(ids, "ids", cfg.vocab_size, min_len=1, device=on)
    ids = ids.to(device=device, dtype=torch.int64)  # (B, T)
    max_new_tokens = check_int(max_new_tokens, "max_new_tokens", 0)
    total = ids.shape[1] + max_new_tokens
    check_fits_positions(
        total,
        getattr(cfg, "max_seq_len", None),
        getattr(cfg, "positional", None),
        f"prompt of {ids.shape[1]} + max_new_tokens {max_new_tokens} = {total} tokens",
        "; RoPE positions have no such limit",
    )
    return ids, max_new_tokens


def check_features(
    x, name: str, size: int, *, ndim: int | None = None, size_name: str = "features"
):
    """A floating-point tensor with ``size`` entries in its last dimension (of rank ``ndim``).

    Args:
        x: the tensor.
        name: its name in messages.
        size: the expected last dimension (e.g. a layer's ``input_size``).
        ndim: the expected rank, or ``None`` for any rank >= 1.
        size_name: what ``size`` is called in messages.

    Raises:
        TypeError: ``x`` is not a floating-point tensor.
        ValueError: it has the wrong rank or last dimension.
    """
    check_tensor(x, name, ndim=ndim)
    if x.dim() == 0 or x.shape[-1] != size:
        raise ValueError(
            f"{name} must have {size_name}={size} entries in its last dimension; "
            f"got shape {tuple(x.shape)}"
        )
    return x


def check_token_ids(
    ids,
    name: str = "ids",
    vocab_size: int | None = None,
    *,
    min_len: int = 0,
    device=None,
):
    """``(B, T)`` integer token ids as a torch tensor (lists and NumPy arrays are converted).

    Args:
        ids: the ids.
        name: their name in messages.
        vocab_size: if given, every id must be below it.
        min_len: fewest tokens per sequence ``T`` accepted (a prompt needs one).
        device: if given, the model's device: a tensor must already be on it (the model
            does not move its input), a list or array is created there.

    Returns:
        The ids, a ``(B, T)`` integer tensor.

    Raises:
        TypeError: the ids are not integers (floats and bools refused).
        ValueError: not 2-D, ``T < min_len``, an id outside ``[0, vocab_size)`` (``>= 0``
            if no ``vocab_size`` is given), or a tensor on another device than ``device``.
    """
    import torch

    if device is not None:
        device = torch.device(device)
        if isinstance(ids, torch.Tensor) and ids.device != device:
            raise ValueError(
                f"{name} must be on the model's device {device}; got a tensor on "
                f"{ids.device} (move it with {name}.to({str(device)!r}))"
            )
    ids = check_int_tensor(ids, name, None)
    if device is not None:
        ids = ids.to(device)  # lists and arrays come as CPU tensors
    if ids.ndim != 2:
        raise ValueError(
            f"{name} must be (B, T) token ids; got shape {tuple(ids.shape)} "
            "(add a batch axis with ids[None])"
        )
    if ids.shape[1] < min_len:
        raise ValueError(f"{name} must be (B, T) with T >= {min_len}; got shape {tuple(ids.shape)}")
    top = math.inf if vocab_size is None else vocab_size
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= top):
        raise ValueError(
            f"{name} must lie in [0, vocab_size={vocab_size}); got values from "
            f"{int(ids.min())} to {int(ids.max())}"
        )
    return ids


def check_head_counts(n_heads: int, n_kv_heads: int, detail: str = "") -> None:
    """``n_heads`` query heads served by ``n_kv_heads`` key/value heads (MHA, GQA, MQA).

    Args:
        n_heads: the number of query heads ``H``.
        n_kv_heads: the number of key/value heads ``H_kv``.
        detail: appended to the message, e.g. the shapes the counts come from.

    Raises:
        ValueError: ``n_heads < 1``, or ``n_kv_heads`` is < 1 or does not divide ``n_heads``.
    """
    if n_heads < 1:
        raise ValueError(f"q has {n_heads} heads{detail}; need at least one query head")
    if n_kv_heads < 1 or n_heads % n_kv_heads:
        raise ValueError(f"n_kv_heads {n_kv_heads} must divide n_heads {n_heads}{detail}")


def check_dropout(p, name: str = "dropout_p") -> float:
    """A dropout probability in ``[0, 1)`` (``p = 1`` would drop everything).

    Raises:
        TypeError: ``p`` is not a real number.
        ValueError: it is nan or outside ``[0, 1)``.
    """
    p = check_real(p, name)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {p}")
    return p


def check_kv_cache(kv_cache, name: str = "kv_cache"):
    """``None`` or a KV cache: an object with ``seq_len`` and ``update`` (attnbook.kv_cache).

    Raises:
        TypeError: it lacks either attribute.
    """
    if kv_cache is not None and not (
        hasattr(kv_cache, "seq_len") and callable(getattr(kv_cache, "update", None))
    ):
        raise TypeError(
            f"{name} must be None or a cache with seq_len and update() (e.g. "
            f"attnbook.kv_cache.KVCache), got {type(kv_cache).__name__}"
        )
    return kv_cache


def check_kv_caches(kv_caches, n_layers: int, what: str = "layer", name: str = "kv_caches"):
    """``None`` or a model's caches: one per layer (each as :func:`check_kv_cache` checks it).

    Args:
        kv_caches: ``None`` or a sequence of caches.
        n_layers: the number of layers that each read one.
        what: the layers' name in the message (``"decoder layer"``).
        name: the argument's name.

    Raises:
        TypeError: ``kv_caches`` is not a list or tuple, or an entry is not a cache.
        ValueError: it holds another number of caches than ``n_layers``, an entry is
            ``None`` (that layer would not cache while the others do), or the caches hold
            different numbers of tokens (``seq_len``): the positions of the new tokens are
            read from the first.
    """
    if kv_caches is None:
        return None
    if not isinstance(kv_caches, (list, tuple)):
        raise TypeError(
            f"{name} must be a list of caches, one per {what}, got {type(kv_caches).__name__}"
        )
    if len(kv_caches) != n_layers:
        raise ValueError(
            f"{name} must hold one cache per {what}: need {n_layers}, got {len(kv_caches)}"
        )
    for i, cache in enumerate(kv_caches):
        if cache is None:
            raise ValueError(
                f"{name}[{i}] is None: pass a cache for every {what} (e.g. "
                f"model.make_caches()), or {name}=None for no cache"
            )
        check_kv_cache(cache, f"{name}[{i}]")
    first = int(kv_caches[0].seq_len) if kv_caches else 0
    for i, cache in enumerate(kv_caches):
        if int(cache.seq_len) != first:
            raise ValueError(
                f"{name}[{i}] holds {int(cache.seq_len)} tokens but {name}[0] holds {first}: "
                f"every {what}'s cache must hold the same tokens"
            )
    return kv_caches


def check_window(window, causal: bool, name: str = "window"):
    """A sliding-window size (``None`` for none): an integer >= 1 that comes with ``causal``.

    Returns:
        ``None`` or the window as an ``int``.

    Raises:
        TypeError: ``window`` is not an integer.
        ValueError: it is < 1, or ``causal`` is false (a sliding window is causal here).
    """
    if window is None:
        return None
    window = check_int(window, name, 1)
    if not causal:
        raise ValueError(
            f"{name}={window} requires causal=True: a sliding window hides the keys more than "
            f"{name} - 1 positions in the past and, being causal, every future key"
        )
    return window


def check_qkv_tensors(q, k, v, *, same_value_dim: bool = True, finite: bool = True):
    """Torch attention inputs ``q (B, H, L, D)``, ``k (B, H_kv, S, D)``, ``v (B, H_kv, S, Dv)``.

    The one check of torch attention's inputs: :func:`attnbook.flash.flash_attention` and the
    Triton kernels use the defaults (``Dv == D``, finite values: an online softmax would turn
    a nan row into a silent 0); :func:`attnbook.layers.scaled_dot_product_attention` passes
    ``same_value_dim=False, finite=False`` (values of another width; an additive ``-inf`` is
    its business, a nan propagates).

    Args:
        q: queries ``(B, H, L, D)``.
        k: keys ``(B, H_kv, S, D)``.
        v: values ``(B, H_kv, S, Dv)``.
        same_value_dim: require ``v`` to have the shape of ``k`` (else only ``B, H_kv, S``).
        finite: refuse a nan or inf entry.

    Returns:
        ``(q, k, v)`` unchanged.

    Raises:
        TypeError: an input is not a floating-point tensor, or the dtypes differ.
        ValueError: a rank other than 4, devices, batch or head_dim that differ, ``k`` and
            ``v`` that disagree (on their whole shape, or on ``B, H_kv, S``), no query head,
            ``H_kv`` not dividing ``H``, or (if ``finite``) a nan/inf entry.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_ndim(check_tensor(t, name), name, "(B, H, seq, head_dim)")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k and v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k and v must be on one device; got {q.device}, {k.device}, {v.device}"
        )
    if same_value_dim and k.shape != v.shape:
        raise ValueError(
            f"k and v must have the same shape (B, H_kv, S, D); got k "
            f"{tuple(k.shape)} and v {tuple(v.shape)}"
        )
    if k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"k and v must agree on (B, H_kv, S); got k {tuple(k.shape)} and v {tuple(v.shape)}"
        )
    (B, H, _, D), (B_k, H_kv, _, D_k) = q.shape, k.shape
    shapes = f" (q {tuple(q.shape)}, k {tuple(k.shape)})"
    if B_k != B:
        raise ValueError(f"q has batch {B} but k has {B_k}{shapes}")
    if D_k != D:
        raise ValueError(f"q has head_dim {D} but k has {D_k}{shapes}")
    check_head_counts(H, H_kv, shapes)
    if finite:
        for name, t in (("q", q), ("k", k), ("v", v)):
            if t.numel():
                check_finite(t, name)
    return q, k, v


def check_mask(mask, name: str = "mask", target_shape=None, *, device=None):
    """An attention mask, NumPy or torch: a boolean keep-mask or an additive float mask.

    A float mask is added to the scores (as in torch), so it may hold ``-inf`` (hidden) but
    not nan or ``+inf``.

    Args:
        mask: the mask (array, tensor or nested list).
        name: its name in messages.
        target_shape: if given, the scores' shape ``(..., L, S)`` it must broadcast to.
        device: if given, the mask comes back as a torch tensor on this device.

    Returns:
        The mask as a torch tensor if it is one (or ``device`` is given), else as a NumPy
        array.

    Raises:
        TypeError: ``mask`` is neither boolean nor floating.
        ValueError: an additive mask holds nan or ``+inf``, or the mask does not broadcast
            to ``target_shape``.
    """
    if type(mask).__module__ == "torch" or device is not None:
        import torch

        if not isinstance(mask, torch.Tensor):
            mask = as_array(mask, name)
            if mask.dtype.kind not in "biuf":  # strings, objects: torch would say "new()"
                raise TypeError(
                    f"{name} must be a boolean keep-mask or an additive float mask; got "
                    f"dtype {mask.dtype} (shape {mask.shape})"
                )
        mask = torch.as_tensor(mask, device=device)
        floating = mask.is_floating_point()
    else:
        mask = as_array(mask, name)
        floating = np.issubdtype(mask.dtype, np.floating)
    if not floating and str(mask.dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"{name} must be a boolean keep-mask or an additive float mask; got "
            f"dtype {mask.dtype} (shape {tuple(mask.shape)})"
        )
    if floating:
        check_no_nan_or_posinf(
            mask, f"additive {name}", " (hide keys with -inf, finfo.min or a keep-mask)"
        )
    if target_shape is not None:
        check_broadcast(mask, name, target_shape)
    return mask


def check_module_input(
    x,
    weight,
    d_model: int,
    name: str = "x",
    *,
    batch: int | None = None,
    seq: str = "L",
    detail: str = "",
):
    """A torch module's ``(B, L, d_model)`` input: a floating tensor in its parameters' dtype.

    Args:
        x: the input.
        weight: a parameter of the module (its dtype is the one ``x`` must have).
        d_model: the module's width, the last dimension of ``x``.
        name: the argument's name in messages.
        batch: if given, the batch size ``x`` must have (a cross-attention context has the
            queries' batch).
        seq: the name of the sequence axis in messages (``L``, or ``S`` for keys).
        detail: appended to the shape message (e.g. the queries' shape).

    Raises:
        TypeError: ``x`` is not a floating tensor of the dtype of ``weight``.
        ValueError: ``x`` is not 3-D, its last dimension is not ``d_model`` or its batch is
            not ``batch``.
    """
    check_input_dtype(x, weight, name)
    if x.ndim != 3 or x.shape[-1] != d_model or (batch is not None and x.shape[0] != batch):
        b = "B" if batch is None else f"B={batch}"
        raise ValueError(
            f"{name} must be ({b}, {seq}, d_model={d_model}); got shape {tuple(x.shape)}{detail}"
        )
    return x

"""The input of every norm of a model, computed by hand (for chapter 9's record of it).

Shared by tests/test_experiments.py (``norm_placement_run``'s step 0) and
tests/chapters/expected_ch09.py (the chapter's glued RMS values).
"""

from __future__ import annotations

import torch


def norm_inputs(model, ids) -> list:
    """The input of every norm in one forward pass, the block written out by hand.

    The block's forward (``blocks.TransformerBlock``) step by step: Post-LN normalises
    ``x + F(x)``, Pre-LN reads the residual stream ``x``; a Pre-LN model ends in a final norm.
    Returns ``[layer 0 norm1, layer 0 norm2, ..., (final)]`` as float64 ``(B, T, d)`` tensors.
    """
    out = []
    with torch.no_grad():
        x = model.embed(ids, torch.arange(ids.shape[1]))
        for layer in model.layers:
            a = layer.self_attn
            if layer.norm_first:  # Pre-LN: the norm reads the residual stream
                out.append(x)
                x = x + a(layer.norm1(x), causal=True)
                out.append(x)
                x = x + layer.ffn(layer.norm2(x))
            else:  # Post-LN: the norm reads x + F(x)
                h = x + a(x, causal=True)
                out.append(h)
                x = layer.norm1(h)
                h = x + layer.ffn(x)
                out.append(h)
                x = layer.norm2(h)
        if model.norm is not None:
            out.append(x)
    return [h.detach().double() for h in out]


def norm_input_rms(model, ids) -> list:
    """Centred RMS of every norm's input (:func:`norm_inputs`), as floats in its order."""
    return [
        float((h - h.mean(-1, keepdim=True)).pow(2).mean().sqrt()) for h in norm_inputs(model, ids)
    ]

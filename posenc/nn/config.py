"""The PyTorch side of :mod:`posenc.config`: a layer's rotary module, and the query multipliers in torch.

:func:`rotary_embedding` builds :class:`~posenc.nn.RotaryEmbedding` (one position axis) or
:class:`~posenc.nn.MultiAxisRotaryEmbedding` (M-RoPE, axial) from a :class:`posenc.LayerRotary`, the row of a
:class:`posenc.RotaryPlan`; :func:`query_scale` is :func:`posenc.query_scale` in torch, for forward paths.
"""

from __future__ import annotations

from typing import Literal

import torch

from posenc._validation import check_choice, check_int
from posenc.config import LayerRotary, QueryScaling
from posenc.nn.multiaxis import MultiAxisRotaryEmbedding
from posenc.nn.rotary import RotaryEmbedding

__all__ = ["query_scale", "rotary_embedding"]


def rotary_embedding(
    layer: LayerRotary, *, seq_dim: int = -2, dynamic_length: Literal["call", "longest"] = "call"
) -> RotaryEmbedding | MultiAxisRotaryEmbedding:
    r"""The module that rotates the queries and keys of one layer kind of a :class:`posenc.RotaryPlan`.

    Parameters
    ----------
    layer : LayerRotary
        A rotating layer kind: ``plan.layers[i]`` or one of ``plan.kinds``.
    seq_dim : int, default -2
        As in :class:`posenc.nn.RotaryEmbedding` (one axis only; a multi-axis module takes ``(..., seq,
        head_dim)``).
    dynamic_length : {"call", "longest"}, default "call"
        As in :class:`posenc.nn.RotaryEmbedding`: ``"longest"`` reproduces transformers' ``"dynamic"`` scaling
        call after call.

    Returns
    -------
    module : RotaryEmbedding or MultiAxisRotaryEmbedding
        It rotates ``x[..., layer.rotary_offset:]``: the whole head of width ``layer.head_dim`` when the rotated
        features are the first ones (rotating ``layer.rotary_dim`` of them, the others passed through), or the
        ``layer.rotary_dim`` rotated features alone when they are the last ones (multi-head latent attention's
        ``q_pe`` and ``k_pe``, DeepSeek-V4's tail). One axis: a :class:`~posenc.nn.RotaryEmbedding` with the
        layer's base, layout and scaling (its attention factor included), called with an ``offset`` or
        ``positions``; several: a :class:`~posenc.nn.MultiAxisRotaryEmbedding` of ``layer.frequencies()``,
        called with ``(..., seq, n_axes)`` coordinates in the order of ``layer.axes``.

    Raises
    ------
    TypeError
        If ``layer`` is not a :class:`posenc.LayerRotary`.
    ValueError
        If the layer does not rotate (NoPE), or as the modules' constructors.

    Examples
    --------
    >>> import posenc
    >>> gemma3 = {"model_type": "gemma3_text", "hidden_size": 64, "head_dim": 16, "num_attention_heads": 4,
    ...           "num_hidden_layers": 2, "layer_types": ["sliding_attention", "full_attention"],
    ...           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    ...                               "full_attention": {"rope_type": "linear", "factor": 8.0,
    ...                                                  "rope_theta": 1000000.0}}}
    >>> plan = posenc.RotaryPlan.from_config(gemma3)
    >>> [rotary_embedding(kind).base for kind in plan.kinds]
    [10000.0, 1000000.0]
    """
    if not isinstance(layer, LayerRotary):
        raise TypeError(f"layer must be a posenc.LayerRotary, got {type(layer).__name__}")
    if not layer.rotates:
        raise ValueError(f"layer type {layer.layer_type!r} does not rotate (NoPE): it has no rotary module")
    dynamic_length = check_choice(dynamic_length, "dynamic_length", ("call", "longest"))
    width = layer.head_dim - layer.rotary_offset
    if layer.feature_order:
        raise ValueError(
            f"layer type {layer.layer_type!r} reads its features in the order layer.feature_order: permute the query "
            "and key projections' rows once (as posenc.rotary_weight_permutation does for layouts) and build the "
            "module from dataclasses.replace(layer, feature_order=())"
        )
    if layer.n_axes > 1:
        return MultiAxisRotaryEmbedding(layer.frequencies(), layout=layer.layout)
    seq_dim = check_int(seq_dim, "seq_dim", minimum=-16, maximum=15)
    return RotaryEmbedding(
        width,
        base=layer.base,
        layout=layer.layout,
        scaling=layer.scaling,
        seq_dim=seq_dim,
        rotary_dim=layer.rotary_dim if layer.rotary_dim != width else None,
        dynamic_length=dynamic_length,
    )


def query_scale(positions: torch.Tensor, scaling: QueryScaling, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    r"""The query multiplier of :class:`posenc.QueryScaling` at ``positions``, in torch (no host reads).

    Parameters
    ----------
    positions : tensor of int or float
        Positions :math:`p \ge 0`, any shape (``position_ids``, ``(batch, seq)``; for Llama 4's
        ``"llama4_temperature"`` the cache positions ``arange(seq) + past_seen_tokens``, see
        :func:`posenc.query_scale`); their values are not checked (a forward path reads nothing on the host).
    scaling : QueryScaling
        The multiplier (``LayerRotary.query_scaling``).
    dtype : torch.dtype, default torch.float32
        The dtype of the result; the formula is evaluated in float64 on the positions' device and rounded once.

    Returns
    -------
    factors : tensor
        The shape and device of ``positions``: :func:`posenc.query_scale`. Multiply the queries by
        ``factors[:, None, :, None]`` for ``(batch, heads, seq, head_dim)`` queries.

    Raises
    ------
    TypeError
        If ``positions`` is not a tensor or ``scaling`` not a :class:`posenc.QueryScaling`.
    ValueError
        If ``scaling.kind`` is ``"learned_log"`` (Mistral Large 4's multipliers are weights, not config).

    Examples
    --------
    >>> import posenc
    >>> beta = posenc.QueryScaling("llama4_beta", 0.1, 16384.0)
    >>> query_scale(torch.tensor([[0, 16384, 49152]]), beta)
    tensor([[1.0000, 1.0693, 1.1386]])
    """
    if not isinstance(positions, torch.Tensor) or positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be a real torch.Tensor, got {getattr(positions, 'dtype', type(positions))}")
    if not isinstance(scaling, QueryScaling):
        raise TypeError(f"scaling must be a posenc.QueryScaling, got {type(scaling).__name__}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    scale, length = scaling.formula_values()
    p = positions.to(torch.float64)
    if scaling.kind == "llama4_temperature":
        factors = 1.0 + scale * torch.log1p(torch.floor((p + 1.0) / length))
    elif scaling.kind == "llama4_beta":
        factors = 1.0 + scale * torch.log1p(torch.floor(p / length))
    else:  # scalable_softmax
        factors = torch.exp(scale * torch.log1p((p + 1.0) / length))
    return factors.to(dtype)

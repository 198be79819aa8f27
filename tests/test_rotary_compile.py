"""posenc.nn.RotaryEmbedding under torch.compile and torch.export: one graph, float64 angles.

A tiny attention layer (q, k, v projections, rotary on q and k, scaled_dot_product_attention) is compiled with
``fullgraph=True`` and exported with a dynamic sequence length, and must agree with the eager module. Compiles
are counted with ``torch._dynamo.testing.CompileCounter`` (a backend that counts the graphs it is handed and runs
them eagerly): decoding at a new offset each step must not compile again. The precision promise is checked
inside the compiled graph, against the float64 NumPy reference. Backends are "eager"/"aot_eager" (what is
tested is the tracing, not inductor's code generation; inductor itself raises a DeprecationWarning of torch's own
code under this project's filterwarnings = error).

Tolerances: eager and compiled compute the same float64 angles and round them to float32 once, then differ at
most in the order of a few float32 operations per feature (the compiled interleaved layout multiplies in real
arithmetic, the eager one as complex numbers): 8 float32 roundings of values of size <= 4 (a few features
through a random projection).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch._dynamo.testing
from torch import nn

from posenc import rotate
from posenc.nn import RotaryEmbedding

EPS32 = 2.0**-24
LAYOUTS = ("interleaved", "halves")
HEADS, HEAD_DIM = 2, 8


class TinyAttention(nn.Module):
    """(batch, seq, heads * head_dim) -> same: causal self-attention with posenc's rotary on q and k."""

    def __init__(self, layout: str, **rotary) -> None:
        super().__init__()
        torch.manual_seed(0)
        width = HEADS * HEAD_DIM
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.rope = RotaryEmbedding(HEAD_DIM, layout=layout, **rotary)

    def forward(self, x, offset=0, positions=None):
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        if positions is None:
            q, k = self.rope.rotate_pair(q, k, offset=offset)
        else:
            q, k = self.rope(q, positions=positions), self.rope(k, positions=positions)
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return out.transpose(1, 2).reshape(batch, seq, -1)


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def inputs(seed, shape, dtype=torch.float32):
    return torch.from_numpy(np.random.default_rng(seed).uniform(-1.0, 1.0, size=shape)).to(dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_model_compiles_with_fullgraph_and_agrees_with_eager(layout):
    model = TinyAttention(layout, rotary_dim=6 if layout == "halves" else None)
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x = inputs(1, (2, 5, HEADS * HEAD_DIM))
    position_ids = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])  # a left-padded row and a full one
    with torch.no_grad():
        for kwargs in ({}, {"offset": 7}, {"offset": torch.tensor(9)}, {"positions": position_ids}):
            torch.testing.assert_close(compiled(x, **kwargs), model(x, **kwargs), rtol=0, atol=32 * EPS32)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("offset_kind", ["tensor", "int"])
def test_decoding_at_new_offsets_does_not_recompile(layout, offset_kind):
    """Eight decode steps, each at a new position: one graph. A 0-d tensor offset (a static cache's
    cache_position) is a graph input; an int offset is one with dynamic=True (without it, Dynamo compiles a
    second, dynamic graph when the int first changes, and none after: checked too)."""
    model = TinyAttention(layout)
    counter = torch._dynamo.testing.CompileCounter()
    dynamic = offset_kind == "int"
    compiled = torch.compile(model, backend=counter, fullgraph=True, dynamic=dynamic or None)
    token = inputs(2, (1, 1, HEADS * HEAD_DIM))
    with torch.no_grad():
        for step in range(8):
            offset = torch.tensor(10 + step) if offset_kind == "tensor" else 10 + step
            torch.testing.assert_close(
                compiled(token, offset=offset), model(token, offset=offset), rtol=0, atol=32 * EPS32
            )
    assert counter.frame_count == 1
    if offset_kind == "int":
        torch._dynamo.reset()
        counter = torch._dynamo.testing.CompileCounter()
        automatic = torch.compile(model, backend=counter, fullgraph=True)
        with torch.no_grad():
            for step in range(8):
                automatic(token, offset=10 + step)
        assert counter.frame_count == 2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_export_with_a_dynamic_sequence_length(layout):
    model = TinyAttention(layout).eval()
    seq = torch.export.Dim("seq", min=2, max=64)
    example = (inputs(3, (1, 6, HEADS * HEAD_DIM)), torch.tensor(3))
    exported = torch.export.export(model, example, dynamic_shapes=({1: seq}, None))
    program = exported.module()
    with torch.no_grad():
        for length, offset in ((2, 0), (6, 3), (33, 100), (64, 2**20)):
            x = inputs(length, (1, length, HEADS * HEAD_DIM))
            torch.testing.assert_close(
                program(x, torch.tensor(offset)), model(x, offset=offset), rtol=0, atol=32 * EPS32
            )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_float32_stays_within_1e6_of_float64_up_to_2_20(layout):
    """The precision promise inside the graph: float64 angles there too (float32 angles are off by ~1e-2)."""
    rope = RotaryEmbedding(64, layout=layout)
    compiled = torch.compile(rope, backend="aot_eager", fullgraph=True)
    x = inputs(4, (1, 2, 256, 64), torch.float64)
    offset = 2**20 - 256
    expected = rotate(x.numpy(), np.arange(offset, 2**20), layout=layout)
    out = compiled(x.float(), offset=torch.tensor(offset))
    assert np.abs(out.double().numpy() - expected).max() <= 1e-6


@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_bfloat16_is_one_rounding_from_exact(layout):
    rope = RotaryEmbedding(64, layout=layout)
    compiled = torch.compile(rope, backend="aot_eager", fullgraph=True)
    x = inputs(5, (2, 2, 128, 64), torch.bfloat16)
    exact = rotate(x.double().numpy(), np.arange(1000, 1128), layout=layout)
    out = compiled(x, offset=torch.tensor(1000)).double().numpy()
    assert np.all(np.abs(out - exact) <= 2.0**-8 * np.abs(exact) + 2e-6)

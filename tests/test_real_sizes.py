"""posenc.nn at the sizes of real models: exported with a dynamic sequence length, and compiled with fullgraph.

The sizes are Llama 3 8B's attention (32 query heads and 8 key/value heads of 128, ``rope_theta`` 500000) at
lengths past 4096, Qwen2-VL's M-RoPE sections (16, 24, 24) of a 128-wide head, absolute encodings of width 1024,
32-head ALiBi and T5 biases, and Shaw et al.'s base model (width 512, 8 heads). ``torch.export`` must accept a
sequence length anywhere in ``[2, 2**17]`` (a size test on a symbolic length once bounded it at 1024 tokens in the
halves layout: issue 27), and every module must compile into one graph (``fullgraph=True``) that agrees with its
eager call. The backend is ``aot_eager``: what is tested is the tracing, as in tests/test_rotary_compile.py (``make
check-gpu`` compiles with inductor on CUDA).

Tolerance: the compiled rotation computes the same float64 angles and rounds them once, like the eager one, and
then differs at most in the order of a few float32 operations per feature: 8 float32 roundings of the largest
value rotated (standard normal entries, below 6 here).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn

import posenc
from posenc.nn import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    MultiAxisRotaryEmbedding,
    RotaryEmbedding,
    ShawRelativeAttention,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    causal_mask_mod,
)

Q_HEADS, KV_HEADS, HEAD_DIM, THETA = 32, 8, 128, 500000.0
LONG = 4100
"""A prefill length past 4096."""
LAYOUTS = ("interleaved", "halves")
TOLERANCE = dict(rtol=0.0, atol=8 * 2.0**-24 * 8)


def _normal(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class LlamaRotary(nn.Module):
    """Queries and keys of one Llama 3 8B attention layer, rotated at transformers' position_ids or an offset."""

    def __init__(self, layout: str) -> None:
        super().__init__()
        self.rope = RotaryEmbedding(HEAD_DIM, layout=layout, base=THETA)

    def forward(self, q: torch.Tensor, k: torch.Tensor, where: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if where.ndim == 0:
            return self.rope.rotate_pair(q, k, offset=where)
        return self.rope.rotate_pair(q, k, positions=where)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("by", ["position_ids", "tensor offset"])
def test_export_with_a_dynamic_length_at_llama_sizes(layout, by):
    model = LlamaRotary(layout).eval()
    seq = torch.export.Dim("seq", min=2, max=2**17)
    example = (_normal(1, Q_HEADS, 64, HEAD_DIM), _normal(1, KV_HEADS, 64, HEAD_DIM, seed=1))
    if by == "position_ids":
        where, dynamic = torch.arange(64)[None], {1: seq}
    else:
        where, dynamic = torch.tensor(100), None
    exported = torch.export.export(model, (*example, where), dynamic_shapes=({2: seq}, {2: seq}, dynamic))
    program = exported.module()
    with torch.no_grad():
        for length in (3, LONG):  # one program for a short and a long sequence
            q, k = _normal(1, Q_HEADS, length, HEAD_DIM, seed=2), _normal(1, KV_HEADS, length, HEAD_DIM, seed=3)
            where = torch.arange(length)[None] if by == "position_ids" else torch.tensor(7 * length)
            for got, want in zip(program(q, k, where), model(q, k, where)):
                torch.testing.assert_close(got, want, **TOLERANCE)


def _cases() -> dict[str, tuple]:
    """``{name: (call, inputs)}``: one forward path of each module at a real model's size."""
    cases = {}
    q, k = _normal(1, Q_HEADS, LONG, HEAD_DIM), _normal(1, KV_HEADS, LONG, HEAD_DIM, seed=1)
    for layout in LAYOUTS:
        rope = RotaryEmbedding(HEAD_DIM, layout=layout, base=THETA)
        cases[f"rotary {layout}, prefill at position_ids"] = (
            lambda q, k, positions, rope=rope: rope.rotate_pair(q, k, positions=positions),
            (q, k, torch.arange(LONG)[None]),
        )
        cases[f"rotary {layout}, decode step at a tensor offset"] = (
            lambda q, k, offset, rope=rope: rope.rotate_pair(q, k, offset=offset),
            (q[:, :, :1], k[:, :, :1], torch.tensor(LONG)),
        )
    mrope = MultiAxisRotaryEmbedding(posenc.mrope_frequencies(HEAD_DIM, (16, 24, 24), base=1e6), layout="halves")
    coordinates = torch.randint(0, 64, (1, 1, LONG, 3), generator=torch.Generator().manual_seed(4))
    cases["multiaxis, M-RoPE"] = (lambda x, positions: mrope(x, positions), (q, coordinates))
    sinusoid, learned = SinusoidalPositionalEncoding(1024), LearnedPositionalEmbedding(8192, 1024)
    embeddings = _normal(1, LONG, 1024, seed=5)
    cases["sinusoid, past its cached table"] = (lambda x: sinusoid(x), (embeddings,))
    cases["learned, position_ids"] = (
        lambda x, positions: learned(x, positions=positions),
        (embeddings, torch.arange(LONG)[None]),
    )
    alibi, t5 = ALiBiBias(Q_HEADS), T5RelativeBias(Q_HEADS)
    index = (
        torch.zeros((), dtype=torch.int32),
        torch.arange(Q_HEADS, dtype=torch.int32)[:, None, None],
        torch.arange(1, dtype=torch.int32)[:, None],
        torch.arange(LONG + 1, dtype=torch.int32),
    )
    cases["alibi, decode step at a tensor offset"] = (
        lambda offset: alibi(1, LONG + 1, offset=offset),
        (torch.tensor(LONG),),
    )
    cases["alibi, score_mod"] = (
        lambda offset, *index: alibi.score_mod(offset=offset)(torch.zeros(()), *index),
        (torch.tensor(LONG), *index),
    )
    cases["t5, decode step at a tensor offset"] = (lambda offset: t5(1, LONG + 1, offset=offset), (torch.tensor(LONG),))
    cases["t5, score_mod"] = (
        lambda offset, *index: t5.score_mod(offset=offset)(torch.zeros(()), *index),
        (torch.tensor(LONG), *index),
    )
    cases["causal_mask_mod"] = (lambda offset, *index: causal_mask_mod(offset)(*index), (torch.tensor(LONG), *index))
    shaw = ShawRelativeAttention(512, 8, max_distance=16, causal=True)
    cases["shaw, base model"] = (lambda x: shaw(x), (_normal(1, 1024, 512, seed=6),))
    return cases


CASES = _cases()


@pytest.mark.parametrize("name", CASES)
def test_every_module_compiles_to_one_graph_at_real_sizes(name):
    call, inputs = CASES[name]
    compiled = torch.compile(call, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        got, want = compiled(*inputs), call(*inputs)
    for got_tensor, want_tensor in zip(
        got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
    ):
        if got_tensor.is_floating_point():
            torch.testing.assert_close(got_tensor, want_tensor, **TOLERANCE)
        else:
            assert torch.equal(got_tensor, want_tensor)

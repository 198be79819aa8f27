"""No forward path of posenc.nn reads a tensor's values on the host, eager or compiled.

On an accelerator, ``offset.item()``, ``positions.cpu().numpy()`` or a slice by a tensor offset each copy values
to the host and wait for the device: once per call, in every attention layer, at every decoding step. Every
public module of :mod:`posenc.nn`, each ``score_mod`` (and ``causal_mask_mod``) is called here the way models
call them, with tensor offsets (a static cache's ``cache_position``) and tensor positions (transformers'
``position_ids``, M-RoPE coordinates), under :func:`posenc_book.host_reads.forbid_host_reads` (which refuses the
Python-level reads and the ATen operators that read or wait for values), and compiled with ``fullgraph=True``
by a backend that refuses the same operators in the graphs (:func:`posenc_book.host_reads.host_read_backend`).
The inputs are on the CPU, where such a read costs little, but the calls are the ones a GPU runs:
``make check-gpu`` repeats the eager ones on CUDA under ``torch.cuda.set_sync_debug_mode("error")``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch._dynamo

import posenc
from posenc.nn import (
    ALiBiBias,
    AttentionSink,
    CoPE,
    ForgettingGate,
    LearnedPositionalEmbedding,
    MultiAxisRotaryEmbedding,
    PaTHGate,
    RotaryEmbedding,
    ShawRelativeAttention,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
    causal_mask_mod,
    forgetting_bias,
    forgetting_score_mod,
    path_logits,
    stick_breaking_attention,
)
from posenc_book.host_reads import HostRead, forbid_host_reads, host_read_backend


@dataclass
class Case:
    """``call(*inputs())``: one forward path, with the tensors a model would pass it."""

    call: Callable[..., object]
    inputs: Callable[[], tuple[torch.Tensor, ...]]


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _position_ids() -> torch.Tensor:
    """transformers' position_ids of a left-padded batch of two: (batch, seq)."""
    return torch.tensor([[0, 0, 0, 1, 2, 3], [0, 1, 2, 3, 4, 5]])


def _indices(n_heads: int, q_len: int, k_len: int) -> tuple[torch.Tensor, ...]:
    """FlexAttention's (batch, head, q_idx, kv_idx) as broadcast int32 tensors."""
    return (
        torch.zeros((), dtype=torch.int32),
        torch.arange(n_heads, dtype=torch.int32)[:, None, None],
        torch.arange(q_len, dtype=torch.int32)[:, None],
        torch.arange(k_len, dtype=torch.int32),
    )


_LLAMA3 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}
_DYNAMIC = {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4}
_LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 4,
    "long_factor": [2.0] * 4,
    "factor": 4.0,
    "original_max_position_embeddings": 4,
}
_SEQ = 6


def _rotary_cases() -> dict[str, Case]:
    cases = {}
    for layout in ("interleaved", "halves"):
        rope = RotaryEmbedding(8, layout=layout)
        cases[f"rotary {layout}, tensor offset"] = Case(
            lambda x, offset, rope=rope: rope(x, offset=offset), lambda: (_x(2, 4, _SEQ, 8), torch.tensor(5))
        )
        cases[f"rotary {layout}, position_ids"] = Case(
            lambda x, positions, rope=rope: rope(x, positions=positions), lambda: (_x(2, 4, _SEQ, 8), _position_ids())
        )
        cases[f"rotary {layout}, fractional positions"] = Case(
            lambda x, positions, rope=rope: rope(x, positions=positions),
            lambda: (_x(2, 4, _SEQ, 8), torch.linspace(0.0, 7.5, _SEQ)),
        )
        cases[f"rotary {layout}, rotate_pair, grouped keys, position_ids"] = Case(
            lambda q, k, positions, rope=rope: rope.rotate_pair(q, k, positions=positions),
            lambda: (_x(2, 4, _SEQ, 8), _x(2, 2, _SEQ, 8, seed=1), _position_ids()),
        )
        cases[f"rotary {layout}, rotate_pair, tensor offset"] = Case(
            lambda q, k, offset, rope=rope: rope.rotate_pair(q, k, offset=offset),
            lambda: (_x(1, 4, 1, 8), _x(1, 4, 1, 8, seed=1), torch.tensor(9)),
        )
    batch_first = RotaryEmbedding(8, layout="halves", seq_dim=1, rotary_dim=4)
    cases["rotary, seq_dim=1 and rotary_dim, position_ids"] = Case(
        lambda x, positions: batch_first(x, positions=positions), lambda: (_x(2, _SEQ, 3, 8), _position_ids())
    )
    for name, scaling in (("llama3", _LLAMA3), ("dynamic", _DYNAMIC), ("longrope", _LONGROPE)):
        scaled = RotaryEmbedding(8, layout="halves", scaling=scaling)
        cases[f"rotary {name}, position_ids"] = Case(
            lambda x, positions, scaled=scaled: scaled(x, positions=positions),
            lambda: (_x(2, 4, _SEQ, 8), _position_ids()),
        )
    return cases


def _multiaxis_cases() -> dict[str, Case]:
    cases = {}
    for layout in ("interleaved", "halves"):
        rope = MultiAxisRotaryEmbedding(posenc.mrope_frequencies(8, (1, 1, 2)), layout=layout)
        cases[f"multiaxis {layout}, M-RoPE coordinates"] = Case(
            lambda x, positions, rope=rope: rope(x, positions),
            lambda: (_x(2, 4, _SEQ, 8), torch.randint(0, 9, (2, 1, _SEQ, 3), generator=torch.Generator())),
        )
    learnable = MultiAxisRotaryEmbedding(posenc.axial_frequencies(8, 2), learnable=True)
    cases["multiaxis learnable"] = Case(
        lambda x, positions: learnable(x, positions), lambda: (_x(2, 4, _SEQ, 8), torch.rand(_SEQ, 2))
    )
    return cases


def _absolute_cases() -> dict[str, Case]:
    sinusoid = SinusoidalPositionalEncoding(8, max_len=16)
    learned = LearnedPositionalEmbedding(16, 8)
    return {
        "sinusoid, tensor offset": Case(
            lambda x, offset: sinusoid(x, offset=offset), lambda: (_x(2, 1, 8), torch.tensor(9))
        ),
        "sinusoid, position_ids": Case(
            lambda x, positions: sinusoid(x, positions=positions), lambda: (_x(2, _SEQ, 8), _position_ids())
        ),
        "learned, tensor offset": Case(
            lambda x, offset: learned(x, offset=offset), lambda: (_x(2, 1, 8), torch.tensor(9))
        ),
        "learned, position_ids": Case(
            lambda x, positions: learned(x, positions=positions), lambda: (_x(2, _SEQ, 8), _position_ids())
        ),
    }


def _bias_cases() -> dict[str, Case]:
    alibi, t5 = ALiBiBias(4), T5RelativeBias(4, num_buckets=8, max_distance=16)
    shaw = ShawRelativeAttention(8, 2, max_distance=2, causal=True)
    return {
        "alibi, tensor offset": Case(lambda offset: alibi(1, 8, offset=offset), lambda: (torch.tensor(5),)),
        "alibi, score_mod with a tensor offset": Case(
            lambda offset, *index: alibi.score_mod(offset=offset)(torch.zeros(()), *index),
            lambda: (torch.tensor(5), *_indices(4, 1, 8)),
        ),
        "t5, tensor offset": Case(lambda offset: t5(1, 8, offset=offset), lambda: (torch.tensor(5),)),
        "t5, buckets with a tensor offset": Case(
            lambda offset: t5.buckets(2, 8, offset=offset), lambda: (torch.tensor(5),)
        ),
        "t5, score_mod with a tensor offset": Case(
            lambda offset, *index: t5.score_mod(offset=offset)(torch.zeros(()), *index),
            lambda: (torch.tensor(5), *_indices(4, 1, 8)),
        ),
        "causal_mask_mod with a tensor offset": Case(
            lambda offset, *index: causal_mask_mod(offset)(*index), lambda: (torch.tensor(5), *_indices(4, 1, 8))
        ),
        "shaw": Case(lambda x: shaw(x), lambda: (_x(2, _SEQ, 8),)),
        "shaw, attention_logits": Case(lambda x: shaw.attention_logits(x), lambda: (_x(2, _SEQ, 8),)),
    }


def _content_cases() -> dict[str, Case]:
    """Position from content: the gates, biases and attention functions, with a decoding step's tensor offset."""
    torch.manual_seed(0)
    gate, cope, sink, householder = ForgettingGate(8, 4), CoPE(8, 8), AttentionSink(4), PaTHGate(8, 2, 4)
    return {
        "forgetting gate and bias": Case(lambda x: forgetting_bias(gate(x)), lambda: (_x(2, _SEQ, 8),)),
        "forgetting score_mod with a tensor offset": Case(
            lambda log_forget, offset, *index: forgetting_score_mod(log_forget, offset=offset)(torch.zeros(()), *index),
            lambda: (-torch.rand(1, 4, 8), torch.tensor(5), *_indices(4, 1, 8)),
        ),
        "stick-breaking attention, tensor offset": Case(
            lambda q, k, v, offset: stick_breaking_attention(q, k, v, offset=offset),
            lambda: (_x(2, 4, 1, 8), _x(2, 4, _SEQ, 8, seed=1), _x(2, 4, _SEQ, 8, seed=2), torch.tensor(5)),
        ),
        "cope logits": Case(lambda q, k: cope.logits(q, k), lambda: (_x(2, 4, _SEQ, 8), _x(2, 4, _SEQ, 8, seed=1))),
        "sink weights and rescale": Case(
            lambda logits, out, lse: (sink(logits), sink.rescale(out, lse)),
            lambda: (_x(2, 4, _SEQ, _SEQ), _x(2, 4, _SEQ, 8, seed=1), _x(2, 4, _SEQ, seed=2)),
        ),
        "path gate and logits": Case(
            lambda x, q, k: path_logits(q, k, *householder(x)),
            lambda: (_x(2, _SEQ, 8), _x(2, 2, _SEQ, 4, seed=1), _x(2, 2, _SEQ, 4, seed=2)),
        ),
    }


CASES = {**_rotary_cases(), **_multiaxis_cases(), **_absolute_cases(), **_bias_cases(), **_content_cases()}


@pytest.mark.parametrize("name", CASES)
def test_eager_call_reads_nothing_on_the_host(name):
    case = CASES[name]
    inputs = case.inputs()
    with torch.no_grad(), forbid_host_reads():
        case.call(*inputs)


@pytest.mark.parametrize("name", CASES)
def test_compiled_call_is_one_graph_without_host_reads(name):
    case = CASES[name]
    torch._dynamo.reset()
    found: list[str] = []
    compiled = torch.compile(case.call, fullgraph=True, backend=host_read_backend(found))
    with torch.no_grad():
        compiled(*case.inputs())
    torch._dynamo.reset()
    assert found == [], f"operators that read on the host: {found}"


# --- The guard itself catches each kind of read --------------------------------------------------------------


def _leaky_reads() -> dict[str, Callable[[torch.Tensor], object]]:
    """Minimal forward paths, each with one of the reads the guard exists for."""
    table = torch.arange(32.0)
    return {
        ".item()": lambda offset: table[int(offset.item()) :],
        "int()": lambda offset: table[int(offset) :],
        "a slice by a tensor": lambda offset: table[offset:],
        ".tolist()": lambda offset: torch.tensor(offset.reshape(1).tolist()),
        ".cpu().numpy()": lambda offset: torch.from_numpy(offset.cpu().numpy() + 1),
        "if tensor": lambda offset: table if offset > 0 else -table,
        "boolean indexing": lambda offset: table[table > offset],
        "arange to a tensor end": lambda offset: torch.arange(offset),
    }


@pytest.mark.parametrize("name", list(_leaky_reads()))
def test_the_guard_catches_each_kind_of_host_read(name):
    with pytest.raises(HostRead), forbid_host_reads():
        _leaky_reads()[name](torch.tensor(3))


@pytest.mark.parametrize("name", [".item()", "boolean indexing", "arange to a tensor end"])
def test_the_compile_backend_catches_reads_inside_a_graph(name):
    torch._dynamo.reset()
    found: list[str] = []
    compiled = torch.compile(_leaky_reads()[name], fullgraph=True, backend=host_read_backend(found))
    try:
        compiled(torch.tensor(3))
    except torch._dynamo.exc.Unsupported:  # Dynamo refuses the read itself with fullgraph=True: caught as well
        found.append("graph break")
    torch._dynamo.reset()
    assert found != []

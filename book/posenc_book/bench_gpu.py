"""``make check-gpu``: posenc.nn on a CUDA GPU, checked and timed, in one run that writes a markdown report.

Run ``make check-gpu`` (or ``python -m posenc_book.bench_gpu``) on a machine with a CUDA GPU: it takes a few
minutes on one H100 and writes ``_build/check-gpu.md``. Without a CUDA GPU it says so and exits 0. ``--device cpu``
runs every part that does not need CUDA on the CPU instead, at smaller sizes (``--flex-lengths``,
``--timing-length``), as a check of the script itself. CI does not run it. The sections:

1. *Parity*: every module of :mod:`posenc.nn` (and each ``score_mod``) on the device, in float32 and bfloat16,
   against posenc's float64 NumPy reference on the CPU, each within its documented bound.
2. *No host reads*: the eager calls a model makes (tensor offsets, ``position_ids``, M-RoPE coordinates, the
   ``score_mod``\\s) under :func:`posenc_book.host_reads.forbid_host_reads` and, on CUDA,
   ``torch.cuda.set_sync_debug_mode("error")``, which raises on every synchronising CUDA call; and a CUDA graph
   captured around a rotation at a ``position_ids`` tensor, replayed after new positions are copied into it.
3. *A tiny Llama*: transformers' ``LlamaForCausalLM`` built from a config (random weights, nothing downloaded),
   its rotary replaced by :class:`posenc.nn.RotaryEmbedding` (by ``position_ids``, then by a 0-d tensor offset);
   a prefill and 16 cached decoding steps whose every posenc call runs under the same guards, and whose logits
   match the model's own.
4. *Compiled*: every module under ``torch.compile(fullgraph=True)`` (inductor) at a real model's size, against
   its eager call.
5. *FlexAttention*: the ALiBi and T5 ``score_mod``\\s under compiled ``flex_attention`` at 16k and 64k tokens,
   against SDPA with the dense bias where that bias fits in the device's memory.
6. *Timing*: a ``(1, 32, 8192, 128)`` bfloat16 prefill (with 8 key/value heads) and one decoding step, rotated by
   posenc (eager and compiled), transformers, Liger-Kernel's RoPE and flash-attn's rotary (the last two where
   they are installed: they are not requirements), each with its error against the float64 rotation.

Each section reports what it checked and how long it took; a failed check is reported, the run goes on, and the
exit status is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["main", "run"]

LLAMA_THETA = 500000.0
Q_HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
DECODE_STEPS = 16


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Section:
    """One section of the report: its rows (a markdown table), whether every check passed, notes and time."""

    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: int = 0
    seconds: float = 0.0

    def row(self, *cells: object, ok: bool | None = None) -> None:
        """Add a row; ``ok`` (None: informational) becomes its last cell and counts a failure when False."""
        text = [_cell(cell) for cell in cells]
        if ok is not None:
            text.append("yes" if ok else "**NO**")
            self.failures += not ok
        self.rows.append(text)

    def markdown(self) -> str:
        status = "passed" if self.failures == 0 else f"**{self.failures} failed**"
        lines = [f"## {self.title}", "", f"{status}; {self.seconds:.0f} s", ""]
        lines += [*self.notes, ""] if self.notes else []
        if self.rows:
            lines += ["| " + " | ".join(self.header) + " |", "|" + " --- |" * len(self.header)]
            lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if value == value else "nan"
    return str(value).replace("|", "\\|").replace("\n", " ")


@contextlib.contextmanager
def _timed(section: Section) -> Iterator[Section]:
    """Time the section; an exception in it is a failure reported with its last lines, and the run goes on."""
    began = time.perf_counter()
    _log(f"check-gpu: {section.title}")
    try:
        yield section
    except Exception as error:  # noqa: BLE001 - report any failure of a section and go on to the next
        section.failures += 1
        lines = traceback.format_exception(type(error), error, error.__traceback__)
        section.notes.append("**The section stopped with an exception:**\n\n```\n" + "".join(lines[-6:]) + "```")
    finally:
        section.seconds = time.perf_counter() - began


# --- Guards ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def no_synchronisation(device) -> Iterator[None]:
    """No host read (:func:`~posenc_book.host_reads.forbid_host_reads`) and, on CUDA, no synchronising call."""
    import torch

    from posenc_book.host_reads import forbid_host_reads

    with forbid_host_reads():
        if device.type != "cuda":
            yield
            return
        previous = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode(previous)


def _synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _normal(shape, device, dtype=None, seed: int = 0):
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float32).to(device=device, dtype=dtype)


# --- 1. Parity -------------------------------------------------------------------------------------------


def _one_rounding(dtype) -> float:
    """The unit roundoff of ``dtype`` (float32 2**-24, bfloat16 2**-8)."""
    import torch

    return {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}[dtype]


def _rotation_row(section: Section, name: str, out, exact: np.ndarray, scale: float) -> None:
    """A rotation against the float64 one: float32 within ``1e-6 * max|x|`` (the modules' promise up to position
    2**20), bfloat16 within one rounding of the exact value (plus float32 arithmetic)."""
    import torch

    error = np.abs(out.double().cpu().numpy() - exact)
    dtype = str(out.dtype).replace("torch.", "")
    if out.dtype == torch.float32:
        section.row(name, dtype, f"{error.max():.2e}", f"{1e-6 * scale:.1e}", "", ok=bool(error.max() <= 1e-6 * scale))
        return
    worst = float((error / (_one_rounding(out.dtype) * np.abs(exact) + 2e-6)).max())
    section.row(name, dtype, f"{error.max():.2e}", "1 rounding", f"{worst:.2f} roundings", ok=worst <= 1.0)


def parity(device, section: Section) -> None:
    """Every module on ``device`` in float32 and bfloat16 against the float64 reference on the CPU."""
    import torch

    import posenc
    from posenc.nn import (
        ALiBiBias,
        LearnedPositionalEmbedding,
        MultiAxisRotaryEmbedding,
        RotaryEmbedding,
        ShawRelativeAttention,
        SinusoidalPositionalEncoding,
        T5RelativeBias,
    )

    seq = 256
    start = 2**20 - seq  # the documented precision holds up to position 2**20
    for dtype in (torch.float32, torch.bfloat16):
        unit = _one_rounding(dtype)
        name = str(dtype).replace("torch.", "")
        x = _normal((2, 8, seq, HEAD_DIM), device, dtype)
        x64 = x.double().cpu().numpy()
        scale = float(np.abs(x64).max())
        # float32 within 1e-6 * max|x| (the module's promise); bfloat16 one rounding of the exact rotation.
        for layout in ("interleaved", "halves"):
            rope = RotaryEmbedding(HEAD_DIM, layout=layout, base=LLAMA_THETA).to(device)
            exact = posenc.rotate(x64, np.arange(start, start + seq), layout=layout, base=LLAMA_THETA)
            for how, where in (
                ("int offset", {"offset": start}),
                ("tensor offset", {"offset": torch.tensor(start, device=device)}),
                ("position_ids", {"positions": torch.arange(start, start + seq, device=device)[None]}),
            ):
                _rotation_row(section, f"RotaryEmbedding {layout}, {how}", rope(x, **where), exact, scale)
        frequencies = posenc.mrope_frequencies(HEAD_DIM, (16, 24, 24), base=1e6)
        coordinates = torch.randint(0, 2**10, (2, 1, seq, 3), generator=torch.Generator().manual_seed(1))
        exact = posenc.rotate_multiaxis(x64, coordinates.numpy().astype(np.float64), frequencies, layout="halves")
        out = MultiAxisRotaryEmbedding(frequencies, layout="halves").to(device)(x, coordinates.to(device))
        _rotation_row(section, "MultiAxisRotaryEmbedding, M-RoPE", out, exact, scale)
        embeddings = _normal((2, seq, 512), device, dtype, seed=2)
        e64 = embeddings.double().cpu().numpy()
        encoding = SinusoidalPositionalEncoding(512).to(device)
        # float32: the table rounded once, then the sum; bfloat16: the table rounded to bfloat16, then the sum
        for how, out, positions in (
            (
                "tensor offset",
                encoding(embeddings, offset=torch.tensor(3000, device=device)),
                np.arange(3000, 3000 + seq),
            ),
            ("position_ids", encoding(embeddings, positions=torch.arange(seq, device=device)[None]), np.arange(seq)),
        ):
            exact = e64 + posenc.sinusoidal(positions.astype(np.float64), 512, dtype=np.float64)
            error = np.abs(out.double().cpu().numpy() - exact)
            bound = 2 * unit * (np.abs(e64) + 1.0)
            section.row(
                f"SinusoidalPositionalEncoding, {how}",
                name,
                f"{error.max():.2e}",
                "2 roundings",
                "",
                ok=bool((error <= bound).all()),
            )
        learned = LearnedPositionalEmbedding(4096, 512).to(device)
        out = learned(embeddings, positions=torch.arange(seq, device=device)[None] + 1000)
        w64 = learned.weight.detach().double().cpu().numpy()[1000 : 1000 + seq]
        exact = e64 + w64
        error = np.abs(out.detach().double().cpu().numpy() - exact)
        section.row(
            "LearnedPositionalEmbedding, position_ids",
            name,
            f"{error.max():.2e}",
            "2 roundings",
            "",
            ok=bool((error <= 2 * unit * (np.abs(e64) + np.abs(w64))).all()),
        )
    alibi = ALiBiBias(Q_HEADS).to(device)
    for causal in (True, False):
        bias = alibi(4, 2048, causal=causal, offset=torch.tensor(2000, device=device)).double().cpu().numpy()
        exact = posenc.alibi_bias(Q_HEADS, 4, 2048, causal=causal, offset=2000)
        finite = np.isfinite(exact)
        # float32 slopes times float32 distances: two roundings of the exact bias; -inf where the reference has it
        error = float(np.abs(bias[finite] - exact[finite]).max())
        within = bool((np.abs(bias[finite] - exact[finite]) <= 2 * 2.0**-24 * np.abs(exact[finite])).all())
        same_masks = bool(np.array_equal(np.isfinite(bias), finite))
        section.row(
            f"ALiBiBias, causal={causal}, tensor offset",
            "float32",
            f"{error:.2e}",
            "2 roundings",
            "",
            ok=within and same_masks,
        )
    t5 = T5RelativeBias(Q_HEADS).to(device)
    buckets = t5.buckets(4, 2048, offset=torch.tensor(1000, device=device)).cpu().numpy()
    relative = np.arange(2048)[None, :] - (1000 + np.arange(4))[:, None]
    same = bool(np.array_equal(buckets, posenc.t5_relative_bucket(relative)))
    section.row(
        "T5RelativeBias buckets, tensor offset", "int64", "equal" if same else "differ", "the reference", "", ok=same
    )
    heads, queries, keys = (
        torch.arange(Q_HEADS, device=device)[:, None, None],
        torch.arange(4, device=device)[:, None],
        torch.arange(2048, device=device),
    )
    zero = torch.zeros((), device=device)
    for module_name, module, dense in (
        ("ALiBiBias", alibi, alibi(4, 2048, offset=torch.tensor(2000, device=device))),
        ("T5RelativeBias", t5, t5(4, 2048, offset=torch.tensor(2000, device=device))),
    ):
        mod = module.score_mod(offset=torch.tensor(2000, device=device))
        same = bool(torch.equal(mod(zero, zero.long(), heads, queries, keys), dense))
        section.row(f"{module_name}.score_mod", "float32", "equal" if same else "differ", "the dense bias", "", ok=same)
    shaw = ShawRelativeAttention(512, 8, max_distance=16, causal=True)
    reference = ShawRelativeAttention(512, 8, max_distance=16, causal=True)
    reference.load_state_dict(shaw.state_dict())
    embeddings = _normal((2, seq, 512), "cpu", seed=3)
    want = reference.double()(embeddings.double()).detach().numpy()
    for dtype, bound in ((torch.float32, 1e-5), (torch.bfloat16, 5e-2)):
        got = (
            shaw.to(device=device, dtype=dtype)(embeddings.to(device=device, dtype=dtype))
            .detach()
            .double()
            .cpu()
            .numpy()
        )
        error = float(np.abs(got - want).max() / np.abs(want).max())
        section.row(
            "ShawRelativeAttention (relative to max abs)",
            str(dtype).replace("torch.", ""),
            f"{error:.2e}",
            f"{bound:.0e}",
            "",
            ok=error <= bound,
        )


# --- 2. Host reads ---------------------------------------------------------------------------------------


def host_read_cases(device) -> dict[str, Callable[[], object]]:
    """The eager calls a model makes, with their tensors on ``device``: ``{name: call}``."""
    import torch

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

    q, k = _normal((2, Q_HEADS, 64, HEAD_DIM), device), _normal((2, KV_HEADS, 64, HEAD_DIM), device, seed=1)
    step_q, step_k = q[:, :, :1], k[:, :, :1]
    position_ids = torch.arange(64, device=device).expand(2, 64)
    offset = torch.tensor(64, device=device)
    index = (
        torch.zeros((), dtype=torch.int32, device=device),
        torch.arange(Q_HEADS, dtype=torch.int32, device=device)[:, None, None],
        torch.arange(1, dtype=torch.int32, device=device)[:, None],
        torch.arange(65, dtype=torch.int32, device=device),
    )
    cases: dict[str, Callable[[], object]] = {}
    for layout in ("interleaved", "halves"):
        rope = RotaryEmbedding(HEAD_DIM, layout=layout, base=LLAMA_THETA).to(device)
        cases[f"RotaryEmbedding {layout}, position_ids"] = lambda rope=rope: rope.rotate_pair(
            q, k, positions=position_ids
        )
        cases[f"RotaryEmbedding {layout}, tensor offset"] = lambda rope=rope: rope.rotate_pair(
            step_q, step_k, offset=offset
        )
        cases[f"RotaryEmbedding {layout}, bfloat16"] = lambda rope=rope: rope(q.bfloat16(), positions=position_ids)
    for name, scaling in (
        ("yarn", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}),
        ("dynamic", {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 32}),
    ):
        scaled = RotaryEmbedding(HEAD_DIM, layout="halves", scaling=scaling).to(device)
        cases[f"RotaryEmbedding {name}, position_ids"] = lambda scaled=scaled: scaled(q, positions=position_ids)
    mrope = MultiAxisRotaryEmbedding(posenc.mrope_frequencies(HEAD_DIM, (16, 24, 24)), layout="halves").to(device)
    coordinates = torch.arange(64 * 3, device=device).reshape(1, 1, 64, 3)
    cases["MultiAxisRotaryEmbedding, M-RoPE"] = lambda: mrope(q, coordinates)
    embeddings = _normal((2, 64, 512), device, seed=2)
    sinusoid, learned = SinusoidalPositionalEncoding(512).to(device), LearnedPositionalEmbedding(4096, 512).to(device)
    cases["SinusoidalPositionalEncoding, tensor offset"] = lambda: sinusoid(embeddings[:, :1], offset=offset)
    cases["SinusoidalPositionalEncoding, position_ids"] = lambda: sinusoid(embeddings, positions=position_ids)
    cases["LearnedPositionalEmbedding, tensor offset"] = lambda: learned(embeddings[:, :1], offset=offset)
    cases["LearnedPositionalEmbedding, position_ids"] = lambda: learned(embeddings, positions=position_ids)
    alibi, t5 = ALiBiBias(Q_HEADS).to(device), T5RelativeBias(Q_HEADS).to(device)
    cases["ALiBiBias, tensor offset"] = lambda: alibi(1, 65, offset=offset)
    cases["ALiBiBias.score_mod, tensor offset"] = lambda: alibi.score_mod(offset=offset)(index[0].float(), *index)
    cases["T5RelativeBias, tensor offset"] = lambda: t5(1, 65, offset=offset)
    cases["T5RelativeBias.score_mod, tensor offset"] = lambda: t5.score_mod(offset=offset)(index[0].float(), *index)
    cases["causal_mask_mod, tensor offset"] = lambda: causal_mask_mod(offset)(*index)
    shaw = ShawRelativeAttention(512, 8, max_distance=16, causal=True).to(device)
    cases["ShawRelativeAttention"] = lambda: shaw(embeddings)
    return cases


def host_reads(device, section: Section) -> None:
    import torch

    with torch.no_grad():
        for name, call in host_read_cases(device).items():
            try:
                with no_synchronisation(device):
                    call()
                _synchronize(device)
            except Exception as error:  # noqa: BLE001 - the guard's HostRead, or CUDA's error on a synchronisation
                section.row(name, f"{type(error).__name__}: {str(error).splitlines()[0][:160]}", ok=False)
            else:
                section.row(name, "no read, no synchronisation", ok=True)
    if device.type != "cuda":
        section.notes.append("No CUDA graph on this device: the capture check needs CUDA.")
        return
    from posenc.nn import RotaryEmbedding

    # A CUDA graph captured around a rotation at a position_ids tensor, replayed after new positions are copied
    # into that tensor: the graph must compute its table from the positions (not reuse the last call's table).
    rope = RotaryEmbedding(HEAD_DIM, layout="halves").to(device)
    x = _normal((1, 8, 16, HEAD_DIM), device, seed=4)
    static = torch.arange(16, device=device)[None]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(3):
            rope(x, positions=static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        captured = rope(x, positions=static)
    static.copy_(torch.arange(5000, 5016, device=device)[None])
    graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        want = RotaryEmbedding(HEAD_DIM, layout="halves").to(device)(
            x, positions=torch.arange(5000, 5016, device=device)
        )
    same = bool(torch.equal(captured, want))
    section.row("CUDA graph replayed at new position_ids", "the new positions' rotation" if same else "stale", ok=same)


# --- 3. A tiny Llama -------------------------------------------------------------------------------------


def tiny_llama(device, section: Section) -> None:
    """transformers' Llama with posenc's rotary: prefill and 16 cached decoding steps, guarded, against its own."""
    import torch
    from torch import nn
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM
    from transformers.models.llama import modeling_llama

    from posenc.nn import RotaryEmbedding

    config = LlamaConfig(
        vocab_size=512,
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD_DIM,
        max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": LLAMA_THETA},
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(device).eval()
    input_ids = torch.randint(1, 512, (2, 48), generator=torch.Generator().manual_seed(1)).to(device)

    def decode() -> list:
        cache = DynamicCache(config=config)
        logits = []
        with torch.no_grad():
            ids = input_ids
            positions = torch.arange(48, device=device).expand(2, 48)
            for _ in range(DECODE_STEPS + 1):
                out = model(input_ids=ids, position_ids=positions, past_key_values=cache)
                logits.append(out.logits)
                ids = out.logits[:, -1:].argmax(-1)
                positions = positions[:, -1:] + 1
        return logits

    theirs = decode()
    if device.type == "cuda":  # how often transformers' own forward synchronises, for the record
        import warnings

        with warnings.catch_warnings(record=True) as caught, torch.no_grad():
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                cache = DynamicCache(config=config)
                model(input_ids=input_ids, past_key_values=cache)
                model(input_ids=input_ids[:, :1], past_key_values=cache)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        section.notes.append(
            f"transformers' own prefill and decoding step (its rotary) warned of {len(caught)} synchronising "
            "calls under sync debug mode 'warn' (outside posenc: for the record)."
        )
    rope = RotaryEmbedding(HEAD_DIM, layout="halves", base=LLAMA_THETA).to(device)
    calls = {"count": 0}

    class PassPositions(nn.Module):
        """Hands the attention layers the positions (or a 0-d offset) in place of cos and sin."""

        def __init__(self, offsets: bool) -> None:
            super().__init__()
            self.offsets = offsets

        def forward(self, x, position_ids):
            return (position_ids[0, 0] if self.offsets else position_ids), None

    def apply_posenc(q, k, where, unused, unsqueeze_dim=1):
        calls["count"] += 1
        with no_synchronisation(device):
            if where.ndim == 0:
                return rope.rotate_pair(q, k, offset=where)
            return rope.rotate_pair(q, k, positions=where)

    original_rotary, original_apply = model.model.rotary_emb, modeling_llama.apply_rotary_pos_emb
    try:
        modeling_llama.apply_rotary_pos_emb = apply_posenc
        for how, offsets in (("position_ids", False), ("0-d tensor offset", True)):
            model.model.rotary_emb = PassPositions(offsets)
            calls["count"] = 0
            ours = decode()
            difference = max(float((mine - their).abs().max()) for mine, their in zip(ours, theirs))
            scale = max(float(their.abs().max()) for their in theirs)
            section.row(
                f"prefill of 2 x 48 and {DECODE_STEPS} decoding steps, posenc by {how}",
                calls["count"],
                f"{difference:.2e}",
                f"{1e-4 * scale:.1e}",
                ok=difference <= 1e-4 * scale,
            )
    finally:
        model.model.rotary_emb, modeling_llama.apply_rotary_pos_emb = original_rotary, original_apply
    section.notes.append(
        "Every posenc call ran under forbid_host_reads"
        + (" and torch.cuda.set_sync_debug_mode('error')" if device.type == "cuda" else "")
        + "; the logits are compared with the same model's own rotary (float32 angles, positions below 64)."
    )


# --- 4. Compiled -----------------------------------------------------------------------------------------


def compiled(device, section: Section, length: int) -> None:
    """Every module under torch.compile(fullgraph=True) with the default backend, against its eager call."""
    import torch

    import posenc
    from posenc.nn import (
        ALiBiBias,
        LearnedPositionalEmbedding,
        MultiAxisRotaryEmbedding,
        RotaryEmbedding,
        ShawRelativeAttention,
        SinusoidalPositionalEncoding,
        T5RelativeBias,
    )

    q, k = _normal((1, Q_HEADS, length, HEAD_DIM), device), _normal((1, KV_HEADS, length, HEAD_DIM), device, seed=1)
    position_ids = torch.arange(length, device=device)[None]
    cases: dict[str, tuple[Callable[..., Any], tuple]] = {}
    for layout in ("interleaved", "halves"):
        rope = RotaryEmbedding(HEAD_DIM, layout=layout, base=LLAMA_THETA).to(device)
        cases[f"RotaryEmbedding {layout}, prefill at position_ids"] = (
            lambda q, k, p, rope=rope: rope.rotate_pair(q, k, positions=p),
            (q, k, position_ids),
        )
        cases[f"RotaryEmbedding {layout}, bfloat16 decode step at a tensor offset"] = (
            lambda q, k, o, rope=rope: rope.rotate_pair(q, k, offset=o),
            (q[:, :, :1].bfloat16(), k[:, :, :1].bfloat16(), torch.tensor(length, device=device)),
        )
    mrope = MultiAxisRotaryEmbedding(posenc.mrope_frequencies(HEAD_DIM, (16, 24, 24)), layout="halves").to(device)
    cases["MultiAxisRotaryEmbedding, M-RoPE"] = (
        lambda x, c: mrope(x, c),
        (q, torch.randint(0, 64, (1, 1, length, 3), generator=torch.Generator().manual_seed(2)).to(device)),
    )
    embeddings = _normal((1, length, 1024), device, seed=3)
    sinusoid, learned = (
        SinusoidalPositionalEncoding(1024).to(device),
        LearnedPositionalEmbedding(2 * length, 1024).to(device),
    )
    cases["SinusoidalPositionalEncoding"] = (lambda x: sinusoid(x), (embeddings,))
    cases["LearnedPositionalEmbedding, position_ids"] = (
        lambda x, p: learned(x, positions=p),
        (embeddings, position_ids),
    )
    alibi, t5 = ALiBiBias(Q_HEADS).to(device), T5RelativeBias(Q_HEADS).to(device)
    offset = torch.tensor(length, device=device)
    cases["ALiBiBias, decode step"] = (lambda o: alibi(1, length + 1, offset=o), (offset,))
    cases["T5RelativeBias, decode step"] = (lambda o: t5(1, length + 1, offset=o), (offset,))
    shaw = ShawRelativeAttention(512, 8, max_distance=16, causal=True).to(device)
    cases["ShawRelativeAttention"] = (lambda x: shaw(x), (_normal((1, 1024, 512), device, seed=4),))
    with torch.no_grad():
        for name, (call, inputs) in cases.items():
            torch._dynamo.reset()
            began = time.perf_counter()
            try:
                got = torch.compile(call, fullgraph=True)(*inputs)
                _synchronize(device)
            except Exception as error:  # noqa: BLE001 - a module that does not compile is this section's finding
                section.row(name, f"{type(error).__name__}: {str(error).splitlines()[0][:120]}", "", "", ok=False)
                continue
            seconds = time.perf_counter() - began
            want = call(*inputs)
            pairs = zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,))
            worst, bound = 0.0, 0.0
            for mine, theirs in pairs:
                worst = max(worst, float((mine.double() - theirs.double()).abs().max()))
                if mine.is_floating_point():
                    bound = max(bound, 16 * _one_rounding(mine.dtype) * float(theirs.double().abs().max()))
            section.row(name, f"{seconds:.1f}", f"{worst:.2e}", f"{bound:.1e}", ok=worst <= bound)
    torch._dynamo.reset()
    section.notes.append(
        f"Compiled with the default backend (inductor) at {length} tokens; the compiled and eager results may differ "
        "by a few roundings of the computing dtype (bound: 16 roundings of the largest value)."
    )


# --- 5. FlexAttention ------------------------------------------------------------------------------------


def _flex_row(section: Section, attention, qkv: tuple, name: str, score_mod, block_mask) -> None:
    """Compiled flex_attention with ``score_mod``: time, and its difference from SDPA with the dense bias."""
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    q, k, v = qkv
    device, dtype, (_, heads, length, _) = q.device, q.dtype, q.shape
    began = time.perf_counter()
    out = attention(q, k, v, score_mod=score_mod, block_mask=block_mask)
    _synchronize(device)
    first = time.perf_counter() - began
    milliseconds = _median_ms(lambda: attention(q, k, v, score_mod=score_mod, block_mask=block_mask), device, 3)
    finite = bool(torch.isfinite(out).all())
    # The dense bias is built from the score_mod itself, on broadcast indices (the modules' forward refuses a bias
    # of more than posenc.MAX_TABLE_ELEMENTS): float32 first, then q's dtype, with the causal -inf where masked.
    # Its peak: two float32 (heads, L, L) tensors (the biased score and the masked one), the result in q's dtype,
    # and the (L, L) int64 distances, their comparison and their float32 copy.
    needed = heads * length * length * (8 + torch.finfo(dtype).bits // 8) + 17 * length * length
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else 4 * 2**30
    if needed > 0.9 * free:
        section.row(name, length, f"{first:.1f}", f"{milliseconds:.1f}", "the dense bias does not fit", "", ok=finite)
        return
    rows = torch.arange(length, device=device)
    heads_index = torch.arange(heads, device=device)[:, None, None]
    dense = score_mod(torch.zeros((), device=device), 0, heads_index, rows[:, None], rows).to(dtype)
    sdpa_ms = _median_ms(lambda: scaled_dot_product_attention(q, k, v, attn_mask=dense), device, 3)
    difference = float((out.float() - scaled_dot_product_attention(q, k, v, attn_mask=dense).float()).abs().max())
    bound = 2e-2 if dtype == torch.bfloat16 else 1e-4
    section.row(
        name,
        length,
        f"{first:.1f}",
        f"{milliseconds:.1f}",
        f"{sdpa_ms:.1f}",
        f"{difference:.1e}",
        ok=finite and difference <= bound,
    )


def flex(device, section: Section, lengths: list[int], heads: int = 16, head_dim: int = 64) -> None:
    """ALiBi and T5 score_mods under compiled flex_attention, against SDPA with the dense bias where it fits."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    from posenc.nn import ALiBiBias, T5RelativeBias, causal_mask_mod

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    # Static shapes, one graph per length and score_mod: with automatic dynamic shapes, the recompilation for a
    # second score_mod makes its captured ints symbolic, which inductor's CPU FlexAttention template (torch 2.13)
    # fails to lower.
    attention = torch.compile(flex_attention, dynamic=False)
    alibi, t5 = ALiBiBias(heads).to(device), T5RelativeBias(heads).to(device)
    with torch.no_grad():
        for length in lengths:
            qkv = tuple(_normal((1, heads, length, head_dim), device, dtype, seed=seed) for seed in range(3))
            mask = create_block_mask(causal_mask_mod(), None, None, length, length, device=device)
            _flex_row(section, attention, qkv, "ALiBi, causal", alibi.score_mod(), mask)
            _flex_row(section, attention, qkv, "T5, bidirectional", t5.score_mod(), None)
    section.notes.append(
        f"(1, {heads}, length, {head_dim}) {str(dtype).replace('torch.', '')} queries, keys and values; ALiBi with a "
        "causal block mask, T5 without a mask; SDPA is given the dense bias (built from the score_mod, in the same "
        "dtype) when building it fits in the free memory."
    )


# --- 6. Timing -------------------------------------------------------------------------------------------


def _median_ms(call: Callable[[], object], device, repeats: int) -> float:
    """Median milliseconds of ``repeats`` calls, after one warm-up; CUDA events on a GPU, wall time elsewhere."""
    import torch

    call()
    _synchronize(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            call()
            times.append(1e3 * (time.perf_counter() - began))
    return statistics.median(times)


def _import_optional(what: str) -> tuple[Any, str]:
    """``(function, "")`` for Liger-Kernel's or flash-attn's rotary, or ``(None, why not)``."""
    try:
        if what == "liger":
            from liger_kernel.transformers.rope import liger_rotary_pos_emb

            return liger_rotary_pos_emb, importlib.metadata.version("liger-kernel")
        from flash_attn.layers.rotary import apply_rotary_emb

        return apply_rotary_emb, importlib.metadata.version("flash-attn")
    except (ImportError, OSError, RuntimeError) as error:  # not installed, or built for another torch or CUDA
        return None, f"not installed ({type(error).__name__}: {str(error).splitlines()[0][:80]})"


def _time_step(section: Section, device, step: str, seq: int, start: int, theirs, liger: tuple, flash: tuple) -> None:
    """Time each implementation on q and k of ``seq`` rows at positions ``start ..``, and check its error."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    import posenc
    from posenc.nn import RotaryEmbedding

    dtype = torch.bfloat16
    (liger, liger_version), (flash, flash_version) = liger, flash
    # As transformers lays them out: (batch, seq, heads, head_dim) projections seen as (batch, heads, seq, ...)
    q_bshd = _normal((1, seq, Q_HEADS, HEAD_DIM), device, dtype, seed=5)
    k_bshd = _normal((1, seq, KV_HEADS, HEAD_DIM), device, dtype, seed=6)
    position_ids = torch.arange(start, start + seq, device=device)[None]
    cos, sin = theirs(q_bshd, position_ids)
    by_offset, by_same, by_new, by_compiled = (
        RotaryEmbedding(HEAD_DIM, layout="halves", base=LLAMA_THETA).to(device) for _ in range(4)
    )
    compiled_pair = torch.compile(lambda q, k, p: by_compiled.rotate_pair(q, k, positions=p), fullgraph=True)
    # Each takes q and k of shape (batch, heads, seq, head_dim) and returns them rotated.
    approaches: dict[str, tuple[Callable[[Any, Any], Any] | None, str]] = {
        "posenc eager, int offset": (lambda q, k: by_offset.rotate_pair(q, k, offset=start), ""),
        "posenc eager, position_ids (one tensor, as every layer gets it)": (
            lambda q, k: by_same.rotate_pair(q, k, positions=position_ids),
            "",
        ),
        "posenc eager, a new position_ids tensor": (
            lambda q, k: by_new.rotate_pair(q, k, positions=position_ids.clone()),
            "",
        ),
        "posenc compiled (inductor), position_ids": (lambda q, k: compiled_pair(q, k, position_ids), ""),
        "transformers eager, cos/sin + apply_rotary_pos_emb": (
            lambda q, k: apply_rotary_pos_emb(q, k, *theirs(q, position_ids)),
            "",
        ),
        "transformers eager, apply_rotary_pos_emb (cos/sin given)": (
            lambda q, k: apply_rotary_pos_emb(q, k, cos, sin),
            "",
        ),
    }
    if liger is not None:  # in place, when q and k are transposed views of contiguous projections (as here)
        approaches[f"Liger-Kernel {liger_version} liger_rotary_pos_emb (cos/sin given)"] = (
            lambda q, k: liger(q, k, cos, sin),
            "",
        )
    else:
        approaches["Liger-Kernel liger_rotary_pos_emb"] = (None, liger_version)
    if flash is not None:  # (batch, seq, heads, head_dim) and a cos/sin table of every position, as flash caches it
        table = theirs(q_bshd, torch.arange(start + seq, device=device)[None])
        table_cos, table_sin = (half[0, :, : HEAD_DIM // 2].contiguous() for half in table)
        approaches[f"flash-attn {flash_version} apply_rotary_emb (cos/sin cached)"] = (
            lambda q, k: tuple(
                flash(x.transpose(1, 2), table_cos, table_sin, seqlen_offsets=start).transpose(1, 2) for x in (q, k)
            ),
            "",
        )
    else:
        approaches["flash-attn apply_rotary_emb"] = (None, flash_version)
    heads_checked = 4  # the error of the first 4 query heads: the float64 reference of all 32 would be slow
    q64 = q_bshd.transpose(1, 2)[:, :heads_checked].double().cpu().numpy()
    exact = posenc.rotate(q64, np.arange(start, start + seq), layout="halves", base=LLAMA_THETA)
    repeats = 20 if step == "prefill" else 200
    with torch.no_grad():
        for name, (call, why_not) in approaches.items():
            if call is None:
                section.row(step, name, why_not, "", "", "")
                continue
            q, k = q_bshd.clone().transpose(1, 2), k_bshd.clone().transpose(1, 2)
            rotated_q = call(q, k)[0][:, :heads_checked].double().cpu().numpy()  # before the timed calls
            error = np.abs(rotated_q - exact)
            roundings = float((error / (2.0**-8 * np.abs(exact) + 2e-6)).max())
            microseconds = 1e3 * _median_ms(lambda call=call, q=q, k=k: call(q, k), device, repeats)
            section.row(step, name, f"{microseconds:.1f}", f"{error.max():.1e}", f"{roundings:.2f}", "")


def timing(device, section: Section, length: int) -> None:
    """One prefill and one decoding step of q and k, rotated by each implementation: time and error."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = LlamaConfig(
        hidden_size=Q_HEADS * HEAD_DIM,
        num_attention_heads=Q_HEADS,
        num_key_value_heads=KV_HEADS,
        head_dim=HEAD_DIM,
        max_position_embeddings=2 * length,
        rope_parameters={"rope_type": "default", "rope_theta": LLAMA_THETA},
    )
    theirs = LlamaRotaryEmbedding(config).to(device)
    liger, liger_version = _import_optional("liger") if device.type == "cuda" else (None, "needs CUDA")
    flash, flash_version = _import_optional("flash") if device.type == "cuda" else (None, "needs CUDA")
    for step, seq, start in (("prefill", length, 0), ("decoding step", 1, length)):
        _time_step(section, device, step, seq, start, theirs, (liger, liger_version), (flash, flash_version))
    section.notes.append(
        f"q (1, {Q_HEADS}, seq, {HEAD_DIM}) and k (1, {KV_HEADS}, seq, {HEAD_DIM}) in bfloat16, transposed views of "
        f"(1, seq, heads, {HEAD_DIM}) projections as in transformers; prefill of {length} tokens, decoding step at "
        f"position {length}; rope_theta {LLAMA_THETA:g}, halves layout. Median microseconds "
        + ("(CUDA events)" if device.type == "cuda" else "(wall clock)")
        + "; error of q against the float64 rotation of the bfloat16 input (first 4 heads), and in units of one "
        "bfloat16 rounding of the exact value."
    )


# --- The run ---------------------------------------------------------------------------------------------

SECTIONS = ("parity", "host_reads", "llama", "compiled", "flex", "timing")


def _machine(device) -> str:
    import torch

    versions = [f"torch {torch.__version__}"]
    for package in ("transformers", "liger-kernel", "flash-attn", "triton"):
        try:
            versions.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    where = (
        torch.cuda.get_device_name(device) if device.type == "cuda" else (platform.processor() or platform.machine())
    )
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{where} ({device}); {', '.join(versions)}; Python {platform.python_version()}; {os.cpu_count()} CPUs; {date}"
    )


def run(
    device_name: str, sections=SECTIONS, *, flex_lengths=None, timing_length=None, compile_length=None
) -> tuple[str, int]:
    """Run the sections on ``device_name``; return the markdown report and the number of failed checks."""
    import torch

    device = torch.device(device_name)
    on_cuda = device.type == "cuda"
    flex_lengths = flex_lengths or ([16384, 65536] if on_cuda else [1024, 2048])
    timing_length = timing_length or 8192
    compile_length = compile_length or 4100
    torch.manual_seed(0)
    report = [
        "# make check-gpu",
        "",
        _machine(device),
        "",
        ""
        if on_cuda
        else "**Run on the CPU** (`--device cpu`): the parts that need CUDA (its sync debug mode, "
        "CUDA graphs, Liger-Kernel, flash-attn) are left out, and FlexAttention runs at smaller lengths.",
    ]
    results = []
    steps = {
        "parity": (
            "Parity against the float64 reference",
            ["module", "dtype", "max abs error", "bound", "worst", "ok"],
            lambda s: parity(device, s),
        ),
        "host_reads": ("No host reads, no synchronisation", ["call", "result", "ok"], lambda s: host_reads(device, s)),
        "llama": (
            "A tiny Llama with posenc's rotary",
            ["run", "posenc calls", "max logit difference", "bound", "ok"],
            lambda s: tiny_llama(device, s),
        ),
        "compiled": (
            "torch.compile(fullgraph=True)",
            ["module", "compile + first call s", "max difference vs eager", "bound", "ok"],
            lambda s: compiled(device, s, compile_length),
        ),
        "flex": (
            "FlexAttention score_mods",
            [
                "score_mod",
                "tokens",
                "compile + first call s",
                "flex ms",
                "SDPA + dense bias ms",
                "max difference",
                "ok",
            ],
            lambda s: flex(device, s, flex_lengths),
        ),
        "timing": (
            "Timing: prefill and decoding step",
            ["step", "implementation", "us", "max abs error", "in bfloat16 roundings", ""],
            lambda s: timing(device, s, timing_length),
        ),
    }
    began = time.perf_counter()
    for key in sections:
        title, header, body = steps[key]
        section = Section(title, header)
        with _timed(section):
            body(section)
        results.append(section)
        report += ["", section.markdown()]
    failures = sum(section.failures for section in results)
    total = time.perf_counter() - began
    report += ["", f"Total: {total:.0f} s; {failures} failed check{'s' if failures != 1 else ''}."]
    return "\n".join(report) + "\n", failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m posenc_book.bench_gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device", choices=("cuda", "cpu"), default=None, help="cuda (default, when there is one) or cpu"
    )
    parser.add_argument("--out", default="_build/check-gpu.md", help="where to write the markdown report")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument(
        "--flex-lengths",
        default=None,
        help="comma-separated token counts (default 16384,65536 on CUDA, 1024,2048 on the CPU)",
    )
    parser.add_argument("--timing-length", type=int, default=None, help="prefill length of the timing (default 8192)")
    parser.add_argument("--compile-length", type=int, default=None, help="length of the compiled calls (default 4100)")
    args = parser.parse_args(argv)
    import torch

    if args.device is None:
        if not torch.cuda.is_available():
            print(
                "make check-gpu: no CUDA GPU here (torch.cuda.is_available() is False), so nothing was checked. "
                "Run it on a machine with one; `python -m posenc_book.bench_gpu --device cpu` runs the parts that "
                "do not need CUDA on the CPU."
            )
            return 0
        args.device = "cuda"
    sections = [name.strip() for name in args.sections.split(",") if name.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}: choose from {', '.join(SECTIONS)}")
    flex_lengths = [int(n) for n in args.flex_lengths.split(",")] if args.flex_lengths else None
    report, failures = run(
        args.device,
        sections,
        flex_lengths=flex_lengths,
        timing_length=args.timing_length,
        compile_length=args.compile_length,
    )
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as file:
        file.write(report)
    print(report)
    _log(f"check-gpu: wrote {args.out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

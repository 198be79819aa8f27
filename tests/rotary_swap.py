"""Shared set-up of the tests that swap posenc's RotaryEmbedding into tiny transformers models.

Used by tests/test_llama_positions.py, tests/test_rotary_models.py, tests/test_partial_rotary_models.py and
tests/test_multiaxis_models.py (imported as ``rotary_swap``, like
``site_check``: pytest puts ``tests/`` on the import path). transformers is imported inside the functions, so that
importing this module needs torch only.

*The swap.* A transformers decoder (Llama, Qwen2, Mistral, Qwen3, ...) computes cos and sin once per call in
``model.model.rotary_emb(hidden_states, position_ids)`` and hands them to each attention layer, which calls its
modeling module's ``apply_rotary_pos_emb(q, k, cos, sin)``. :func:`swap_rotary` replaces the first by
:class:`PassPositions`, which hands on the positions in place of cos (and ``None`` for sin), and the second by a
function that rotates q and k with posenc. Everything else (weights, masks, the key/value cache, ``generate()``)
is transformers' own.

*Tolerance.* Both models compute the same rotation; transformers forms ``position * inv_freq`` and its cosine and
sine in float32 (an angle off by up to ``position * 2**-24`` rad: below ``1e-6`` rad at the positions used here,
all below 20), posenc in float64, rounded once to float32. The rotated q and k thus differ by up to about
``1e-6`` relative, and two layers of float32 arithmetic carry that, attenuated, to logits of magnitude below 1
with these weights (measured: at most ``1.8e-7`` apart, in Qwen3; a few float32 roundings). ``atol = rtol = 1e-5``
bounds the worst case with room, and wrong positions move the logits by more than 100 times that (each test
module shows it).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch
from torch import nn

from posenc.nn import RotaryEmbedding

TOLERANCE = dict(rtol=1e-5, atol=1e-5)
"""Logits of posenc's rotary against transformers' own: float32 rounding, see the module docstring."""

VOCAB = 101
PAD = 0
HEAD_DIM = 16

TINY_DECODER = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=HEAD_DIM,
)
"""The tiny decoder every model test builds (2 layers, 4 query and 2 key/value heads of 16): config keywords."""


class PassPositions(nn.Module):
    """Stands in for the model's ``rotary_emb``: hands the positions to the attention layers instead of cos, sin.

    ``offsets=True`` hands on a 0-d tensor, the position of the first new token (a static cache's
    ``cache_position[0]``), which needs every row of ``position_ids`` to be the same. ``corrupt`` maps the
    positions (or the offset) before they are handed on: a deliberate bug, to show the comparison sees it.
    """

    def __init__(self, offsets: bool = False, corrupt: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__()
        self.offsets, self.corrupt = offsets, corrupt or (lambda positions: positions)
        self.offsets_seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, None]:
        if not self.offsets:
            return self.corrupt(position_ids), None
        assert bool((position_ids == position_ids[:1]).all()), "a 0-d offset serves a batch with equal positions"
        offset = self.corrupt(position_ids[0, 0])
        self.offsets_seen.append(offset)
        return offset, None


def swap_rotary(
    monkeypatch,
    modeling: ModuleType,
    model: nn.Module,
    rope: RotaryEmbedding,
    *,
    offsets: bool = False,
    corrupt: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> nn.Module:
    """``model`` with its rotary replaced by ``rope`` (``modeling``: its modeling module, e.g. ``modeling_qwen2``).

    The patch of ``modeling.apply_rotary_pos_emb`` lasts for the test (``monkeypatch``), and applies to every
    model of that family built during it: build the reference model's logits before or with another family.
    """

    def apply_posenc(q, k, positions, unused, unsqueeze_dim=1):
        if positions.ndim == 0:
            return rope(q, offset=positions), rope(k, offset=positions)
        return rope(q, positions=positions), rope(k, positions=positions)

    monkeypatch.setattr(modeling, "apply_rotary_pos_emb", apply_posenc)
    model.model.rotary_emb = PassPositions(offsets, corrupt)
    return model


def left_padded_batch(generator_seed: int = 1):
    """Two prompts, of 9 and 5 tokens, left-padded to 9, with transformers' attention mask and position_ids.

    The position_ids are those ``generate()`` computes (``GenerationMixin._prepare_position_ids_for_generation``):
    the running count of real tokens minus one, and 0 on the padding.
    """
    generator = torch.Generator().manual_seed(generator_seed)
    input_ids = torch.randint(1, VOCAB, (2, 9), generator=generator)
    attention_mask = torch.ones(2, 9, dtype=torch.long)
    attention_mask[1, :4] = 0
    input_ids[1, :4] = PAD
    position_ids = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    return input_ids, attention_mask, position_ids


def decode(model: nn.Module, input_ids, attention_mask, position_ids, steps: int) -> list[torch.Tensor]:
    """Prefill, then ``steps`` greedy tokens one at a time through a DynamicCache: the logits of every call."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = model(
            input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, past_key_values=cache
        )
        logits = [out.logits]
        for _ in range(steps):
            token = out.logits[:, -1:].argmax(-1)
            attention_mask = torch.cat([attention_mask, torch.ones_like(token)], dim=1)
            position_ids = position_ids[:, -1:] + 1
            out = model(
                input_ids=token, attention_mask=attention_mask, position_ids=position_ids, past_key_values=cache
            )
            logits.append(out.logits)
    return logits


def largest_difference(ours: list[torch.Tensor], theirs: list[torch.Tensor], real: torch.Tensor) -> float:
    """The largest logit difference over the calls of :func:`decode`, the prefill's padding left out."""
    first = float((ours[0][real] - theirs[0][real]).abs().max())
    return max([first, *(float((mine - their).abs().max()) for mine, their in zip(ours[1:], theirs[1:]))])


def greedy_generate(model: nn.Module, new_tokens: int, **inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy ``generate()`` of exactly ``new_tokens``: the new tokens and the logits of each step.

    ``inputs`` are the model's keyword inputs (``input_ids``, ``attention_mask``, ``pixel_values``, ...); the
    logits are ``(batch, new_tokens, vocab)``.
    """
    with torch.no_grad():
        out = model.generate(
            **inputs,
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            return_dict_in_generate=True,
            output_logits=True,
        )
    return out.sequences[:, inputs["input_ids"].shape[1] :], torch.stack(out.logits, dim=1)

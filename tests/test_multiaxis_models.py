"""posenc's multi-axis rotary inside transformers' Qwen2-VL and Qwen3-VL: M-RoPE as the models ship it.

Each family's tiny random-initialised ``*ForConditionalGeneration`` (text: 2 layers, 4 query and 2 key/value heads
of 16, so 8 rotated pairs; vision: a small tower with patches of 2 and a 2 x 2 merge; transformers 5.23.0) runs
twice on the same inputs: as transformers ships it, and with its text model's rotary replaced by
:class:`posenc.nn.MultiAxisRotaryEmbedding` built from :func:`posenc.mrope_frequencies` (Qwen2-VL: ``"chunked"``,
``mrope_section=[2, 3, 3]``; Qwen3-VL: ``"interleaved"``, ``[3, 3, 2]``), halves layout. The vision tower's own
(axial) rotary is left as it is. The weights are drawn with ``initializer_range=0.05`` (transformers' default is
0.02): with 0.02 the tiny Qwen2-VL attends almost uniformly, and a wrong section split moved its logits by only
``1.8e-4``, 18 times the tolerance; with 0.05 the deliberate bugs below move them by ``7e-3`` or more.

*The swap.* The text model computes cos and sin once per call in ``language_model.rotary_emb(hidden_states,
position_ids)``, with ``position_ids`` of shape ``(3, batch, seq)`` (time, height, width), and each attention layer
calls its modeling module's ``apply_rotary_pos_emb(q, k, cos, sin)``. :class:`PassCoordinates` stands in for the
first and hands on the coordinates ``position_ids.permute(1, 2, 0)[:, None]``, ``(batch, 1, seq, 3)``, in place of
cos; the patched second rotates q and k with posenc. Masks, the key/value cache, the vision tower, the 3-D ids
(``get_rope_index``, ``rope_deltas``) and ``generate()`` are transformers' own.

*Inputs.* (a) Text only: the left-padded batch of tests/rotary_swap.py, prefill then cached decoding. Its three
ids are equal, so M-RoPE is 1-D RoPE there and the frequency assignment is invisible (shown below). (b) A prompt
holding a tiny image (a 4 x 6 patch grid, merged to 2 x 3 tokens) in each row of a left-padded batch, with
``pixel_values`` and ``image_grid_thw``: the image tokens' time, height and width ids differ (the test checks that
posenc saw such tokens), and the text after the image continues at the largest id plus one.

*Tolerance.* ``rotary_swap.TOLERANCE``, ``atol = rtol = 1e-5``: transformers forms ``position * inv_freq``, its
cosine and sine in float32 (angles off by up to ``position * 2**-24`` rad, below ``1e-6`` at the ids used here,
all below 20), posenc in float64, rounded once; q and k then differ by about ``1e-6`` relative, and two float32
layers carry that to logits of magnitude below 2 (measured: at most ``6.6e-7`` apart, a few float32 roundings of
such logits). Greedy tokens must be identical, with each step's two best logits more than ``1e-3`` apart
(measured: ``2.5e-2`` at least) so that rounding could not flip one. Each comparison is shown to see deliberate
bugs by more than 100 times the tolerance (measured: ``7.4e-3`` to ``1.4``): the other frequency assignment, the
sections reversed, height and width swapped, a padded row's decoded token one position late.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
import torch
from rotary_swap import (
    HEAD_DIM,
    PAD,
    TINY_DECODER,
    TOLERANCE,
    decode,
    greedy_generate,
    largest_difference,
    left_padded_batch,
)
from torch import nn

from posenc import mrope_frequencies
from posenc.nn import MultiAxisRotaryEmbedding

pytestmark = pytest.mark.usefixtures("quiet_transformers")

VIDEO, VISION_START, IMAGE, VISION_END = 97, 98, 99, 100  # special tokens at the top of the tiny vocabulary
GRID = (1, 4, 6)  # one image of 4 x 6 patches (time, height, width), merged 2 x 2 into 2 x 3 tokens
INIT = 0.05  # initializer_range (transformers' default: 0.02), see the module docstring
IMAGE_TOKENS = GRID[1] * GRID[2] // 4
PATCH_FEATURES = 3 * 2 * 2 * 2  # channels * temporal_patch_size * patch_size**2

# family: model class, modeling module (its apply_rotary_pos_emb is patched), mrope_section and assignment as the
# family's rotary uses them (the interleaved counts of 8 pairs are (3, 3, 2)), and the vision config
FAMILIES = {
    "qwen2_vl": dict(
        config="Qwen2VLConfig",
        model="Qwen2VLForConditionalGeneration",
        modeling="transformers.models.qwen2_vl.modeling_qwen2_vl",
        section=[2, 3, 3],
        assignment="chunked",
        vision=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2),
    ),
    "qwen3_vl": dict(
        config="Qwen3VLConfig",
        model="Qwen3VLForConditionalGeneration",
        modeling="transformers.models.qwen3_vl.modeling_qwen3_vl",
        section=[3, 3, 2],
        assignment="interleaved",
        vision=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=64,
            num_heads=2,
            out_hidden_size=64,
            num_position_embeddings=16,
            deepstack_visual_indexes=[0],
        ),
    ),
}


def tiny(family: str):
    """The family's tiny random-initialised vision-language model, in eval mode (the same weights on every call)."""
    import transformers

    spec = FAMILIES[family]
    text = dict(
        **TINY_DECODER,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": spec["section"]},
        pad_token_id=PAD,
        bos_token_id=None,
        eos_token_id=None,
        initializer_range=INIT,
    )
    vision = dict(spec["vision"], patch_size=2, spatial_merge_size=2, temporal_patch_size=2, in_channels=3)
    config = getattr(transformers, spec["config"])(
        text_config=text,
        vision_config=vision,
        image_token_id=IMAGE,
        video_token_id=VIDEO,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
        pad_token_id=PAD,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
        initializer_range=INIT,
    )
    torch.manual_seed(0)
    return getattr(transformers, spec["model"])(config).eval()


class PassCoordinates(nn.Module):
    """Stands in for the text model's ``rotary_emb``: hands on each token's (time, height, width) instead of cos, sin.

    ``corrupt`` maps the ``(batch, 1, seq, 3)`` coordinates before they are handed on: a deliberate bug, to show the
    comparison sees it. ``seen`` keeps the coordinates of every call.
    """

    def __init__(self, corrupt: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__()
        self.corrupt = corrupt or (lambda coordinates: coordinates)
        self.seen: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> tuple[torch.Tensor, None]:
        coordinates = position_ids.expand(3, -1, -1).permute(1, 2, 0)[:, None]
        self.seen.append(coordinates)
        return self.corrupt(coordinates), None


def with_posenc(monkeypatch, family: str, model, frequencies=None, corrupt=None):
    """``model`` with posenc's M-RoPE: built from the text config's ``rope_parameters`` unless ``frequencies`` given.

    The config does not say which assignment its rotary uses: that is the family's (``FAMILIES``).
    """
    spec = FAMILIES[family]
    if frequencies is None:
        parameters = model.config.text_config.rope_parameters
        frequencies = mrope_frequencies(
            HEAD_DIM, parameters["mrope_section"], assignment=spec["assignment"], base=parameters["rope_theta"]
        )
    rope = MultiAxisRotaryEmbedding(frequencies, layout="halves")

    def apply_posenc(q, k, coordinates, unused, unsqueeze_dim=1):
        return rope(q, coordinates), rope(k, coordinates)

    monkeypatch.setattr(importlib.import_module(spec["modeling"]), "apply_rotary_pos_emb", apply_posenc)
    model.model.language_model.rotary_emb = PassCoordinates(corrupt)
    return model


def image_batch():
    """Two prompts holding one image each, ``8 + IMAGE_TOKENS`` tokens, the second left-padded by 2; pixel values.

    ``(input_ids, attention_mask, mm_token_type_ids, pixel_values, image_grid_thw)`` as a processor gives them:
    text, vision start, ``IMAGE_TOKENS`` placeholders, vision end, text.
    """
    generator = torch.Generator().manual_seed(2)
    input_ids = torch.randint(1, VIDEO, (2, 8 + IMAGE_TOKENS), generator=generator)
    input_ids[:, 3] = VISION_START
    input_ids[:, 4 : 4 + IMAGE_TOKENS] = IMAGE
    input_ids[:, 4 + IMAGE_TOKENS] = VISION_END
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :2] = 0
    input_ids[1, :2] = PAD
    grid = torch.tensor([GRID, GRID])
    pixel_values = torch.randn(2 * GRID[0] * GRID[1] * GRID[2], PATCH_FEATURES, generator=generator)
    return input_ids, attention_mask, (input_ids == IMAGE).int(), pixel_values, grid


def decode_image_prompt(model, input_ids, attention_mask, mm_token_type_ids, pixel_values, grid, steps=3):
    """Prefill with the image, then ``steps`` greedy tokens through a DynamicCache: the logits of every call.

    The 3-D ids are transformers' own (``get_rope_index``), passed to both models alike; each decoded token is a
    text token, one past the row's last id on all three axes.
    """
    from transformers import DynamicCache

    position_ids, _ = model.model.get_rope_index(
        input_ids, mm_token_type_ids, image_grid_thw=grid, attention_mask=attention_mask
    )
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            pixel_values=pixel_values,
            image_grid_thw=grid,
            mm_token_type_ids=mm_token_type_ids,
            past_key_values=cache,
        )
        logits = [out.logits]
        for _ in range(steps):
            token = out.logits[:, -1:].argmax(-1)
            attention_mask = torch.cat([attention_mask, torch.ones_like(token)], dim=1)
            position_ids = position_ids[..., -1:] + 1
            out = model(
                input_ids=token, attention_mask=attention_mask, position_ids=position_ids, past_key_values=cache
            )
            logits.append(out.logits)
    return logits


def assert_same_logits(ours, theirs, real):
    """Prefill (the padding's logits are noise, left out) and every decoding step within the tolerance."""
    torch.testing.assert_close(ours[0][real], theirs[0][real], **TOLERANCE, msg=lambda m: f"prefill: {m}")
    for step, (mine, their) in enumerate(zip(ours[1:], theirs[1:]), start=1):
        torch.testing.assert_close(mine, their, **TOLERANCE, msg=lambda m, step=step: f"decoding step {step}: {m}")


def distinct_axes(rope: PassCoordinates) -> int:
    """How many tokens posenc rotated with time, height and width ids not all equal."""
    return sum(int((seen != seen[..., :1]).any(-1).sum()) for seen in rope.seen)


@pytest.mark.parametrize("family", FAMILIES)
def test_text_only_left_padded_batch_with_cache_decoding_matches_transformers(monkeypatch, family):
    """Text only, (batch, seq) position_ids expanded to three equal axes, 4 cached steps: the same logits."""
    batch = left_padded_batch()
    theirs = decode(tiny(family), *batch, steps=4)
    ours = decode(with_posenc(monkeypatch, family, tiny(family)), *batch, steps=4)
    assert_same_logits(ours, theirs, batch[1].bool())


@pytest.mark.parametrize("family", FAMILIES)
def test_image_prompt_with_cache_decoding_matches_transformers(monkeypatch, family):
    """An image in each row of a left-padded batch, 3-D ids from get_rope_index, 3 cached steps: the same logits."""
    batch = image_batch()
    theirs = decode_image_prompt(tiny(family), *batch)
    model = with_posenc(monkeypatch, family, tiny(family))
    ours = decode_image_prompt(model, *batch)
    assert distinct_axes(model.model.language_model.rotary_emb) == 2 * IMAGE_TOKENS - 2  # all but one per row
    assert_same_logits(ours, theirs, batch[1].bool())


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_with_an_image_gives_transformers_tokens(monkeypatch, family):
    """generate() runs the vision tower, computes the 3-D ids and rope_deltas itself: identical greedy tokens."""
    input_ids, attention_mask, mm_token_type_ids, pixel_values, grid = image_batch()
    inputs = dict(
        input_ids=input_ids,
        attention_mask=attention_mask,
        mm_token_type_ids=mm_token_type_ids,
        pixel_values=pixel_values,
        image_grid_thw=grid,
    )
    their_tokens, their_logits = greedy_generate(tiny(family), 4, **inputs)
    model = with_posenc(monkeypatch, family, tiny(family))
    our_tokens, our_logits = greedy_generate(model, 4, **inputs)
    assert distinct_axes(model.model.language_model.rotary_emb) == 2 * IMAGE_TOKENS - 2
    top2 = their_logits.topk(2, dim=-1).values
    assert float((top2[..., 0] - top2[..., 1]).min()) > 1e-3, "a near tie: rounding could flip a token"
    assert our_tokens.tolist() == their_tokens.tolist()
    torch.testing.assert_close(our_logits, their_logits, **TOLERANCE)


def swap_height_and_width(coordinates):
    """A deliberate bug: each token's height and width ids exchanged."""
    return coordinates[..., [0, 2, 1]]


# family: deliberate bugs, as (frequency matrix, corrupt); the first two are the other assignment and the sections
# reversed, i.e. the frequencies of the wrong family or config
BUGS = {
    "qwen2_vl": {
        "interleaved": (mrope_frequencies(HEAD_DIM, [3, 3, 2], assignment="interleaved"), None),
        "sections reversed": (mrope_frequencies(HEAD_DIM, [3, 3, 2]), None),
        "height and width swapped": (None, swap_height_and_width),
    },
    "qwen3_vl": {
        "chunked": (mrope_frequencies(HEAD_DIM, [3, 3, 2]), None),
        "height and width swapped": (None, swap_height_and_width),
    },
}


@pytest.mark.parametrize(("family", "bug"), [(family, bug) for family in BUGS for bug in BUGS[family]])
def test_only_the_image_prompt_sees_a_wrong_frequency_assignment(monkeypatch, family, bug):
    """A wrong assignment of pairs to axes: text alone cannot see it, the image prompt moves far beyond tolerance.

    On text the three ids are equal, which makes M-RoPE 1-D RoPE whatever the assignment.
    """
    frequencies, corrupt = BUGS[family][bug]
    text, image = left_padded_batch(), image_batch()
    theirs_text = decode(tiny(family), *text, steps=1)  # both before the patch, which applies to the whole family
    theirs_image = decode_image_prompt(tiny(family), *image, steps=1)
    model = with_posenc(monkeypatch, family, tiny(family), frequencies, corrupt)
    assert_same_logits(decode(model, *text, steps=1), theirs_text, text[1].bool())
    ours_image = decode_image_prompt(model, *image, steps=1)
    assert largest_difference(ours_image, theirs_image, image[1].bool()) > 100 * TOLERANCE["atol"]


def padded_row_one_late(coordinates):
    """A deliberate bug: the padded row's decoded tokens one position later on every axis."""
    if coordinates.shape[-2] != 1:
        return coordinates
    return coordinates + torch.tensor([0, 1]).view(2, 1, 1, 1)


def test_text_only_comparison_sees_a_padded_row_decoded_one_position_late(monkeypatch):
    """The text-only swap is live: the padded row's decoded token one position late moves its logits."""
    batch = left_padded_batch()
    theirs = decode(tiny("qwen2_vl"), *batch, steps=2)
    ours = decode(with_posenc(monkeypatch, "qwen2_vl", tiny("qwen2_vl"), corrupt=padded_row_one_late), *batch, steps=2)
    torch.testing.assert_close(ours[1][0], theirs[1][0], **TOLERANCE)  # the unpadded row is untouched
    assert float((ours[1][1] - theirs[1][1]).abs().max()) > 100 * TOLERANCE["atol"]

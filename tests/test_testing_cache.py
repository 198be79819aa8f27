"""posenc.testing.assert_rerotated_keys_accurate: correct evicting caches pass, faulty ones fail with the reason.

The faulty caches reproduce, in a few lines written here, the mechanisms of the threads chapter 10's sixteenth family
cites: a new key left at its position in the stream (huggingface/transformers#35350), keys never shifted after an
eviction (NVIDIA/kvpress#31's review of StreamingLLMPress), and keys re-rotated in place at every eviction, whose
rounding accumulates (vllm-project/vllm#57672).
"""

import numpy as np
import pytest
import torch

import posenc
from posenc.nn import RotaryEmbedding
from posenc.testing import assert_rerotated_keys_accurate

SMALL = dict(head_dim=32, n_sink=4, window=124, n_evictions=160)


def raw_cache(dtype=torch.float32, n_sink=4, window=124, head_dim=32, layout="interleaved", base=10000.0):
    """Keys stored unrotated (in ``dtype``) and rotated once, to their places, when read: StreamingLLM's way."""
    rope = RotaryEmbedding(head_dim, base=base, layout=layout)

    def make():
        kept = []

        def push(key, position):
            kept.append(torch.from_numpy(key).to(dtype))
            if len(kept) > n_sink + window:
                del kept[n_sink]
            return rope(torch.stack(kept))

        return push

    return make


def rerotating_cache(dtype=torch.float32, n_sink=4, window=124, head_dim=32, new_at=None, shift=True):
    """Keys stored rotated; at each eviction every key after the evicted one is rotated back one step, in place.

    ``new_at="stream"`` rotates a new key at its position in the stream instead of its place (transformers#35350);
    ``shift=False`` never moves the keys (a window without re-rotation).
    """
    rope = RotaryEmbedding(head_dim)

    def make():
        state = {"keys": torch.zeros(0, head_dim, dtype=dtype)}
        back = torch.full((window - 1,), -1.0)  # one tensor for every shift: the rotary module reuses its table

        def push(key, position):
            keys = state["keys"]
            if keys.shape[0] == n_sink + window:
                after = keys[n_sink + 1 :]
                if shift:
                    after = rope(after, positions=back)
                keys = torch.cat([keys[:n_sink], after])
            place = position if new_at == "stream" or not shift else keys.shape[0]
            new = rope(torch.from_numpy(key).to(dtype)[None], offset=place)
            state["keys"] = torch.cat([keys, new])
            return state["keys"]

        return push

    return make


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_a_cache_of_unrotated_keys_passes_in_every_dtype(dtype):
    assert_rerotated_keys_accurate(raw_cache(dtype), **SMALL)


@pytest.mark.parametrize(("layout", "base"), [("halves", 10000.0), ("interleaved", 500000.0), ("halves", 1e6)])
def test_the_layout_and_base_are_the_caches(layout, base):
    assert_rerotated_keys_accurate(raw_cache(layout=layout, base=base), **SMALL, layout=layout, base=base)
    with pytest.raises(AssertionError, match="before any eviction|rotated to position"):
        other = "interleaved" if layout == "halves" else "halves"
        assert_rerotated_keys_accurate(raw_cache(layout=layout, base=base), **SMALL, layout=other, base=base)


def test_a_numpy_cache_with_no_sinks_passes():
    def make():
        kept = []

        def push(key, position):
            kept.append(key)
            if len(kept) > 30:
                del kept[0]
            return posenc.rotate(np.array(kept), len(kept))

        return push

    assert_rerotated_keys_accurate(make, n_sink=0, window=30, n_evictions=50)


def test_float64_rerotation_is_not_called_drift():
    # a correction on a correction rounds in float64 too, but stays orders of magnitude below DRIFT_FLOOR
    assert_rerotated_keys_accurate(rerotating_cache(torch.float64), **SMALL)


@pytest.mark.parametrize(("dtype", "at_least"), [(torch.float32, 20.0), (torch.bfloat16, 20.0)])
def test_rerotating_in_place_drifts_and_the_check_says_so(dtype, at_least):
    with pytest.raises(AssertionError, match="after 160 evictions") as failure:
        assert_rerotated_keys_accurate(rerotating_cache(dtype), **SMALL)
    message = str(failure.value)
    assert "grows with every shift" in message and "shifted up to 123 times" in message
    ratio = float(message.split("first eviction (")[1].split(" times")[0])
    assert ratio > at_least, message


def test_a_new_key_at_its_position_in_the_stream_is_named():
    with pytest.raises(AssertionError, match="first eviction: row 127 holds token 128 rotated to position 128") as e:
        assert_rerotated_keys_accurate(rerotating_cache(new_at="stream"), **SMALL)
    assert "transformers#35350" in str(e.value)


def test_keys_never_shifted_are_named():
    with pytest.raises(AssertionError, match="row 4 holds token 5 rotated to position 5, not to its place 4"):
        assert_rerotated_keys_accurate(rerotating_cache(shift=False), **SMALL)


def test_a_cache_that_evicts_the_sinks_is_named():
    def make():
        kept = []

        def push(key, position):
            kept.append(key)
            if len(kept) > 128:
                del kept[0]  # the oldest token, a sink
            return posenc.rotate(np.array(kept), len(kept))

        return push

    with pytest.raises(AssertionError, match="row 0 holds the key of token 1, not of token 0"):
        assert_rerotated_keys_accurate(make, **SMALL)


def test_a_wrong_shape_and_a_raising_cache_fail():
    def make_flat():
        return lambda key, position: key

    with pytest.raises(AssertionError, match=r"returned shape \(32,\), expected \(128, 32\)"):
        assert_rerotated_keys_accurate(make_flat, **SMALL)

    def make_broken():
        def push(key, position):
            raise RuntimeError("cache full")

        return push

    with pytest.raises(AssertionError, match="push\\(key, 0\\) raised RuntimeError: cache full"):
        assert_rerotated_keys_accurate(make_broken, **SMALL)
    with pytest.raises(AssertionError, match="not a callable"):
        assert_rerotated_keys_accurate(lambda: 3, **SMALL)

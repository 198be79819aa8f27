"""T5 buckets: exact near the query, logarithmic further out, saturating at max_distance, identical to
transformers' ``T5Attention._relative_position_bucket``; the module equals transformers' ``compute_bias``."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from transformers import T5Config
from transformers.models.t5.modeling_t5 import T5Attention

import posenc
from posenc import t5_relative_bucket
from posenc.nn import T5RelativeBias

transformers_bucket = T5Attention._relative_position_bucket  # the static method, called with torch tensors


@st.composite
def configurations(draw):
    """(bidirectional, num_buckets, max_distance) that the function accepts."""
    bidirectional = draw(st.booleans())
    if bidirectional:
        num_buckets = 2 * draw(st.integers(2, 64))
        max_exact = num_buckets // 4
    else:
        num_buckets = draw(st.integers(2, 128))
        max_exact = num_buckets // 2
    max_distance = draw(st.integers(max_exact + 1, max(max_exact + 1, 4 * num_buckets + 600)))
    return bidirectional, num_buckets, max_distance


def side_and_exact(bidirectional, num_buckets):
    side = num_buckets // 2 if bidirectional else num_buckets
    return side, side // 2


# --- properties ----------------------------------------------------------------------------------------------


@given(configurations())
def test_buckets_are_exact_below_max_exact(config):
    """Distances below num_buckets/4 (bidirectional) or num_buckets/2 (unidirectional) get a bucket each."""
    bidirectional, num_buckets, max_distance = config
    side, max_exact = side_and_exact(bidirectional, num_buckets)
    n = np.arange(max_exact)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    np.testing.assert_array_equal(t5_relative_bucket(-n, **kw), n)  # keys before the query
    if bidirectional:
        np.testing.assert_array_equal(t5_relative_bucket(n[1:], **kw), side + n[1:])  # keys after
    else:
        np.testing.assert_array_equal(t5_relative_bucket(n, **kw), 0)  # after the query: all in bucket 0


@given(configurations())
def test_buckets_never_decrease_with_distance_and_saturate_at_max_distance(config):
    bidirectional, num_buckets, max_distance = config
    side, _ = side_and_exact(bidirectional, num_buckets)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    n = np.arange(max_distance + 50)
    before = t5_relative_bucket(-n, **kw)
    assert np.all(np.diff(before) >= 0)
    assert np.all(before[max_distance:] == side - 1)
    assert np.all(before[:max_distance] <= side - 1)
    if bidirectional:
        after = t5_relative_bucket(n[1:], **kw)
        assert np.all(np.diff(after) >= 0)
        assert np.all(after[max_distance - 1 :] == num_buckets - 1)


@given(configurations(), st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=30))
def test_buckets_stay_in_range_and_split_by_sign(config, relative):
    bidirectional, num_buckets, max_distance = config
    side, _ = side_and_exact(bidirectional, num_buckets)
    buckets = t5_relative_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert buckets.dtype == np.int64 and buckets.shape == (len(relative),)
    assert np.all((buckets >= 0) & (buckets < num_buckets))
    relative = np.array(relative)
    if bidirectional:
        assert np.all((buckets >= side) == (relative > 0))
    else:
        assert np.all(buckets[relative >= 0] == 0)


def test_default_buckets_use_31_of_the_32():
    """With the defaults, 0-15 serve keys before (or at) the query and 17-31 keys after it. Bucket 16 would be a
    key after the query at distance 0, which cannot happen: T5 never uses it."""
    buckets = t5_relative_bucket(np.arange(-300, 301))
    assert set(buckets.tolist()) == set(range(32)) - {16}
    assert 16 not in transformers_bucket(torch.arange(-300, 301)).tolist()


def test_scalars_arrays_and_huge_integers():
    assert t5_relative_bucket(-3).shape == () and int(t5_relative_bucket(-3)) == 3
    assert t5_relative_bucket(np.int8(-100)).dtype == np.int64
    # beyond int64 and at its ends: clipped, never overflowing
    assert t5_relative_bucket(10**30) == 31 and t5_relative_bucket(-(10**30)) == 15
    extremes = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max])
    np.testing.assert_array_equal(t5_relative_bucket(extremes), [15, 31])
    np.testing.assert_array_equal(t5_relative_bucket(np.array([2**64 - 1], dtype=np.uint64)), [31])
    assert t5_relative_bucket(np.zeros((2, 0, 3), dtype=np.int32)).shape == (2, 0, 3)


def test_the_logarithm_is_taken_in_float32_as_in_t5():
    """With 18 buckets and max_distance 128, distance 64 sits exactly on a bucket boundary: log(16) / log(32) * 5
    is 4 in exact arithmetic, so bucket 8; float64 gives 3.9999999999999996 (bucket 7), float32 gives 4.0. T5's
    code works in float32 and says 8; posenc follows it (a float64 implementation fails this test)."""
    assert math.floor(math.log(64 / 4) / math.log(128 / 4) * 5) == 3  # float64 misses the boundary
    assert int(t5_relative_bucket(-64, num_buckets=18, max_distance=128)) == 8
    assert int(transformers_bucket(torch.tensor([-64]), num_buckets=18, max_distance=128)) == 8


# --- parity with transformers --------------------------------------------------------------------------------


@given(configurations(), st.lists(st.integers(-5000, 5000), min_size=1, max_size=200))
def test_identical_to_transformers_for_random_inputs(config, relative):
    bidirectional, num_buckets, max_distance = config
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    expected = transformers_bucket(torch.tensor(relative), **kw).numpy()
    np.testing.assert_array_equal(t5_relative_bucket(relative, **kw), expected)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_identical_to_transformers_on_every_distance_of_a_grid_of_configurations(bidirectional):
    """Every relative position in [-(D + 3), D + 3] for every num_buckets up to 66 and every max_distance up to
    160 (plus a few large ones): bucket boundaries, where float32 rounding decides, are all exercised."""
    mismatches = []
    for num_buckets in range(4 if bidirectional else 2, 67, 2 if bidirectional else 1):
        max_exact = num_buckets // 4 if bidirectional else num_buckets // 2
        for max_distance in [*range(max_exact + 1, 161), 512, 1000, 4096]:
            relative = torch.arange(-max_distance - 3, max_distance + 4)
            kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
            if not np.array_equal(t5_relative_bucket(relative.numpy(), **kw), transformers_bucket(relative, **kw)):
                mismatches.append((num_buckets, max_distance))
    assert mismatches == []


@pytest.mark.parametrize("bidirectional", [True, False])
def test_identical_to_transformers_far_beyond_max_distance(bidirectional):
    relative = torch.tensor([-(2**40), -(10**9), -100_000, -129, -128, -127, 127, 128, 129, 100_000, 10**9, 2**40])
    kw = dict(bidirectional=bidirectional, num_buckets=32, max_distance=128)
    np.testing.assert_array_equal(t5_relative_bucket(relative.numpy(), **kw), transformers_bucket(relative, **kw))


# --- the module -------------------------------------------------------------------------------------------------


def t5_attention(n_heads, bidirectional, num_buckets, max_distance):
    config = T5Config(
        d_model=8 * n_heads,
        d_kv=8,
        num_heads=n_heads,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        is_decoder=not bidirectional,
    )
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("q_len, k_len", [(1, 1), (7, 7), (300, 300), (1, 300), (5, 260), (0, 4)])
def test_module_equals_transformers_compute_bias(bidirectional, q_len, k_len):
    """Same table, same buckets: T5's bias for queries after a cache of k_len - q_len tokens, exactly."""
    torch.manual_seed(0)
    reference = t5_attention(4, bidirectional, 32, 128)
    module = T5RelativeBias(4, bidirectional=bidirectional)
    module.load_state_dict(reference.relative_attention_bias.state_dict(prefix="relative_attention_bias."))
    expected = reference.compute_bias(q_len, k_len, past_seen_tokens=k_len - q_len)[0]
    got = module(q_len, k_len)
    assert got.shape == (4, q_len, k_len)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@given(configurations(), st.integers(1, 6), st.integers(0, 30), st.integers(0, 30))
def test_module_reads_its_table_at_the_numpy_buckets(config, n_heads, q_len, extra_keys):
    bidirectional, num_buckets, max_distance = config
    k_len = q_len + extra_keys
    module = T5RelativeBias(n_heads, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    relative = np.arange(k_len)[None, :] - (np.arange(q_len) + extra_keys)[:, None]
    buckets = t5_relative_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    np.testing.assert_array_equal(module.buckets(q_len, k_len).numpy(), buckets)
    expected = module.relative_attention_bias.weight.detach().numpy()[buckets].transpose(2, 0, 1)
    np.testing.assert_array_equal(module(q_len, k_len).detach().numpy(), expected)


def test_module_bias_depends_on_relative_position_only():
    """Toeplitz: the bias of (i, j) equals that of (i + 1, j + 1) for every head."""
    bias = T5RelativeBias(3)(40)
    torch.testing.assert_close(bias[:, 1:, 1:], bias[:, :-1, :-1], rtol=0, atol=0)


def test_module_learns():
    module = T5RelativeBias(2, num_buckets=8, max_distance=16)
    module(5, 9).sum().backward()
    assert module.relative_attention_bias.weight.grad is not None
    assert [name for name, _ in module.named_parameters()] == ["relative_attention_bias.weight"]


def test_the_package_exports_the_function():
    assert posenc.t5_relative_bucket is t5_relative_bucket

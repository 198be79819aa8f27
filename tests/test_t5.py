"""T5 buckets: exact near the query, logarithmic further out, saturating at max_distance; the exact value of
the formula at every distance, which transformers' float32 ``T5Attention._relative_position_bucket`` matches
except on bucket boundaries, where its answer depends on the processor; the module equals ``compute_bias``."""

import math
from fractions import Fraction

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
from posenc.testing import t5_float32_boundaries

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


def exact_bucket(distance, side, max_exact, max_distance):
    """The bucket of one distance before the query by T5's formula in exact rational arithmetic: the largest
    k <= side - max_exact with (n / E) ** (B - E) >= (D / E) ** k, clamped to the last bucket (brute force)."""
    n = min(distance, max_distance)
    if n < max_exact:
        return n
    n_log = side - max_exact
    k = 0
    while k < n_log and Fraction(n, max_exact) ** n_log >= Fraction(max_distance, max_exact) ** (k + 1):
        k += 1
    return min(side - 1, max_exact + k)


@given(configurations(), st.lists(st.integers(0, 1000), min_size=1, max_size=20))
def test_buckets_are_the_exact_value_of_the_formula(config, distances):
    bidirectional, num_buckets, max_distance = config
    side, max_exact = side_and_exact(bidirectional, num_buckets)
    kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    want = [exact_bucket(n, side, max_exact, max_distance) for n in distances]
    np.testing.assert_array_equal(t5_relative_bucket(-np.array(distances), **kw), want)
    if bidirectional:
        after = [side + w if n > 0 else 0 for n, w in zip(distances, want)]
        np.testing.assert_array_equal(t5_relative_bucket(np.array(distances), **kw), after)


@pytest.mark.parametrize(
    "num_buckets, max_distance, distance, log_term",
    [(34, 27, 12, 3), (34, 27, 18, 6), (18, 128, 64, 4), (32, 128, 16, 2), (32, 128, 32, 4), (32, 128, 64, 6)],
)
def test_exact_on_the_boundaries_where_float32_may_go_either_way(num_buckets, max_distance, distance, log_term):
    """The log term is an integer at these distances (12/8 = 3/2 and 27/8 = (3/2)**3; 16/8 = 2 and 128/8 = 2**4),
    so the bucket is max_exact + log_term exactly, on both sides; t5_float32_boundaries flags each."""
    side, max_exact = side_and_exact(True, num_buckets)
    assert exact_bucket(distance, side, max_exact, max_distance) == max_exact + log_term
    kw = dict(num_buckets=num_buckets, max_distance=max_distance)
    np.testing.assert_array_equal(
        t5_relative_bucket([-distance, distance], **kw), np.array([0, side]) + max_exact + log_term
    )
    assert t5_float32_boundaries([-distance, distance], **kw).all()
    assert not t5_float32_boundaries([-(distance - 1), distance + 1], **kw).any()


def test_the_bucket_boundaries_are_computed_exactly_for_large_exponents():
    """With 300 buckets a side has 150 logarithmic buckets: the boundaries compare powers with exponents above 64,
    which the implementation settles with its decimal branch; brute force in Fractions agrees at every distance."""
    side, max_exact = side_and_exact(False, 300)
    n = np.arange(0, 700)
    want = [exact_bucket(int(d), side, max_exact, 650) for d in n]
    np.testing.assert_array_equal(t5_relative_bucket(-n, bidirectional=False, num_buckets=300, max_distance=650), want)


# --- parity with transformers, which evaluates the formula in float32 --------------------------------------------

GRID = [
    (bidirectional, num_buckets, max_distance)
    for bidirectional in (True, False)
    for num_buckets in range(4 if bidirectional else 2, 67, 2 if bidirectional else 1)
    for max_distance in [*range(side_and_exact(bidirectional, num_buckets)[1] + 1, 161), 512, 1000, 4096]
]
"""Every num_buckets up to 66 and max_distance up to 160, plus a few large ones: 14,450 configurations."""


def grid_relative_positions(max_distance):
    return np.arange(-max_distance - 3, max_distance + 4)


def assert_agrees_with_t5_float32(float32_fn, configurations, extra=()):
    """float32_fn gives posenc's exact bucket at every relative position in [-(D + 3), D + 3] (and ``extra``),
    except where t5_float32_boundaries flags the position, where it may be one bucket off."""
    for bidirectional, num_buckets, max_distance in configurations:
        relative = np.concatenate([grid_relative_positions(max_distance), extra]).astype(np.int64)
        kw = dict(bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
        got = np.asarray(float32_fn(relative, **kw))
        want = t5_relative_bucket(relative, **kw)
        allowed = t5_float32_boundaries(relative, **kw) & (np.abs(got - want) == 1)
        wrong = (got != want) & ~allowed
        assert not wrong.any(), (
            f"{kw}: relative positions {relative[wrong][:5].tolist()} get {got[wrong][:5].tolist()}, "
            f"exact {want[wrong][:5].tolist()}, not on a float32 bucket boundary"
        )


def transformers_buckets(relative, **kw):
    return transformers_bucket(torch.from_numpy(relative), **kw).numpy()


def float32_buckets(relative, *, bidirectional, num_buckets, max_distance, clamp=True, max_exact_shift=0):
    """T5's formula in float32 (NumPy), with two bugs to plant: no clamp, and max_exact one too large."""
    side = num_buckets // 2 if bidirectional else num_buckets
    max_exact = side // 2 + max_exact_shift
    buckets = (relative > 0) * side if bidirectional else np.zeros_like(relative)
    distance = np.abs(relative) if bidirectional else -np.minimum(relative, 0)
    ratio = np.maximum(distance, 1).astype(np.float32) / np.float32(max_exact)
    with np.errstate(divide="ignore", invalid="ignore"):  # the planted max_exact can equal max_distance
        term = np.log(ratio) / np.float32(math.log(max_distance / max_exact)) * np.float32(side - max_exact)
        large = max_exact + term.astype(np.int64)
    if clamp:
        large = np.minimum(large, side - 1)
    return buckets + np.where(distance < max_exact, distance, large)


def transformers_on_grid():
    """transformers' buckets for every configuration of GRID at the positions the parity check visits."""
    return {
        (bidirectional, num_buckets, max_distance): transformers_buckets(
            grid_relative_positions(max_distance),
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )
        for bidirectional, num_buckets, max_distance in GRID
    }


def looked_up(buckets_by_configuration):
    """A bucket function that returns precomputed buckets (the parity check asks for exactly those positions)."""
    return lambda relative, **kw: buckets_by_configuration[kw["bidirectional"], kw["num_buckets"], kw["max_distance"]]


@pytest.fixture(scope="module")
def transformers_as_is():
    """transformers on this processor's float32 logarithm, computed once for the tests below."""
    return transformers_on_grid()


def test_transformers_agrees_except_on_float32_boundaries(transformers_as_is):
    assert_agrees_with_t5_float32(looked_up(transformers_as_is), GRID)


@pytest.mark.parametrize("ulps", [1, -1])
def test_transformers_agrees_with_its_logarithm_one_unit_off(monkeypatch, transformers_as_is, ulps):
    """What another processor does: torch.log one unit in the last place higher (or lower) everywhere. Some
    buckets change, and the parity check still passes."""
    log = torch.log
    direction = math.inf if ulps > 0 else -math.inf
    monkeypatch.setattr(torch, "log", lambda x: torch.nextafter(log(x), torch.full_like(x, direction)))
    perturbed = transformers_on_grid()
    monkeypatch.undo()
    assert any(not np.array_equal(perturbed[c], transformers_as_is[c]) for c in GRID)
    assert_agrees_with_t5_float32(looked_up(perturbed), GRID)


def test_a_float32_implementation_agrees_and_planted_bugs_do_not():
    assert_agrees_with_t5_float32(float32_buckets, GRID)
    without_clamp = lambda r, **kw: float32_buckets(r, clamp=False, **kw)  # noqa: E731
    with pytest.raises(AssertionError, match="not on a float32 bucket boundary"):
        assert_agrees_with_t5_float32(without_clamp, GRID)
    off_by_one = lambda r, **kw: float32_buckets(r, max_exact_shift=1, **kw)  # noqa: E731
    with pytest.raises(AssertionError, match="not on a float32 bucket boundary"):
        assert_agrees_with_t5_float32(off_by_one, GRID)


@given(configurations(), st.lists(st.integers(-5000, 5000), min_size=1, max_size=200))
def test_transformers_agrees_for_random_inputs(config, relative):
    assert_agrees_with_t5_float32(transformers_buckets, [config], extra=relative)


def test_transformers_agrees_far_beyond_max_distance():
    far = [-(2**40), -(10**9), -100_000, 100_000, 10**9, 2**40]
    assert_agrees_with_t5_float32(transformers_buckets, [(True, 32, 128), (False, 32, 128)], extra=far)


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
    # The same table entries, except where transformers' float32 bucket may be the neighbour (distances 16, 32
    # and 64 when bidirectional): there the module reads the exact bucket, checked in the next test.
    relative = np.arange(k_len)[None, :] - (np.arange(q_len) + k_len - q_len)[:, None]
    same = ~torch.from_numpy(t5_float32_boundaries(relative, bidirectional=bidirectional))
    torch.testing.assert_close(got[:, same], expected[:, same], rtol=0, atol=0)


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


@given(configurations())
def test_module_buckets_equal_the_reference_at_every_distance(config):
    """Every relative position from -(max_distance + 3) to max_distance + 2, through a 0-d tensor offset: the
    module's sorted search over ``bucket_starts`` (found once by bisection on the reference) gives
    ``t5_relative_bucket``'s bucket everywhere, the logarithmic buckets and their boundaries included."""
    bidirectional, num_buckets, max_distance = config
    module = T5RelativeBias(1, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    reach = max_distance + 3
    relative = np.arange(2 * reach) - reach
    want = t5_relative_bucket(relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    np.testing.assert_array_equal(module.buckets(1, 2 * reach, offset=torch.tensor(reach))[0].numpy(), want)


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

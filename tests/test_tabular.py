"""Feature identity without order: equivariance of attention, and what the per-feature parameters carry."""

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from posenc.nn import SinusoidalPositionalEncoding
from posenc_book.tabular import FeatureTokenizer, TinyFTTransformer, permute_features, train_regression

N_FEATURES = 5
D_TOKEN = 8


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These tensors are tiny: on a shared machine, torch's thread pool costs far more than it saves."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def seeded_normal(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@functools.cache
def seeded_model(**kwargs):
    """One model per configuration, built once (the tests never modify it: permute_features copies)."""
    torch.manual_seed(0)
    return TinyFTTransformer(N_FEATURES, d_token=D_TOKEN, n_heads=2, **kwargs)


X = seeded_normal(16, N_FEATURES, seed=1)
# A model forward pass per example: fewer examples than the project's default keep this file fast.
model_examples = settings(max_examples=25)


EQUIVARIANCE_ATOL = 1e-5
"""Permuted and unpermuted tokens give the same outputs summed in another order: float32 rounding, a few units of
2**-24 of outputs up to about 4 (the encoder layer's). That gap was 3.6e-7 with torch's AVX-512 kernels and 4.8e-7
with its scalar ones (ATEN_CPU_CAPABILITY=default, MKL and oneDNN held to SSE4): too close to the 1e-6 this was. A
layer that sees the order is off by 0.15 or more (a causal mask, any non-identity permutation here; a sinusoidal
encoding, test_a_positional_encoding_breaks_the_equivariance: more than 1e-3)."""

permutations = st.permutations(list(range(N_FEATURES)))
non_identity_permutations = permutations.filter(lambda p: p != list(range(N_FEATURES)))


# (a) Self-attention without positional information is permutation-equivariant.


@given(permutations)
def test_self_attention_without_positions_is_permutation_equivariant(p):
    """Reordering the tokens reorders the outputs of nn.MultiheadAttention the same way."""
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(D_TOKEN, 2, batch_first=True)
    tokens = seeded_normal(3, N_FEATURES, D_TOKEN)
    out, _ = attention(tokens, tokens, tokens)
    out_permuted, _ = attention(tokens[:, p], tokens[:, p], tokens[:, p])
    torch.testing.assert_close(out_permuted, out[:, p], rtol=0, atol=EQUIVARIANCE_ATOL)


@pytest.mark.parametrize("norm_first", [False, True])
@given(p=permutations)
def test_encoder_layer_without_positions_is_permutation_equivariant(norm_first, p):
    """A whole encoder layer (attention, feed-forward, LayerNorms) is equivariant too, pre- or post-norm."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        D_TOKEN, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=norm_first
    )
    tokens = seeded_normal(3, N_FEATURES, D_TOKEN)
    torch.testing.assert_close(layer(tokens[:, p]), layer(tokens)[:, p], rtol=0, atol=EQUIVARIANCE_ATOL)


@given(non_identity_permutations)
def test_a_positional_encoding_breaks_the_equivariance(p):
    """The check above can fail: add a sinusoidal encoding by index and reordering no longer commutes."""
    torch.manual_seed(0)
    attention = nn.MultiheadAttention(D_TOKEN, 2, batch_first=True)
    encode = SinusoidalPositionalEncoding(D_TOKEN)
    tokens = seeded_normal(3, N_FEATURES, D_TOKEN)
    out, _ = attention(encode(tokens), encode(tokens), encode(tokens))
    moved = encode(tokens[:, p])
    out_permuted, _ = attention(moved, moved, moved)
    assert (out_permuted - out[:, p]).abs().max() > 1e-3


# (b) Feature identity lives in the per-feature parameters.


@pytest.mark.parametrize("norm_first", [False, True])
@model_examples
@given(p=permutations)
def test_reordering_columns_with_their_parameters_leaves_the_prediction_unchanged(norm_first, p):
    model = seeded_model(norm_first=norm_first)
    x = X
    torch.testing.assert_close(permute_features(model, p)(x[:, p]), model(x), rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@model_examples
@given(p=non_identity_permutations)
def test_reordering_columns_alone_changes_the_prediction(norm_first, p):
    model = seeded_model(norm_first=norm_first)
    x = X
    assert (model(x[:, p]) - model(x)).abs().max() > 1e-3


@model_examples
@given(non_identity_permutations)
def test_a_shared_tokenizer_without_bias_is_blind_to_column_order(p):
    """Same weight for every feature and no bias: the model sees a set of values, so any reordering is invisible."""
    model = seeded_model(shared_weight=True, bias=False)
    x = X
    torch.testing.assert_close(model(x[:, p]), model(x), rtol=0, atol=1e-5)


@functools.cache
def biased_shared_model():
    model = TinyFTTransformer(N_FEATURES, d_token=D_TOKEN, n_heads=2, shared_weight=True, bias=True)
    with torch.no_grad():
        model.tokenizer.bias.copy_(seeded_normal(N_FEATURES, D_TOKEN, seed=4))
    return model


@model_examples
@given(non_identity_permutations)
def test_per_feature_biases_alone_carry_the_identity(p):
    """Shared weight plus per-feature bias: the bias is enough for reordering the columns to matter.

    At initialisation the biases are small (|b| < 1/sqrt(d_token)) and so is their effect; the test gives
    them unit scale, as training does when it needs them (the chapter's experiment).
    """
    model = biased_shared_model()
    x = X
    assert (model(x[:, p]) - model(x)).abs().max() > 1e-3


@model_examples
@given(non_identity_permutations)
def test_per_feature_weights_alone_carry_the_identity(p):
    model = seeded_model(bias=False)
    x = X
    assert (model(x[:, p]) - model(x)).abs().max() > 1e-3


def test_the_place_of_the_cls_token_does_not_matter():
    """The paper appends [CLS], the authors' package prepends it: without positions both give the same output."""
    model = seeded_model()
    x = seeded_normal(4, N_FEATURES)
    tokens = model.tokenizer(x)
    cls = model.cls.expand(4, 1, -1)
    first = model.encoder(torch.cat([cls, tokens], dim=1))[:, 0]
    last = model.encoder(torch.cat([tokens, cls], dim=1))[:, -1]
    torch.testing.assert_close(first, last, rtol=0, atol=1e-6)
    torch.testing.assert_close(model(x), model.head(first).squeeze(-1), rtol=0, atol=1e-6)


# The tokenizer itself.


def test_tokens_are_value_times_weight_plus_bias():
    torch.manual_seed(0)
    tokenizer = FeatureTokenizer(N_FEATURES, D_TOKEN)
    x = seeded_normal(3, N_FEATURES)
    expected = torch.stack([x[:, j, None] * tokenizer.weight[j] + tokenizer.bias[j] for j in range(N_FEATURES)], dim=1)
    torch.testing.assert_close(tokenizer(x), expected, rtol=0, atol=0)


def test_a_zero_feature_gives_its_bias_or_without_bias_the_zero_vector():
    """Without b_j, a token with x_j = 0 is the same zero vector for every feature j."""
    torch.manual_seed(0)
    with_bias, without_bias = FeatureTokenizer(N_FEATURES, D_TOKEN), FeatureTokenizer(N_FEATURES, D_TOKEN, bias=False)
    zeros = torch.zeros(1, N_FEATURES)
    assert torch.equal(with_bias(zeros)[0], with_bias.bias.detach())
    assert torch.equal(without_bias(zeros), torch.zeros(1, N_FEATURES, D_TOKEN))
    assert without_bias.bias is None and "bias" not in dict(without_bias.named_parameters())


def test_a_shared_weight_is_one_row_used_by_every_feature():
    tokenizer = FeatureTokenizer(N_FEATURES, D_TOKEN, bias=False, shared_weight=True)
    assert tokenizer.weight.shape == (1, D_TOKEN)
    tokens = tokenizer(torch.ones(1, N_FEATURES))
    assert all(torch.equal(tokens[0, j], tokenizer.weight[0].detach()) for j in range(N_FEATURES))


def test_layernorm_of_a_bias_free_token_keeps_only_the_sign():
    """LN(x W) = sign(x) LN(W) up to eps: the magnitude is gone. LN(x W + b) keeps it."""
    torch.manual_seed(0)
    norm = nn.LayerNorm(D_TOKEN)
    w, b = seeded_normal(D_TOKEN, seed=2), seeded_normal(D_TOKEN, seed=3)
    torch.testing.assert_close(norm(0.5 * w), norm(3.0 * w), rtol=0, atol=1e-4)
    torch.testing.assert_close(norm(-2.0 * w), -norm(2.0 * w) + 2 * norm.bias, rtol=0, atol=1e-4)
    assert (norm(0.5 * w + b) - norm(3.0 * w + b)).abs().max() > 0.1


def test_tokenizer_output_follows_the_input_dtype():
    tokenizer = FeatureTokenizer(2, 3)
    assert tokenizer(torch.zeros(4, 2, dtype=torch.float64)).dtype == torch.float64


def test_float64_model_takes_float64_input():
    model = fresh_model().double()
    assert model(seeded_normal(2, N_FEATURES).double()).dtype == torch.float64


# permute_features


def test_permute_features_returns_a_copy_and_leaves_the_original_alone():
    model = fresh_model()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    moved = permute_features(model, [4, 3, 2, 1, 0])
    assert moved is not model and moved.tokenizer.weight is not model.tokenizer.weight
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert torch.equal(moved.tokenizer.weight, model.tokenizer.weight.flip(0))
    assert torch.equal(moved.tokenizer.bias, model.tokenizer.bias.flip(0))
    assert torch.equal(moved.cls, model.cls)


@given(permutations)
def test_permuted_tokenizer_gives_the_tokens_reordered(p):
    torch.manual_seed(0)
    tokenizer = FeatureTokenizer(N_FEATURES, D_TOKEN)
    x = seeded_normal(3, N_FEATURES)
    torch.testing.assert_close(permute_features(tokenizer, p)(x[:, p]), tokenizer(x)[:, p], rtol=0, atol=0)


@given(permutations, permutations)
def test_permuting_twice_is_permuting_once_by_the_composition(p, q):
    torch.manual_seed(0)
    tokenizer = FeatureTokenizer(N_FEATURES, D_TOKEN)
    twice = permute_features(permute_features(tokenizer, p), q)
    once = permute_features(tokenizer, [p[k] for k in q])
    assert torch.equal(twice.weight, once.weight) and torch.equal(twice.bias, once.bias)


def test_permutation_may_be_a_tensor_or_an_array():
    torch.manual_seed(0)
    tokenizer = FeatureTokenizer(3, 2)
    a = permute_features(tokenizer, torch.tensor([2, 0, 1]))
    b = permute_features(tokenizer, (2, 0, 1))
    assert torch.equal(a.weight, b.weight)


def test_shared_weight_is_not_permuted():
    tokenizer = FeatureTokenizer(3, 2, shared_weight=True)
    moved = permute_features(tokenizer, [1, 2, 0])
    assert torch.equal(moved.weight, tokenizer.weight)
    assert torch.equal(moved.bias, tokenizer.bias[[1, 2, 0]])


# train_regression


def fresh_model():
    torch.manual_seed(0)
    return TinyFTTransformer(N_FEATURES, d_token=D_TOKEN, n_heads=2)


def test_training_is_deterministic_and_lowers_the_error():
    x = seeded_normal(64, N_FEATURES)
    y = x[:, 0] - x[:, 1]
    first = train_regression(fresh_model(), x, y, x[:32], y[:32], steps=15)
    second = train_regression(fresh_model(), x, y, x[:32], y[:32], steps=15)
    assert first == second
    assert len(first.train_mse) == len(first.test_mse) == 16
    # 0.17 of the first; under four perturbations of the initial weights (posenc_book.robustness) it moves by
    # less than 1e-4: 15 full-batch steps do not amplify them
    assert first.train_mse[-1] < 0.5 * first.train_mse[0]


# What a reader may get wrong


@pytest.mark.argument_check
@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: fresh_model()(X[:, :4]), ValueError, r"x must have shape \(batch, n_features=5\)"),
        (lambda: FeatureTokenizer(2, 3)(torch.ones(4, 2, dtype=torch.long)), TypeError, "floating-point"),
        (lambda: fresh_model()(X.double()), TypeError, "model's dtype"),
        (lambda: TinyFTTransformer(3, d_token=8, n_heads=3), ValueError, "n_heads must divide d_token"),
        (lambda: permute_features(fresh_model(), [0, 1, 2, 3, 3]), ValueError, "permutation must hold each"),
        (lambda: train_regression(fresh_model(), X, X[:, :1], X, X[:, 0]), ValueError, r"y_train must have shape"),
    ],
    ids=["columns", "integer x", "dtype", "heads", "not a permutation", "y shape"],
)
def test_mistakes_are_refused_with_a_message_naming_them(call, error, message):
    with pytest.raises(error, match=message):
        call()

r"""Feature identity without order: an FT-Transformer-style tokenizer and a tiny model built on it.

A tabular Transformer sees one token per *feature* (column), not per position in a sequence. Without
positional information, self-attention is permutation-equivariant: reorder the tokens and its outputs
are reordered the same way. What tells the model *which* feature a token came from is a set of
per-feature parameters in the tokenizer: FT-Transformer's weight :math:`W_j` and bias :math:`b_j`
(Gorishniy et al., 2021), TabTransformer's column embedding (Huang et al., 2020). This module holds

- :class:`FeatureTokenizer`, which turns ``(batch, n_features)`` numbers into ``(batch, n_features,
  d_token)`` tokens :math:`T_j = x_j W_j + b_j`, with switches that remove the per-feature weight or
  the bias so that their roles can be tested separately;
- :class:`TinyFTTransformer`, tokenizer + [CLS] token + ``torch.nn.TransformerEncoder`` + a linear
  head on the [CLS] output;
- :func:`permute_features`, which returns a copy whose per-feature parameters are reordered, so that
  reordering the input columns *together with* those parameters can be compared with reordering the
  columns alone;
- :func:`train_regression`, a full-batch training loop small enough for a book chapter.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch import nn

from posenc_book.adam import Adam
from posenc_book.robustness import perturb_initial_weights

__all__ = ["FeatureTokenizer", "TinyFTTransformer", "permute_features", "train_regression", "RegressionCurves"]


def _check_features(x: torch.Tensor, n_features: int) -> None:
    """Refuse an ``x`` that is not a floating ``(batch, n_features)`` tensor (integer features would turn the
    weights into integers)."""
    if x.ndim != 2 or x.shape[1] != n_features:
        raise ValueError(f"x must have shape (batch, n_features={n_features}), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")


class FeatureTokenizer(nn.Module):
    r"""Turn each numerical feature into a token: :math:`T_j = x_j W_j + b_j`.

    Parameters
    ----------
    n_features : int
        Number of numerical features (columns); at least 1.
    d_token : int
        Width of each token; at least 1.
    bias : bool, default True
        Whether to add a per-feature bias :math:`b_j`. FT-Transformer uses one.
    shared_weight : bool, default False
        If True, every feature is multiplied by the *same* vector :math:`W` instead of its own
        :math:`W_j`. With ``shared_weight=True, bias=False`` a token carries the feature's value and
        nothing about which feature it is. FT-Transformer does not share weights; the switch exists to
        show what the per-feature parameters do.

    Attributes
    ----------
    weight : (n_features, d_token) nn.Parameter, or (1, d_token) if ``shared_weight``
        Row :math:`j` is :math:`W_j`.
    bias : (n_features, d_token) nn.Parameter or None
        Row :math:`j` is :math:`b_j`; None when ``bias=False``.

    Notes
    -----
    For ``x`` of shape ``(batch, n_features)`` the output has shape ``(batch, n_features, d_token)`` with

    .. math::

        T_{j} = x_j\, W_j + b_j, \qquad j = 0, \dots, n_{features} - 1,

    the Feature Tokenizer of Gorishniy et al. (2021) for numerical features (they add an embedding
    lookup plus :math:`b_j` for a categorical feature; this class covers numerical features only). Both
    :math:`W_j` and :math:`b_j` belong to feature :math:`j`: they are how a token says which column it
    came from. A token with :math:`x_j = 0` equals :math:`b_j`, so without the bias it is the zero vector
    whatever :math:`j` is. Parameters are initialised from :math:`U(-1/\sqrt{d}, 1/\sqrt{d})`, as in the
    authors' code.

    References
    ----------
    .. [1] Y. Gorishniy, I. Rubachev, V. Khrulkov, A. Babenko, "Revisiting Deep Learning Models for
       Tabular Data", NeurIPS 2021, arXiv:2106.11959.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> tokenizer = FeatureTokenizer(3, 4)
    >>> x = torch.tensor([[1.0, 2.0, 0.0]])
    >>> tokens = tokenizer(x)
    >>> tokens.shape  # (batch, n_features, d_token)
    torch.Size([1, 3, 4])
    >>> torch.equal(tokens[0, 2], tokenizer.bias[2])  # x_2 = 0: the token is b_2
    True
    """

    def __init__(self, n_features, d_token, *, bias=True, shared_weight=False):
        super().__init__()
        self.n_features = n_features
        self.d_token = d_token
        self.shared_weight = shared_weight
        bound = self.d_token**-0.5
        n_weights = 1 if self.shared_weight else self.n_features
        self.weight = nn.Parameter(torch.empty(n_weights, self.d_token).uniform_(-bound, bound))
        if bias:
            self.bias = nn.Parameter(torch.empty(self.n_features, self.d_token).uniform_(-bound, bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_features(x, self.n_features)
        tokens = x[:, :, None] * self.weight.to(x.dtype)
        if self.bias is not None:
            tokens = tokens + self.bias.to(x.dtype)
        return tokens

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, d_token={self.d_token}, bias={self.bias is not None}, "
            f"shared_weight={self.shared_weight}"
        )


class TinyFTTransformer(nn.Module):
    r"""A one-output FT-Transformer in miniature: tokenizer, [CLS] token, encoder, head on [CLS].

    Parameters
    ----------
    n_features : int
        Number of numerical input features; at least 1.
    d_token : int, default 16
        Token width; at least 1 and divisible by ``n_heads``.
    n_heads : int, default 2
        Attention heads per layer; at least 1.
    n_layers : int, default 1
        Number of ``torch.nn.TransformerEncoderLayer`` blocks.
    bias, shared_weight : bool
        Passed to :class:`FeatureTokenizer`: ``bias=True, shared_weight=False`` is FT-Transformer's choice.
    norm_first : bool, default False
        False: post-norm layers (PyTorch's default), so the first attention sees the raw tokens. True:
        pre-norm layers, each starting with a LayerNorm, *including* the very first one, which
        FT-Transformer's own code leaves out (see Notes).

    Attributes
    ----------
    tokenizer : FeatureTokenizer
    cls : (d_token,) nn.Parameter
        The [CLS] token, the same for every row of the batch.
    encoder : nn.TransformerEncoder
        ``n_layers`` layers with ``batch_first=True``, dropout 0, ReLU, feed-forward width ``2 * d_token``,
        and no positional encoding.
    head : nn.Linear
        From the final [CLS] representation to one number.

    Notes
    -----
    ``forward(x)`` for ``x`` of shape ``(batch, n_features)`` returns shape ``(batch,)``:

    .. math::

        \hat y = \mathrm{head}\big(\mathrm{Encoder}([\,\mathrm{CLS};\, T_0; \dots; T_{n-1}\,])_{\mathrm{CLS}}\big).

    Gorishniy et al. (2021) append [CLS] to the tokens; their package prepends it. The place makes no
    difference: the encoder has no positional information, so it treats its input as a set and only the
    [CLS] token's parameters mark it out. The layer sizes here are far smaller than the paper's.

    The authors' package uses pre-norm layers but skips the very first LayerNorm and calls this crucial.
    With ``norm_first=True`` this model keeps it, which shows what it would cost: LayerNorm turns a
    bias-free token :math:`x_j W_j` into :math:`\mathrm{sign}(x_j)` times the normalised :math:`W_j` (before
    its learned scale and shift), losing the magnitude of :math:`x_j`, as long as its :math:`\varepsilon` is
    small against :math:`x_j^2` times the variance of :math:`W_j`'s entries. Training can shrink :math:`W_j`
    until it is not, and a small :math:`|x_j|` then keeps part of its size (chapter 5). With the bias,
    :math:`\mathrm{LN}(x_j W_j + b_j)` keeps it.

    References
    ----------
    .. [1] Y. Gorishniy, I. Rubachev, V. Khrulkov, A. Babenko, "Revisiting Deep Learning Models for
       Tabular Data", NeurIPS 2021, arXiv:2106.11959.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyFTTransformer(4, d_token=8, n_heads=2)
    >>> model(torch.randn(5, 4)).shape  # one prediction per row
    torch.Size([5])
    """

    def __init__(
        self, n_features, d_token=16, n_heads=2, n_layers=1, *, bias=True, shared_weight=False, norm_first=False
    ):
        super().__init__()
        if d_token % n_heads:
            raise ValueError(f"n_heads must divide d_token, got n_heads={n_heads} and d_token={d_token}")
        self.tokenizer = FeatureTokenizer(n_features, d_token, bias=bias, shared_weight=shared_weight)
        bound = d_token**-0.5
        self.cls = nn.Parameter(torch.empty(d_token).uniform_(-bound, bound))
        layer = nn.TransformerEncoderLayer(
            d_token, n_heads, dim_feedforward=2 * d_token, dropout=0.0, batch_first=True, norm_first=norm_first
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_token, 1)

    @property
    def n_features(self) -> int:
        return self.tokenizer.n_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_features(x, self.n_features)
        if x.dtype != self.cls.dtype:
            raise TypeError(
                f"x must have the model's dtype {self.cls.dtype}, got {x.dtype}: convert x, or the model "
                "with .to(dtype)"
            )
        tokens = self.tokenizer(x)
        cls = self.cls.expand(tokens.shape[0], 1, -1)
        encoded = self.encoder(torch.cat([cls, tokens], dim=1))
        return self.head(encoded[:, 0]).squeeze(-1)


def permute_features(module, permutation):
    r"""A copy of a tokenizer or model whose per-feature parameters follow a reordering of the columns.

    Parameters
    ----------
    module : FeatureTokenizer or TinyFTTransformer
        Left unchanged.
    permutation : (n_features,) sequence of int
        The new column order: column ``k`` of the reordered input is column ``permutation[k]`` of the
        original, i.e. ``x_new = x[:, permutation]``.

    Returns
    -------
    copy : same type as ``module``
        A deep copy in which row ``k`` of every per-feature parameter (:math:`W_k`, :math:`b_k`) is row
        ``permutation[k]`` of the original's. A shared weight is copied as it is.

    Notes
    -----
    With :math:`\pi` = ``permutation``, the copy's tokens for the reordered input are the original tokens
    reordered, :math:`T'_k(x_{\pi}) = x_{\pi(k)} W_{\pi(k)} + b_{\pi(k)} = T_{\pi(k)}(x)`. A model that
    reads its prediction from a [CLS] token and has no positional information therefore gives
    ``permute_features(model, p)(x[:, p]) == model(x)`` up to rounding, for every ``p``.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyFTTransformer(3, d_token=8)
    >>> x = torch.randn(4, 3)
    >>> p = [2, 0, 1]
    >>> moved = permute_features(model, p)
    >>> torch.allclose(moved(x[:, p]), model(x), atol=1e-6)  # columns and parameters together
    True
    >>> torch.allclose(model(x[:, p]), model(x), atol=1e-3)  # columns alone
    False
    """
    index = torch.as_tensor(permutation, dtype=torch.int64)
    if sorted(index.tolist()) != list(range(module.n_features)):
        raise ValueError(
            f"permutation must hold each of 0 ... {module.n_features - 1} exactly once, got {index.tolist()}"
        )
    moved = copy.deepcopy(module)
    tokenizer = moved.tokenizer if isinstance(moved, TinyFTTransformer) else moved
    with torch.no_grad():
        if not tokenizer.shared_weight:
            tokenizer.weight.copy_(tokenizer.weight[index.to(tokenizer.weight.device)])
        if tokenizer.bias is not None:
            tokenizer.bias.copy_(tokenizer.bias[index.to(tokenizer.bias.device)])
    return moved


class RegressionCurves(NamedTuple):
    """Mean squared errors recorded by :func:`train_regression`, one entry per step (before the update)."""

    train_mse: list[float]
    test_mse: list[float]


def train_regression(model, x_train, y_train, x_test, y_test, *, steps=300, lr=1e-2):
    r"""Fit ``model`` to ``y_train`` by full-batch Adam on the mean squared error, recording both errors.

    Parameters
    ----------
    model : TinyFTTransformer
        Trained in place.
    x_train, x_test : (n_train, n_features), (n_test, n_features) floating tensors
    y_train, y_test : (n_train,), (n_test,) floating tensors
    steps : int, default 300
        Number of Adam updates.
    lr : float, default 1e-2
        Adam's learning rate.

    Returns
    -------
    curves : RegressionCurves
        ``train_mse[s]`` and ``test_mse[s]`` are the errors before update ``s``, and a final entry after
        the last update (``steps + 1`` entries each).

    Notes
    -----
    Full batches and no dropout make the loop free of randomness: given the model's initial parameters,
    the curves are determined (up to the floating-point reproducibility of the machine).

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> x = torch.randn(64, 2)
    >>> curves = train_regression(TinyFTTransformer(2, d_token=4), x, x[:, 0], x, x[:, 0], steps=20)
    >>> len(curves.train_mse), curves.train_mse[-1] < curves.train_mse[0]
    (21, True)
    """
    for name, y, x in (("y_train", y_train, x_train), ("y_test", y_test, x_test)):
        if y.shape != (len(x),):  # (n, 1) would broadcast against the (n,) predictions into an (n, n) error
            raise ValueError(f"{name} must have shape ({len(x)},) to match its x, got {tuple(y.shape)}")

    perturb_initial_weights(model)  # only inside posenc_book.robustness.perturbed
    optimizer = Adam(model.parameters(), lr=lr)
    model.train()
    curves = RegressionCurves([], [])
    for step in range(steps + 1):
        with torch.no_grad():
            curves.test_mse.append(float(torch.mean((model(x_test) - y_test) ** 2)))
        loss = torch.mean((model(x_train) - y_train) ** 2)
        curves.train_mse.append(float(loss.detach()))
        if step == steps:
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return curves

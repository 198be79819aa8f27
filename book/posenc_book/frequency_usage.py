r"""Which rotary frequencies a trained model uses, and p-RoPE, which stops rotating the slowest pairs.

Chapter 12 trains chapter 9's :class:`~posenc_book.extrapolation.TinyCausalLM` on its order-2 Markov source
and asks which of the rotary pairs its heads put their queries and keys in, as Barbero et al. (2025) ask of
Gemma 7B. This module holds

- :func:`p_rope`, the rotary embedding of p-RoPE (Barbero et al., 2025): the fastest ``fraction`` of the
  pairs rotate with RoPE's frequencies, the other pairs are not rotated at all. It is built from
  :class:`posenc.nn.RotaryEmbedding` with a partial rotary dimension and a smaller base (see its notes);
- :func:`frequency_usage`, which measures, for every layer, head and pair, the mean size of the query's and
  the key's components in that pair;
- :func:`attention_by_offset`, where each head attends (its mean weight on the key ``d`` positions back), and
  :func:`without_pairs`, a copy of a model whose queries and keys have nothing in chosen pairs (an ablation);
- :func:`train_rotary`, which trains one model with p-RoPE (``fraction=1`` is RoPE, ``0`` no positional
  encoding) and scores it at several lengths with :func:`posenc_book.extrapolation.evaluate`.

Every training function runs torch on one thread, seeds everything from its arguments and leaves torch's
global random state and thread count as it found them: equal arguments give equal numbers on a machine.
"""

from __future__ import annotations

import copy
import math
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from posenc.nn import RotaryEmbedding
from posenc_book.extrapolation import N_SYMBOLS, TinyCausalLM, evaluate, markov_chain, sample_sequences, train_steps
from posenc_book.robustness import perturb_initial_weights

__all__ = [
    "NoRotation",
    "kept_pairs",
    "p_rope",
    "FrequencyUsage",
    "frequency_usage",
    "attention_by_offset",
    "without_pairs",
    "PRopeResult",
    "train_rotary",
]


class NoRotation(nn.Module):
    """The rotary embedding of p-RoPE with ``fraction=0``: every pair unrotated, ``x`` returned as it is.

    It takes the arguments :class:`posenc.nn.RotaryEmbedding` takes in :class:`TinyCausalLM`
    (``positions``) and ignores them.
    """

    def forward(self, x: torch.Tensor, positions=None) -> torch.Tensor:
        return x


def kept_pairs(head_dim, fraction) -> int:
    """Pairs p-RoPE rotates in a head of ``head_dim`` features: ``int(fraction * head_dim // 2)``.

    Parameters
    ----------
    head_dim : int
        Features per head; positive and even.
    fraction : float
        The fraction :math:`p` of the pairs to rotate, in ``[0, 1]``.

    Returns
    -------
    pairs : int
        The number of rotated pairs, the fastest ones; the other ``head_dim // 2 - pairs`` are not rotated.
        As in Gemma's ``apply_rope`` (its ``rope_proportion``), the code read for p-RoPE's definition.

    Examples
    --------
    >>> kept_pairs(16, 0.75), kept_pairs(16, 1.0), kept_pairs(16, 0.0), kept_pairs(10, 0.5)
    (6, 8, 0, 2)
    """
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim < 2 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even int, got {head_dim!r}")
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must be a real number in [0, 1], got {fraction!r}")
    return int(fraction * head_dim // 2)


def p_rope(head_dim, fraction, *, base=10000.0) -> nn.Module:
    r"""The rotary embedding of p-RoPE: rotate the fastest ``fraction`` of the pairs, leave the others alone.

    Parameters
    ----------
    head_dim : int
        Features per head; positive and even.
    fraction : float
        The fraction :math:`p \in [0, 1]` of the pairs to rotate (see :func:`kept_pairs`).
    base : float, default 10000.0
        The base :math:`b` of RoPE's frequencies, greater than 1.

    Returns
    -------
    rotary : posenc.nn.RotaryEmbedding or NoRotation
        A module that maps ``x`` of shape ``(..., seq, head_dim)`` (and optional ``positions``) to the same
        shape, in the interleaved layout (pairs ``2i, 2i + 1``, as :class:`TinyCausalLM` uses).
        :class:`NoRotation` when no pair is kept.

    Notes
    -----
    RoPE rotates pair :math:`i` of a head of :math:`d` features by :math:`m\,\theta_i` at position
    :math:`m`, with :math:`\theta_i = b^{-2i/d}`, :math:`i = 0, \dots, d/2 - 1`. p-RoPE (Barbero et al.,
    2025) keeps the :math:`r/2 = \lfloor p\,d/2 \rfloor` fastest pairs, :math:`i < r/2`, with those
    same frequencies and gives the others the frequency 0: they are never rotated. Gemma's ``apply_rope``
    (``rope_proportion``) pads the timescales :math:`b^{2i/d}` with infinity.
    Gemma pairs feature :math:`i` with :math:`i + d/2` (the halves layout); here pair :math:`i` is features
    :math:`2i, 2i + 1`, the same rotation up to a permutation of the features
    (:func:`posenc.rotary_weight_permutation`).

    This is not GPT-NeoX's partial rotary (:class:`posenc.nn.RotaryEmbedding` with ``rotary_dim=r``),
    which spreads the whole range of frequencies over the :math:`r` rotated features,
    :math:`b^{-2i/r}`, and so keeps the slowest frequency :math:`b^{-(r-2)/r}`. The two differ only in
    the base: :math:`b^{-2i/d} = (b^{r/d})^{-2i/r}`, so p-RoPE is the partial rotary embedding with
    base :math:`b^{r/d}`, which is what this function returns; the frequencies stay those of
    :func:`posenc.rotary_frequencies`, up to the rounding of :math:`b^{r/d}` (a relative error of a few
    units in :math:`10^{-16}` in every frequency).

    References
    ----------
    .. [1] F. Barbero, A. Vitvitskyi, C. Perivolaropoulos, R. Pascanu, P. Veličković, "Round and Round We
       Go! What makes Rotary Positional Encodings useful?", ICLR 2025, arXiv:2410.06205.
    .. [2] google-deepmind/gemma, ``gemma/gm/math/_positional_embeddings.py`` (``apply_rope``,
       ``rope_proportion``).

    Examples
    --------
    >>> x = torch.randn(1, 5, 16, dtype=torch.float64)
    >>> y = p_rope(16, 0.75)(x)
    >>> torch.equal(y[..., 12:], x[..., 12:])  # pairs 6 and 7 are not rotated
    True
    >>> torch.equal(p_rope(16, 1.0)(x), RotaryEmbedding(16)(x))  # p = 1 is RoPE
    True
    """
    pairs = kept_pairs(head_dim, fraction)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1.0:
        raise ValueError(f"base must be a finite real number greater than 1, got {base!r}")
    if pairs == 0:
        return NoRotation()
    rotary_dim = 2 * pairs
    scaled_base = float(base) if rotary_dim == head_dim else float(base) ** (rotary_dim / head_dim)
    return RotaryEmbedding(head_dim, rotary_dim=rotary_dim, base=scaled_base)


class FrequencyUsage(NamedTuple):
    r"""What :func:`frequency_usage` measured, per layer, head and rotary pair.

    Attributes
    ----------
    query_norm, key_norm : (n_layers, n_heads, head_dim // 2) float64 arrays
        Mean over every token of every sequence of :math:`\lVert q^{(i)} \rVert` (resp.
        :math:`\lVert k^{(i)} \rVert`), the 2-norm of the query's (key's) two features of pair :math:`i`.
    share : (n_layers, n_heads, head_dim // 2) float64 array
        ``query_norm * key_norm`` normalised to sum to 1 over the pairs of each head: the share of the
        head's attention logits pair :math:`i` can carry (see the notes of :func:`frequency_usage`).
    """

    query_norm: np.ndarray
    key_norm: np.ndarray
    share: np.ndarray


def frequency_usage(model, *, length=32, n_sequences=64, source_seed=0, concentration=0.05, seed=0) -> FrequencyUsage:
    r"""How much of each head's queries and keys lies in each rotary pair, over sequences of the source.

    Parameters
    ----------
    model : TinyCausalLM
        A model with rotary heads (``scheme="rotary"``, any rotary module): trained or not.
    length : int, default 32
        Symbols per sequence, at least 1.
    n_sequences : int, default 64
        Sequences read, at least 1.
    source_seed, concentration
        The chain, as in :func:`posenc_book.extrapolation.train_and_evaluate`.
    seed : int, default 0
        Seeds the sequences.

    Returns
    -------
    usage : FrequencyUsage

    Notes
    -----
    Rotation does not change the length of a pair, so the norms are those of the queries and keys before
    and after the rotary embedding alike; they are read from each layer's ``qkv`` projection. The logit of
    query :math:`q` at position :math:`m` and key :math:`k` at :math:`n` is a sum over the pairs,
    :math:`\sum_i \langle R(m\theta_i) q^{(i)}, R(n\theta_i) k^{(i)} \rangle`, and the term of pair
    :math:`i` is at most :math:`\lVert q^{(i)} \rVert \lVert k^{(i)} \rVert` in size (Cauchy-Schwarz):
    the product of the two mean norms is a measure of how much pair :math:`i` can move the head's logits,
    and its share of the head's total is what the chapter draws.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> usage = frequency_usage(TinyCausalLM("rotary", d_model=16, n_heads=2), n_sequences=2)
    >>> usage.share.shape, bool(np.allclose(usage.share.sum(axis=-1), 1.0))
    ((2, 2, 4), True)
    """
    if model.rotary is None:
        raise ValueError(f"model must have rotary heads (scheme='rotary'), got scheme={model.scheme!r}")
    chain = markov_chain(source_seed, n_symbols=model.vocab_size, concentration=concentration)
    return _usage(model, _usage_tokens(chain, source_seed, length, n_sequences, seed))


def _usage_tokens(chain, source_seed: int, length: int, n_sequences: int, seed: int) -> torch.Tensor:
    """The sequences :func:`frequency_usage` reads."""
    return torch.from_numpy(sample_sequences(chain, n_sequences, length, seed=[source_seed, 5, seed]))


def _usage(model, tokens: torch.Tensor) -> FrequencyUsage:
    """:func:`frequency_usage` on given ``(batch, seq)`` tokens."""
    query_norms, key_norms = [], []
    for q, k, _v in _projections(model, tokens):
        for tensor, norms in ((q, query_norms), (k, key_norms)):
            pairs = tensor.double().unflatten(-1, (-1, 2))  # (batch, heads, seq, pairs, 2)
            norms.append(torch.linalg.vector_norm(pairs, dim=-1).mean(dim=(0, 2)).numpy())
    query_norm, key_norm = np.stack(query_norms), np.stack(key_norms)
    product = query_norm * key_norm
    return FrequencyUsage(query_norm, key_norm, product / product.sum(axis=-1, keepdims=True))


def attention_by_offset(model, *, length=32, n_sequences=64, source_seed=0, concentration=0.05, seed=0) -> np.ndarray:
    r"""How much attention each head gives the key ``d`` positions back, on average, for ``d = 0, 1, ...``.

    Parameters
    ----------
    model : TinyCausalLM
        A model with rotary heads (any rotary module), trained or not.
    length, n_sequences, source_seed, concentration, seed
        The sequences read, as in :func:`frequency_usage` (the same sequences for the same arguments).

    Returns
    -------
    weights : (n_layers, n_heads, length) float64 array
        ``weights[l, h, d]`` is the attention weight head ``h`` of layer ``l`` gives the key at position
        ``i - d``, averaged over the queries ``i >= max(d, 2)`` of every sequence (the positions whose
        predictions the book's losses score). ``d = 0`` is the query's own position.

    Notes
    -----
    The weights are those of the model's attention, :math:`\mathrm{softmax}(q_i^\top k_j / \sqrt{d_h})`
    over the keys :math:`j \le i`, with the queries and keys rotated as the model rotates them (only in its
    ``rope_layers``); ``tests/test_frequency_usage.py`` checks that they reproduce the model's attention
    output. They are read from each layer's ``qkv`` projection, like :func:`frequency_usage`'s norms.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> w = attention_by_offset(TinyCausalLM("rotary", d_model=16, n_heads=2), length=8, n_sequences=2)
    >>> w.shape, bool(np.all(w >= 0))
    ((2, 2, 8), True)
    """
    if model.rotary is None:
        raise ValueError(f"model must have rotary heads (scheme='rotary'), got scheme={model.scheme!r}")
    chain = markov_chain(source_seed, n_symbols=model.vocab_size, concentration=concentration)
    weights = []
    for attention in _attention_weights(model, _usage_tokens(chain, source_seed, length, n_sequences, seed)):
        seq = attention.shape[-1]
        by_offset = np.zeros((model.n_heads, seq))
        for d in range(seq):
            # the weights of queries i = d, ..., seq - 1 on keys i - d; the book scores queries from 2 on
            diagonal = attention.diagonal(offset=-d, dim1=-2, dim2=-1)[..., max(0, 2 - d) :]
            if diagonal.shape[-1]:
                by_offset[:, d] = diagonal.double().mean(dim=(0, 2)).numpy()
        weights.append(by_offset)
    return np.stack(weights)


def _attention_weights(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Each layer's attention weights for ``tokens``, ``(batch, heads, seq, seq)``, rows summing to 1."""
    weights = []
    for layer, (q, k, _v) in enumerate(_projections(model, tokens)):
        if layer in model.rope_layers:
            q, k = model.rotary(q), model.rotary(k)
        seq = q.shape[-2]
        logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        weights.append(torch.softmax(logits + torch.full((seq, seq), float("-inf")).triu(1), dim=-1))
    return weights


def _projections(model, tokens: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Each layer's unrotated queries, keys and values, ``(batch, heads, seq, head_dim)`` each, for ``tokens``."""
    outputs: list[torch.Tensor] = []
    hooks = [
        block.qkv.register_forward_hook(lambda _m, _i, out: outputs.append(out.detach())) for block in model.blocks
    ]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    projections = []
    for out in outputs:
        batch, seq, _ = out.shape
        q, k, v = out.view(batch, seq, 3, model.n_heads, -1).permute(2, 0, 3, 1, 4)
        projections.append((q, k, v))
    return projections


def without_pairs(model, pairs):
    """A copy of ``model`` whose queries and keys have nothing in the given rotary pairs, in every head and layer.

    Parameters
    ----------
    model : TinyCausalLM
        A model with rotary heads; left unchanged.
    pairs : sequence of int
        Rotary pairs ``i`` (features ``2i, 2i + 1`` of each head, pair 0 the fastest), each in
        ``[0, head_dim // 2)``.

    Returns
    -------
    ablated : TinyCausalLM
        The copy, in eval mode: the rows of every layer's ``qkv`` projection (weight and bias) that produce
        those features of the queries and keys are zero, so those pairs add nothing to any attention logit.
        The values, and every other weight, are the model's.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyCausalLM("rotary", d_model=16, n_heads=2)
    >>> usage = frequency_usage(without_pairs(model, [0, 1]), n_sequences=2)
    >>> float(usage.share[..., :2].max())
    0.0
    """
    head_dim = model.d_model // model.n_heads
    pairs = list(pairs)
    if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < head_dim // 2 for p in pairs):
        raise ValueError(f"pairs must be ints in [0, {head_dim // 2}), got {pairs!r}")
    ablated = copy.deepcopy(model)
    with torch.no_grad():
        for block in ablated.blocks:
            for part in (0, 1):  # queries, keys
                for head in range(model.n_heads):
                    for pair in pairs:
                        start = part * model.d_model + head * head_dim + 2 * pair
                        block.qkv.weight[start : start + 2] = 0.0
                        block.qkv.bias[start : start + 2] = 0.0
    return ablated.eval()


class PRopeResult(NamedTuple):
    """What :func:`train_rotary` measured.

    Attributes
    ----------
    fraction : float
        The p of p-RoPE (1: RoPE; 0: no positional encoding).
    seed, source_seed, train_len, kept_pairs : int
    losses : dict of int to float
        Mean loss in nats at each evaluation length, scored by :func:`posenc_book.extrapolation.evaluate`
        (the symbols with two predecessors; the floor is ``entropy_rate``).
    entropy_rate : float
        The chain's loss floor.
    untrained, trained : FrequencyUsage
        :func:`frequency_usage` of the model before and after training.
    model : TinyCausalLM
        The trained model, in eval mode.
    """

    fraction: float
    seed: int
    source_seed: int
    train_len: int
    kept_pairs: int
    losses: dict
    entropy_rate: float
    untrained: FrequencyUsage
    trained: FrequencyUsage
    model: TinyCausalLM


def train_rotary(
    fraction=1.0,
    *,
    seed,
    source_seed=0,
    concentration=0.05,
    base=10000.0,
    train_len=32,
    eval_lens=(32, 128),
    steps=150,
    batch_size=16,
    d_model=64,
    n_heads=4,
    n_layers=2,
    lr=1e-2,
    eval_tokens=4096,
) -> PRopeResult:
    r"""Train a rotary :class:`TinyCausalLM` with p-RoPE and score it at the training length and beyond.

    Parameters
    ----------
    fraction : float, default 1.0
        The p of :func:`p_rope`: 1 is RoPE, 0 leaves every pair unrotated (no positional encoding).
    seed : int
        Seeds the model's initial weights and its training sequences. The initial weights do not depend on
        ``fraction`` (the rotary embedding has no parameters), so equal seeds start equal models.
    source_seed, concentration, train_len, steps, batch_size, n_layers, lr, eval_tokens
        As in :func:`posenc_book.extrapolation.train_and_evaluate`.
    base : float, default 10000.0
        RoPE's base.
    eval_lens : sequence of int, default (32, 128)
        Context lengths to score, each at least 2.
    d_model, n_heads : int, default 64, 4
        As in :class:`TinyCausalLM`: heads of 16 features, 8 rotary pairs.

    Returns
    -------
    result : PRopeResult

    Notes
    -----
    The recipe is chapter 9's (:func:`posenc_book.extrapolation.train_and_evaluate`): Adam, the learning
    rate decayed to 0 along a half cosine, gradients clipped to norm 1, ``batch_size`` fresh sequences of
    ``train_len + 1`` symbols per step, the loss averaged over the predictions of symbols 2, 3, ...; only the
    rotary module differs, and the training sequences are drawn with
    :func:`posenc_book.extrapolation.sample_sequences`. The untrained usage is measured on the same
    sequences as the trained one, those of ``frequency_usage(model, length=train_len, source_seed=source_seed,
    concentration=concentration)``.

    Examples
    --------
    >>> r = train_rotary(0.5, seed=0, steps=2, d_model=16, n_heads=2, eval_lens=(8,), train_len=8)
    >>> r.kept_pairs, sorted(r.losses), r.trained.share.shape
    (2, [8], (2, 2, 4))
    """
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        chain = markov_chain(source_seed, n_symbols=N_SYMBOLS, concentration=concentration)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = TinyCausalLM(
                "rotary", vocab_size=N_SYMBOLS, d_model=d_model, n_heads=n_heads, n_layers=n_layers, max_len=train_len
            )
        model.rotary = p_rope(d_model // n_heads, fraction, base=base)
        perturb_initial_weights(model)  # only inside posenc_book.robustness.perturbed
        usage_tokens = _usage_tokens(chain, source_seed, train_len, 64, 0)  # frequency_usage's defaults
        untrained = _usage(model, usage_tokens)

        def loss_at(step: int) -> torch.Tensor:
            batch = torch.from_numpy(sample_sequences(chain, batch_size, train_len + 1, seed=[seed, 6, step]))
            logits = model(batch[:, :-1])[:, 1:]
            return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 2:].reshape(-1))

        train_steps(model, loss_at, steps=steps, lr=lr)
        trained = _usage(model, usage_tokens)
        losses = {
            length: evaluate(
                model, length, source_seed=source_seed, concentration=concentration, eval_tokens=eval_tokens
            )
            for length in eval_lens
        }
    finally:
        torch.set_num_threads(previous_threads)
    return PRopeResult(
        float(fraction),
        seed,
        source_seed,
        train_len,
        kept_pairs(d_model // n_heads, fraction),
        losses,
        chain.entropy_rate,
        untrained,
        trained,
        model,
    )

r"""Train short, test long: a tiny causal language model trained at one length and scored at longer ones.

The data is an order-2 Markov chain over 16 symbols, generated in memory, so the best possible loss is
known exactly. The model is a small pre-norm Transformer decoder written out here (not
``torch.nn.TransformerDecoder``) so that each positional scheme acts where it belongs: added to the token
embeddings (``"sinusoidal"``, ``"learned"``), rotating queries and keys (``"rotary"``), added to the
attention logits (``"t5"``, ``"alibi"``), or nowhere (``"none"``: the causal mask is the only source of
order). A rotary model can also rotate only part of each head (``rotary_dim``) or leave every n-th layer
without rotation (``nope_layer_interval``, the pattern of Llama 4's reference code). This module holds

- :func:`markov_chain`, the seeded source with its exact entropies (the loss floor among them),
  :func:`sample_sequences`, which draws sequences from it, :func:`chain_symbol_losses`, the chain's own loss
  on each symbol of them, and :func:`order_blind_entropy`, the best loss of a predictor that sees the
  earlier symbols only as an unordered multiset;
- :class:`TinyCausalLM`, the model;
- :func:`train_and_evaluate`, which trains one model at ``train_len`` and reports its loss at several
  evaluation lengths, :func:`evaluate`, which scores a trained model again (optionally with attention
  limited to a window of recent keys), :func:`evaluation_sequences`, the sequences both score,
  :func:`symbol_losses`, a model's loss at each position of given sequences, and
  :func:`shuffled_context_loss`, which measures whether a model's prediction depends on the order of the
  earlier symbols;
- :func:`position_interpolation`, which runs a trained rotary model at a multiple of its training length
  with plain and with interpolated positions (Chen et al., 2023), before and after a short fine-tuning;
- :func:`copy_task`, a task where order must be used, not only recency: copy a random sequence after a
  separator, trained on short sequences and scored on longer ones.

Every training function runs torch on one thread, seeds everything from its arguments and leaves torch's
global random state and thread count as it found them: equal arguments give equal numbers on a machine.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import signal
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from posenc.nn import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    T5RelativeBias,
)
from posenc_book.adam import Adam
from posenc_book.robustness import Perturbation, active_perturbation, perturb_initial_weights, perturbed

__all__ = [
    "SCHEMES",
    "MarkovChain",
    "markov_chain",
    "sample_sequences",
    "chain_symbol_losses",
    "order_blind_entropy",
    "TinyCausalLM",
    "ExtrapolationResult",
    "train_and_evaluate",
    "evaluate",
    "evaluation_sequences",
    "symbol_losses",
    "ShuffleResult",
    "shuffled_context_loss",
    "InterpolationResult",
    "position_interpolation",
    "CopyResult",
    "copy_task",
    "train_steps",
    "train_in_processes",
]

SCHEMES = ("sinusoidal", "learned", "rotary", "t5", "alibi", "none")
"""The positional schemes :class:`TinyCausalLM` knows, in the order the chapter lists them."""

N_SYMBOLS = 16
"""Alphabet of the chain :func:`train_and_evaluate` and :func:`position_interpolation` train on."""

T5_NUM_BUCKETS = 32
"""Buckets of the ``"t5"`` scheme's bias (T5's default)."""

T5_MAX_DISTANCE = 128
"""Distance beyond which the ``"t5"`` scheme puts every key in its last bucket (T5's default)."""

_MLP_RATIO = 4
_ATTENTION_CHUNK = 2**22
"""Most attention logits (sequences x heads x length**2) one evaluation batch holds."""

_MAX_EVAL_SEQUENCES = 4096
"""Most sequences one evaluation length draws (:func:`_eval_sequences`)."""

_BATCH_SYMBOLS = 2**12
"""Symbols (sequences x length) one batch of :func:`shuffled_context_loss` reads. Its 2048 sequences in one
batch made activations of tens of megabytes, which leave the cache; batches of 128 sequences of 32 symbols ran
the chapter's shuffles in half the time, with bit-identical logits (each sequence's logits do not depend on the
others in its batch)."""

_GRAD_CLIP = 1.0


class _OneThread:
    """Run a block with torch on one thread (deterministic, and fair to a shared machine)."""

    def __enter__(self):
        self.previous = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc_info):
        torch.set_num_threads(self.previous)
        return False


# --- The source ----------------------------------------------------------------------------------------------


class MarkovChain(NamedTuple):
    r"""An order-2 Markov chain and its exact entropies, returned by :func:`markov_chain`.

    Attributes
    ----------
    transitions : (n, n, n) float64 array
        ``transitions[a, b, c]`` is the probability that the next symbol is ``c`` when the two before it
        are ``a`` then ``b``; every ``transitions[a, b]`` sums to 1.
    pair_distribution : (n, n) float64 array
        Stationary distribution :math:`\pi(a, b)` of consecutive pairs; sums to 1.
    entropy_rate : float
        :math:`H(X_{t+1} \mid X_{t-1}, X_t)` in nats under :math:`\pi`: the lowest expected cross-entropy
        any predictor reaches on a symbol that has two predecessors (the loss floor).
    order1_entropy : float
        :math:`H(X_{t+1} \mid X_t)` in nats: the lowest loss of a predictor that sees only the current
        symbol. It is not the best loss without positional information: a predictor that also sees the
        earlier symbols as an unordered multiset can do much better (:func:`order_blind_entropy`).
    marginal_entropy : float
        :math:`H(X_t)` in nats: the lowest loss of a predictor that sees nothing.
    """

    transitions: np.ndarray
    pair_distribution: np.ndarray
    entropy_rate: float
    order1_entropy: float
    marginal_entropy: float


def _entropy(p: np.ndarray, axis=None):
    """Shannon entropy in nats, with 0 log 0 = 0."""
    return -np.sum(p * np.log(np.where(p > 0, p, 1.0)), axis=axis)


def _current_next(pairs: np.ndarray, transitions: np.ndarray) -> np.ndarray:
    """Joint distribution ``(n, n)`` of (current symbol, next symbol) under the stationary pairs."""
    return np.einsum("ab,abc->bc", pairs, transitions)


def markov_chain(seed, *, n_symbols=16, concentration=0.05) -> MarkovChain:
    r"""A random order-2 Markov chain, with the exact entropy rate that bounds any model's loss on it.

    Parameters
    ----------
    seed : int
        Seed of the transition table.
    n_symbols : int, default 16
        Alphabet size :math:`n`, at least 2. The stationary distribution solves an :math:`n^2`-square
        linear system.
    concentration : float, default 0.05
        Parameter :math:`\alpha > 0` of the symmetric Dirichlet each row is drawn from. A small value gives
        peaked rows: a low entropy rate and a source a tiny model learns quickly.

    Returns
    -------
    chain : MarkovChain

    Notes
    -----
    Each row :math:`P(\cdot \mid a, b)` is an independent draw from :math:`\mathrm{Dirichlet}(\alpha,
    \dots, \alpha)`; entries below :math:`10^{-12}` are raised to it and the row renormalised, so the
    chain on pairs, :math:`(a, b) \to (b, c)` with probability :math:`P(c \mid a, b)`, is irreducible and
    aperiodic. Its stationary distribution is the unique solution of

    .. math::

        \pi(b, c) = \sum_a \pi(a, b)\, P(c \mid a, b), \qquad \sum_{a, b} \pi(a, b) = 1,

    solved as a linear system (exactly, up to rounding; no simulation). Then

    .. math::

        H = -\sum_{a, b} \pi(a, b) \sum_c P(c \mid a, b) \log P(c \mid a, b).

    :func:`sample_sequences` starts every sequence with a pair drawn from :math:`\pi`, so each symbol from
    the third on has expected best loss exactly :math:`H`. The first two do not (the first has entropy
    :math:`H(X_t)`, the second :math:`H(X_{t+1} \mid X_t)`), which is why the losses of this module leave
    them out.

    Examples
    --------
    >>> chain = markov_chain(0, n_symbols=4)
    >>> chain.transitions.shape, bool(np.allclose(chain.transitions.sum(axis=-1), 1.0))
    ((4, 4, 4), True)
    >>> bool(chain.entropy_rate <= chain.order1_entropy <= chain.marginal_entropy <= np.log(4))
    True
    >>> markov_chain(0, n_symbols=4) is chain  # computed once, read-only
    True
    """
    try:
        return _cached_chain(seed, n_symbols, concentration)
    except TypeError:  # an unhashable seed (a list of ints): computed each time
        return _chain(seed, n_symbols, concentration)


@functools.lru_cache(maxsize=64)
def _cached_chain(seed, n_symbols: int, concentration: float) -> MarkovChain:
    """:func:`markov_chain` computed once per arguments, its arrays read-only.

    The chapters ask for the same chain in every training and evaluation call; its stationary distribution
    is a dense solve, which NumPy's threaded BLAS makes slow on a busy 2-core machine (0.2 to 0.9 s a call
    when other processes compete, against milliseconds on one thread).
    """
    chain = _chain(seed, n_symbols, concentration)
    for array in (chain.transitions, chain.pair_distribution):
        array.setflags(write=False)
    return chain


def _chain(seed, n: int, concentration: float) -> MarkovChain:
    """The chain of :func:`markov_chain`, computed."""
    transitions = np.random.default_rng(seed).dirichlet(np.full(n, concentration), size=(n, n))
    transitions = np.maximum(transitions, 1e-12)
    transitions /= transitions.sum(axis=-1, keepdims=True)

    # pair_to_pair[(a, b), (b, c)] = P(c | a, b); solve pi = pi @ pair_to_pair with one equation replaced
    # by the normalisation.
    pair_to_pair = np.zeros((n, n, n, n))
    for b in range(n):
        pair_to_pair[:, b, b, :] = transitions[:, b, :]
    system = pair_to_pair.reshape(n * n, n * n).T - np.eye(n * n)
    system[-1] = 1.0
    rhs = np.zeros(n * n)
    rhs[-1] = 1.0
    pairs = np.maximum(np.linalg.solve(system, rhs), 0.0)
    pairs = (pairs / pairs.sum()).reshape(n, n)

    entropy_rate = float(np.sum(pairs * _entropy(transitions, axis=-1)))
    current_next = _current_next(pairs, transitions)
    marginal = current_next.sum(axis=1)
    order1 = float(_entropy(current_next) - _entropy(marginal))
    return MarkovChain(transitions, pairs, entropy_rate, order1, float(_entropy(marginal)))


def _sample(chain: MarkovChain, n_sequences: int, length: int, rng: np.random.Generator) -> np.ndarray:
    n = chain.transitions.shape[0]
    out = np.empty((n_sequences, length), dtype=np.int64)
    first_pair = np.searchsorted(np.cumsum(chain.pair_distribution.ravel()), rng.random(n_sequences), side="right")
    first_pair = np.minimum(first_pair, n * n - 1)
    out[:, 0] = first_pair // n
    if length > 1:
        out[:, 1] = first_pair % n
    cumulative = np.cumsum(chain.transitions.reshape(n * n, n), axis=-1)
    for t in range(2, length):
        rows = cumulative[out[:, t - 2] * n + out[:, t - 1]]
        out[:, t] = np.minimum((rng.random(n_sequences)[:, None] >= rows).sum(axis=-1), n - 1)
    return out


def sample_sequences(chain, n_sequences, length, *, seed) -> np.ndarray:
    """Draw sequences from ``chain``, each starting with a pair drawn from its stationary distribution.

    Parameters
    ----------
    chain : MarkovChain
        From :func:`markov_chain`.
    n_sequences : int
        Number of sequences.
    length : int
        Symbols per sequence.
    seed : int
        Seed of the draw.

    Returns
    -------
    sequences : (n_sequences, length) int64 array
        Symbols in ``0 ... n - 1``; the same for the same arguments.

    Examples
    --------
    >>> chain = markov_chain(0, n_symbols=4)
    >>> x = sample_sequences(chain, 3, 10, seed=1)
    >>> x.shape, x.dtype.name, bool(np.array_equal(x, sample_sequences(chain, 3, 10, seed=1)))
    ((3, 10), 'int64', True)
    """
    return _sample(chain, n_sequences, length, np.random.default_rng(seed))


def chain_symbol_losses(chain, sequences) -> np.ndarray:
    r"""The chain's own loss on each symbol that has two predecessors: the floor, sampled.

    Parameters
    ----------
    chain : MarkovChain
        From :func:`markov_chain`.
    sequences : (n_sequences, length + 1) int array
        Symbols of ``chain``, for example from :func:`sample_sequences` or :func:`evaluation_sequences`,
        with ``length`` at least 2.

    Returns
    -------
    losses : (n_sequences, length - 1) float64 array
        ``losses[k, t - 1]`` is :math:`-\log P(x_{t+1} \mid x_{t-1}, x_t)` for sequence ``k``, ``t = 1 ...
        length - 1``: the same layout as :func:`symbol_losses`, so that the two can be compared symbol by
        symbol. Their mean over many symbols approaches :attr:`MarkovChain.entropy_rate`; over the symbols of
        one evaluation set it says how easy that set is.

    Examples
    --------
    >>> chain = markov_chain(0, n_symbols=4)
    >>> chain_symbol_losses(chain, sample_sequences(chain, 3, 10, seed=1)).shape
    (3, 8)
    """
    x = np.asarray(sequences)
    return -np.log(chain.transitions[x[:, :-2], x[:, 1:-1], x[:, 2:]])


MAX_BAG_STATES = 2**24
"""Most (multiset, previous symbol, current symbol) probabilities :func:`order_blind_entropy` holds: the number
grows combinatorially with ``positions``, and a few positions more than the chapter's would exhaust memory."""


def order_blind_entropy(chain, positions) -> np.ndarray:
    r"""Best loss of a predictor that sees the current symbol and, unordered, the symbols before it.

    Parameters
    ----------
    chain : MarkovChain
        From :func:`markov_chain`.
    positions : int
        Largest position :math:`t` to compute, at least 1. The work grows with the number of multisets of
        :math:`t` symbols: ``positions`` is refused when :math:`\binom{t + n - 1}{n - 1}\, n^2` exceeds
        :data:`MAX_BAG_STATES` (for 16 symbols, ``positions`` up to 6 is accepted).

    Returns
    -------
    entropies : (positions,) float64 array
        ``entropies[t - 1]`` is :math:`H(X_{t+1} \mid X_t, \{X_0, \dots, X_{t-1}\})` in nats, where
        :math:`\{\cdot\}` is the multiset (the symbols with their counts, in no order) and the sequence
        starts with a pair drawn from the stationary distribution, as in :func:`sample_sequences`.

    Notes
    -----
    This is the lowest expected loss, at position :math:`t`, of any predictor whose output is a function of
    the current symbol and of the multiset of the earlier ones: one that cannot tell the order of the
    earlier symbols. A single causal attention layer without positional information is such a predictor
    (its output at :math:`t` is a weighted mean over the multiset of symbols up to :math:`t`); a deeper one
    is not, because its second layer combines outputs of the first computed over different prefixes.

    At :math:`t = 1` the multiset holds one symbol, :math:`X_0`, so the value is the entropy rate
    :attr:`MarkovChain.entropy_rate`. It is computed exactly, without sampling, by carrying the joint
    probability of (multiset of :math:`X_0 \dots X_{s-1}`, :math:`X_{s-1}`, :math:`X_s`) forward one
    symbol at a time and then summing over :math:`X_{t-1}`:

    .. math::

        H = -\sum_{M, b, c} p(M, b, c) \log \frac{p(M, b, c)}{\sum_{c'} p(M, b, c')}, \qquad
        p(M, b, c) = \sum_a p(M, a, b)\, P(c \mid a, b).

    Examples
    --------
    >>> chain = markov_chain(0, n_symbols=4)
    >>> h = order_blind_entropy(chain, 3)
    >>> h.shape, bool(np.isclose(h[0], chain.entropy_rate))
    ((3,), True)
    >>> bool(np.all(h <= chain.order1_entropy + 1e-12))
    True
    """
    n = chain.transitions.shape[0]
    states = math.comb(positions + n - 1, n - 1) * n * n
    if states > MAX_BAG_STATES:
        raise ValueError(
            f"positions={positions} needs {states} probabilities for {n} symbols, more than "
            f"MAX_BAG_STATES={MAX_BAG_STATES}: ask for fewer positions"
        )
    transitions = chain.transitions
    # bags[k] is a multiset as a tuple of counts; joint[k, a, b] = p(multiset k, x[s-1] = a, x[s] = b)
    bags = [tuple(int(i == a) for i in range(n)) for a in range(n)]
    joint = np.zeros((n, n, n))
    joint[np.arange(n), np.arange(n), :] = chain.pair_distribution
    entropies = np.empty(positions)
    for t in range(1, positions + 1):
        following = np.einsum("kab,abc->kbc", joint, transitions)  # p(multiset, x[t] = b, x[t+1] = c)
        entropies[t - 1] = float(_entropy(following) - _entropy(following.sum(axis=-1)))
        if t == positions:
            break
        # x[t] = b joins the multiset; (x[t], x[t+1]) becomes the new pair
        index, new_bags = {}, []
        targets = np.empty((len(bags), n), dtype=np.int64)
        for k, bag in enumerate(bags):
            for b in range(n):
                grown = bag[:b] + (bag[b] + 1,) + bag[b + 1 :]
                if grown not in index:
                    index[grown] = len(new_bags)
                    new_bags.append(grown)
                targets[k, b] = index[grown]
        joint = np.zeros((len(new_bags), n, n))
        np.add.at(joint, (targets, np.arange(n)[None, :]), following)
        bags = new_bags
    return entropies


# --- The model -----------------------------------------------------------------------------------------------


class _Block(nn.Module):
    """Pre-norm causal self-attention and MLP; the scheme enters through ``bias`` and ``rotary``."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        hidden = _MLP_RATIO * d_model
        self.mlp = nn.Sequential(nn.Linear(d_model, hidden), nn.ReLU(), nn.Linear(hidden, d_model))

    def forward(self, x, bias, rotary, positions):
        """One block; ``rotary`` is None in a layer without rotation (``"none"``, or a NoPE layer of a hybrid)."""
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if rotary is not None:
            q = rotary(q, positions=positions)
            k = rotary(k, positions=positions)
        if bias is None:  # causal mask only: PyTorch's fused kernel
            mixed = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # the bias carries the scheme's terms and -inf above the diagonal
            logits = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
            mixed = torch.softmax(logits, dim=-1) @ v
        x = x + self.out(mixed.transpose(1, 2).reshape(batch, seq, width))
        return x + self.mlp(self.norm2(x))


class TinyCausalLM(nn.Module):
    r"""A small pre-norm Transformer language model with a choice of positional scheme.

    Parameters
    ----------
    scheme : {"sinusoidal", "learned", "rotary", "t5", "alibi", "none"}
        Where position enters. ``"sinusoidal"``: :class:`posenc.nn.SinusoidalPositionalEncoding` added to
        the token embeddings (Vaswani et al., 2017). ``"learned"``: :class:`posenc.nn.LearnedPositionalEmbedding`
        with ``max_len`` rows, added likewise. ``"rotary"``: :class:`posenc.nn.RotaryEmbedding` rotating the
        queries and keys of every layer (Su et al., 2021). ``"t5"``: one :class:`posenc.nn.T5RelativeBias`
        (unidirectional, :data:`T5_NUM_BUCKETS` buckets, maximum distance :data:`T5_MAX_DISTANCE`, as in
        T5's decoder) added to the logits of every layer, shared by the layers as in T5 (Raffel et al.,
        2020). ``"alibi"``: :class:`posenc.nn.ALiBiBias` added to the logits of every layer (Press et al.,
        2022). ``"none"``: no positional encoding; the causal mask is the only source of order (with two or
        more layers it is one: see :func:`shuffled_context_loss`).
    vocab_size : int, default 16
        Number of symbols.
    d_model : int, default 32
        Width; divisible by ``n_heads``; even for ``"sinusoidal"``; with an even head width
        ``d_model // n_heads`` for ``"rotary"``.
    n_heads : int, default 4
        Attention heads per layer.
    n_layers : int, default 2
        Number of blocks.
    max_len : int, default 32
        Rows of the learned table: ``"learned"`` refuses longer inputs. The other schemes accept any length
        (``max_len`` only sizes the sinusoidal cache).
    rotary_dim : int or None, default None
        ``"rotary"`` only: rotate the first ``rotary_dim`` features of each head and pass the others through
        (partial rotary, :class:`posenc.nn.RotaryEmbedding`'s ``rotary_dim``). None rotates the whole head;
        0 rotates nothing, which builds exactly the ``"none"`` model (the rotary module has no parameters,
        so the same seed gives the same weights). Otherwise even, in ``[2, d_model // n_heads]``.
    nope_layer_interval : int or None, default None
        ``"rotary"`` only: leave every ``nope_layer_interval``-th block without rotation, block ``i``
        (counted from 0) being such a NoPE block when ``(i + 1) % nope_layer_interval == 0``, the rule of
        ``TransformerBlock`` in Meta's Llama 4 reference code (``models/llama4/model.py``). At least 1
        (1: no block rotates). None: every block rotates.

    Notes
    -----
    ``forward(tokens, positions=None)`` maps ``(batch, seq)`` int64 symbols to ``(batch, seq, vocab_size)``
    next-symbol logits. Each block computes, with pre-norm (as GPT-2),

    .. math::

        x \leftarrow x + \mathrm{Attn}(\mathrm{LN}(x)), \qquad x \leftarrow x + \mathrm{MLP}(\mathrm{LN}(x)),

    where head :math:`h` weighs key :math:`j` for query :math:`i` by the softmax of
    :math:`q_i^\top k_j / \sqrt{d_h} + B_h(i, j)`, :math:`B_h` being the scheme's bias (zero for schemes
    without one) plus :math:`-\infty` for :math:`j > i`; the MLP is :math:`4 d` wide with ReLU. A final
    LayerNorm and a linear map give the logits. ``positions`` (rotary only) is a ``(seq,)`` floating tensor
    of real positions given to the rotary embedding instead of ``0, 1, ..., seq - 1``: dividing them by a
    factor is Position Interpolation (Chen et al., 2023).

    The Llama 4 reference code also changes other things in its NoPE layers, which this model does not
    copy: they skip the query-key RMSNorm of the rotary layers (this model has none), they may scale their
    queries by a factor that grows with the position (``attn_temperature_tuning``; 1 below position
    ``floor_scale - 1``, 8191 by default, so it would be 1 at every length used here), and when
    ``attention_chunk_size`` is set only the rotary layers attend within chunks, the NoPE layers to the
    whole causal context. ``model.rope_layers`` lists the blocks that rotate.

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409.
    .. [2] A. Haviv, O. Ram, O. Press, P. Izsak, O. Levy, "Transformer Language Models without Positional
       Encodings Still Learn Positional Information", Findings of EMNLP 2022, arXiv:2203.16634.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyCausalLM("alibi")
    >>> model(torch.zeros(2, 40, dtype=torch.long)).shape
    torch.Size([2, 40, 16])
    """

    def __init__(
        self,
        scheme,
        *,
        vocab_size=16,
        d_model=32,
        n_heads=4,
        n_layers=2,
        max_len=32,
        rotary_dim=None,
        nope_layer_interval=None,
    ):
        super().__init__()
        if scheme not in SCHEMES:  # any other name would silently build the "none" model
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if d_model % n_heads:
            raise ValueError(f"n_heads must divide d_model, got n_heads={n_heads} and d_model={d_model}")
        if scheme != "rotary" and (rotary_dim is not None or nope_layer_interval is not None):
            # the other schemes would silently ignore them
            raise ValueError(f"rotary_dim and nope_layer_interval are for the rotary scheme only, not {scheme!r}")
        head_dim = d_model // n_heads
        if rotary_dim is not None and (
            isinstance(rotary_dim, bool)
            or not isinstance(rotary_dim, int)
            or rotary_dim % 2
            or not 0 <= rotary_dim <= head_dim
        ):
            raise ValueError(f"rotary_dim must be None or an even int in [0, {head_dim}], got {rotary_dim!r}")
        if nope_layer_interval is not None and (
            isinstance(nope_layer_interval, bool) or not isinstance(nope_layer_interval, int) or nope_layer_interval < 1
        ):
            raise ValueError(f"nope_layer_interval must be None or an int >= 1, got {nope_layer_interval!r}")
        self.rotary_dim, self.nope_layer_interval = rotary_dim, nope_layer_interval
        self.scheme, self.vocab_size, self.max_len = scheme, vocab_size, max_len
        self.d_model, self.n_heads, self.n_layers = d_model, n_heads, n_layers
        self.embed = nn.Embedding(self.vocab_size, self.d_model)
        self.absolute = None
        self.rotary = None
        self.relative = None
        if scheme == "sinusoidal":
            self.absolute = SinusoidalPositionalEncoding(self.d_model, max_len=self.max_len)
        elif scheme == "learned":
            self.absolute = LearnedPositionalEmbedding(self.max_len, self.d_model)
        elif scheme == "rotary" and rotary_dim != 0:
            self.rotary = RotaryEmbedding(head_dim, rotary_dim=rotary_dim)
        elif scheme == "t5":
            self.relative = T5RelativeBias(
                self.n_heads, bidirectional=False, num_buckets=T5_NUM_BUCKETS, max_distance=T5_MAX_DISTANCE
            )
        elif scheme == "alibi":
            self.relative = ALiBiBias(self.n_heads)
        self.blocks = nn.ModuleList(_Block(self.d_model, self.n_heads) for _ in range(self.n_layers))
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, self.vocab_size)
        self.rope_layers = tuple(
            i
            for i in range(self.n_layers)
            if self.rotary is not None and (nope_layer_interval is None or (i + 1) % nope_layer_interval)
        )
        """Indices (from 0) of the blocks whose queries and keys are rotated."""

    def forward(self, tokens: torch.Tensor, *, positions=None) -> torch.Tensor:
        # A longer input than a "learned" table has rows is refused by posenc.nn.LearnedPositionalEmbedding.
        if positions is not None and self.scheme != "rotary":  # the other schemes would ignore them
            raise ValueError(f"positions is used by the rotary scheme only, not {self.scheme!r}: pass None")
        return self._logits(tokens, positions)

    def _bias(self, seq: int, dtype: torch.dtype, window=None):
        """The ``(n_heads, seq, seq)`` logit bias with the causal mask, or None for the causal mask alone.

        ``window`` (an int or None) also masks every key ``window`` or more positions before the query.
        """
        bias = None
        if self.scheme == "alibi":
            bias = self.relative(seq, seq, causal=True).to(dtype)
        elif self.scheme == "t5":
            bias = self.relative(seq, seq).to(dtype) + torch.full((seq, seq), float("-inf"), dtype=dtype).triu(1)
        if window is not None:
            masked = torch.full((seq, seq), float("-inf"), dtype=dtype)
            mask = masked.triu(1) + masked.tril(-window)
            bias = mask if bias is None else bias + mask
        return bias

    def _logits(self, tokens: torch.Tensor, positions=None, window=None) -> torch.Tensor:
        """``forward`` without the checks, for the training loop."""
        x = self.embed(tokens)
        if self.absolute is not None:
            x = self.absolute(x)
        bias = self._bias(tokens.shape[1], x.dtype, window)
        for i, block in enumerate(self.blocks):
            x = block(x, bias, self.rotary if i in self.rope_layers else None, positions)
        return self.head(self.norm(x))

    def extra_repr(self) -> str:
        extra = f"scheme={self.scheme!r}, max_len={self.max_len}"
        if self.rotary_dim is not None:
            extra += f", rotary_dim={self.rotary_dim}"
        if self.nope_layer_interval is not None:
            extra += f", nope_layer_interval={self.nope_layer_interval}"
        return extra


# --- Training and evaluation ---------------------------------------------------------------------------------


def _scored_loss(model: TinyCausalLM, sequences: torch.Tensor, positions=None, window=None) -> torch.Tensor:
    """Mean cross-entropy of the predictions of symbols 2, 3, ... (each has two predecessors).

    ``sequences`` holds ``length + 1`` symbols: the model reads the first ``length``.
    """
    logits = model._logits(sequences[:, :-1], positions, window)[:, 1:]
    targets = sequences[:, 2:]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def train_steps(
    model: nn.Module, loss_at: Callable[[int], torch.Tensor], *, steps: int, lr: float, lr_name: str = "lr"
) -> float:
    """The book's training recipe, shared by every model it trains (chapters 9 and 12).

    Adam (:class:`posenc_book.adam.Adam`, fused), the learning rate decayed from ``lr`` to 0 along a half
    cosine, gradients clipped to norm 1; ``loss_at(step)`` computes step ``step``'s loss on fresh data, so
    each caller keeps its own data and loss. The model is in training mode during the loop and in
    evaluation mode after it.

    Parameters
    ----------
    model : torch.nn.Module
        The model, trained in place.
    loss_at : callable
        ``loss_at(step) -> tensor``, the scalar loss of step ``step`` (0, ..., ``steps - 1``), with its graph.
    steps : int
        Optimizer steps.
    lr : float
        The learning rate at step 0.
    lr_name : str, default "lr"
        The caller's name for ``lr``, for the error message.

    Returns
    -------
    float
        The mean loss of the last 10 % of the steps (at least the last one).

    Raises
    ------
    ValueError
        If a loss is not finite, naming the step, the loss and ``lr_name`` (rather than training on NaN).
    """
    optimizer = Adam(model.parameters(), lr=lr, fused=True)
    model.train()
    tail = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * step / steps))
        loss = loss_at(step)
        value = float(loss.detach())
        if not math.isfinite(value):
            raise ValueError(f"training diverged at step {step} (loss {value}): {lr_name}={lr} is too large")
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), _GRAD_CLIP)
        optimizer.step()
        if step >= steps - max(1, steps // 10):
            tail.append(value)
    model.eval()
    return float(np.mean(tail))


def _train(model, chain, *, steps, batch_size, length, lr, rng, positions=None, lr_name="lr") -> float:
    """:func:`train_steps` on ``batch_size`` fresh sequences of the chain per step, scored by :func:`_scored_loss`."""

    def loss_at(step: int) -> torch.Tensor:
        batch = torch.from_numpy(_sample(chain, batch_size, length + 1, rng))
        return _scored_loss(model, batch, positions)

    return train_steps(model, loss_at, steps=steps, lr=lr, lr_name=lr_name)


def _evaluate(model, sequences: np.ndarray, positions=None, window=None) -> float:
    """Mean scored loss over ``sequences`` (each ``length + 1`` symbols), in batches of bounded size."""
    n, length = sequences.shape[0], sequences.shape[1] - 1
    chunk = max(1, min(n, _ATTENTION_CHUNK // (model.n_heads * length * length)))
    total = 0.0
    with torch.no_grad():
        for start in range(0, n, chunk):
            part = torch.from_numpy(sequences[start : start + chunk])
            total += float(_scored_loss(model, part, positions, window)) * part.shape[0]
    return total / n


def _eval_sequences(chain, source_seed: int, length: int, eval_tokens: int) -> np.ndarray:
    """About ``eval_tokens`` scored symbols at context ``length``; the same for every scheme and model seed."""
    n = max(1, min(_MAX_EVAL_SEQUENCES, eval_tokens // (length - 1)))
    return _sample(chain, n, length + 1, np.random.default_rng([source_seed, 1, length]))


def _build_and_train(
    scheme,
    seed,
    chain,
    *,
    train_len,
    steps,
    batch_size,
    d_model,
    n_heads,
    n_layers,
    lr,
    rotary_dim=None,
    nope_layer_interval=None,
):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyCausalLM(
            scheme,
            vocab_size=chain.transitions.shape[0],
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            max_len=train_len,
            rotary_dim=rotary_dim,
            nope_layer_interval=nope_layer_interval,
        )
    perturb_initial_weights(model)  # only inside posenc_book.robustness.perturbed
    rng = np.random.default_rng([seed, 2])
    train_loss = _train(model, chain, steps=steps, batch_size=batch_size, length=train_len, lr=lr, rng=rng)
    return model, train_loss


class ExtrapolationResult(NamedTuple):
    """What :func:`train_and_evaluate` measured.

    Attributes
    ----------
    scheme : str
    seed, source_seed, train_len : int
    losses : dict of int to float
        Mean cross-entropy in nats per evaluation length, over the symbols that have two predecessors. A
        ``"learned"`` model has no entry for a length beyond ``train_len``: it has no vector for those
        positions, so there is nothing to measure.
    not_evaluated : tuple of int
        The requested lengths missing from ``losses``, for that reason.
    train_loss : float
        Mean training loss over the last 10 % of the steps.
    entropy_rate, order1_entropy : float
        The chain's loss floor and the lowest loss from the current symbol alone (see :class:`MarkovChain`).
    model : TinyCausalLM
        The trained model, in eval mode.
    """

    scheme: str
    seed: int
    source_seed: int
    train_len: int
    losses: dict
    not_evaluated: tuple
    train_loss: float
    entropy_rate: float
    order1_entropy: float
    model: TinyCausalLM


def train_and_evaluate(
    scheme,
    *,
    seed,
    source_seed=0,
    concentration=0.05,
    train_len=32,
    eval_lens=(32, 64, 128, 256),
    steps=150,
    batch_size=16,
    d_model=32,
    n_heads=4,
    n_layers=2,
    lr=1e-2,
    eval_tokens=4096,
    rotary_dim=None,
    nope_layer_interval=None,
) -> ExtrapolationResult:
    r"""Train a :class:`TinyCausalLM` on sequences of ``train_len`` symbols and score it at other lengths.

    Parameters
    ----------
    scheme : {"sinusoidal", "learned", "rotary", "t5", "alibi", "none"}
        The positional scheme (see :class:`TinyCausalLM`).
    seed : int
        Seeds the model's initial weights and its training sequences.
    source_seed : int, default 0
        Seeds the chain (:func:`markov_chain` with :data:`N_SYMBOLS` symbols) and the evaluation
        sequences, which are therefore the same for every scheme and every ``seed``.
    concentration : float, default 0.05
        As in :func:`markov_chain`.
    train_len : int, default 32
        Context length of the training sequences, at least 2.
    eval_lens : sequence of int, default (32, 64, 128, 256)
        Context lengths to score, each at least 2.
    steps : int, default 150
        Adam updates, each on ``batch_size`` fresh sequences.
    batch_size : int, default 16
        Sequences per update.
    d_model, n_heads, n_layers : int, default 32, 4, 2
        As in :class:`TinyCausalLM`.
    lr : float, default 1e-2
        Peak learning rate; it decays to 0 along a half cosine. Gradients are clipped to norm 1. A rate so
        large that the loss stops being finite raises a ``ValueError``.
    eval_tokens : int, default 4096
        Scored symbols per evaluation length (whole sequences, at least one, at most 4096 of them).
    rotary_dim, nope_layer_interval : int or None, default None
        Partial rotary and NoPE layers, for ``scheme="rotary"`` only (see :class:`TinyCausalLM`). With
        both None the model is the plain rotary one, trained exactly as before these options existed.

    Returns
    -------
    result : ExtrapolationResult
        ``result.losses[L]`` is the mean loss at context length ``L``. A ``"learned"`` model has no entry
        beyond ``train_len`` (those lengths are in ``result.not_evaluated``) rather than an invented number.

    Notes
    -----
    A model of context length :math:`L` reads :math:`x_0 \dots x_{L-1}` and predicts :math:`x_1 \dots x_L`;
    the loss averages the predictions of :math:`x_2 \dots x_L`, each of which has two predecessors, so its
    floor is exactly the chain's entropy rate (:func:`markov_chain`). An unknown ``scheme``, or ``n_heads``
    that does not divide ``d_model``, is refused before anything is trained.

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409.

    Examples
    --------
    >>> result = train_and_evaluate("learned", seed=0, train_len=8, eval_lens=(8, 16), steps=2, d_model=8)
    >>> sorted(result.losses), result.not_evaluated
    ([8], (16,))
    """
    with _OneThread():
        chain = markov_chain(source_seed, n_symbols=N_SYMBOLS, concentration=concentration)
        model, train_loss = _build_and_train(
            scheme,
            seed,
            chain,
            train_len=train_len,
            steps=steps,
            batch_size=batch_size,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            lr=lr,
            rotary_dim=rotary_dim,
            nope_layer_interval=nope_layer_interval,
        )
        losses, not_evaluated = {}, []
        for length in eval_lens:
            if scheme == "learned" and length > train_len:
                not_evaluated.append(length)
                continue
            losses[length] = _evaluate(model, _eval_sequences(chain, source_seed, length, eval_tokens))
    return ExtrapolationResult(
        scheme,
        seed,
        source_seed,
        train_len,
        losses,
        tuple(not_evaluated),
        train_loss,
        chain.entropy_rate,
        chain.order1_entropy,
        model,
    )


def evaluate(model, length, *, source_seed=0, concentration=0.05, window=None, eval_tokens=4096) -> float:
    r"""Score a trained model again at one context length, optionally seeing only its most recent keys.

    Parameters
    ----------
    model : TinyCausalLM
        A trained model, for example ``result.model`` from :func:`train_and_evaluate`.
    length : int
        Context length, at least 2 (at most ``model.max_len`` for ``"learned"``).
    source_seed : int, default 0
        The chain and evaluation sequences, as in :func:`train_and_evaluate`.
    concentration : float, default 0.05
        As in :func:`markov_chain`.
    window : int or None, default None
        If a positive int, every attention head of every layer is masked to the keys
        fewer than ``window`` positions before its query (the query itself included): a sliding window.
        None keeps the causal mask alone.
    eval_tokens : int, default 4096
        As in :func:`train_and_evaluate`.

    Returns
    -------
    loss : float
        Mean loss in nats over the same symbols as ``train_and_evaluate(..., eval_lens=(length,))``; with
        ``window=None`` it is that function's number, computed the same way.

    Notes
    -----
    A window of the training length keeps every query's keys within the distances, and as few as, training
    showed it, while leaving the queries' own absolute positions as they are. Comparing the windowed and the
    full loss at a long length therefore separates what the keys beyond the training distance do from what
    the position of the query does.

    Examples
    --------
    >>> r = train_and_evaluate("alibi", seed=0, train_len=8, eval_lens=(16,), steps=2, d_model=8)
    >>> evaluate(r.model, 16) == r.losses[16]
    True
    """
    with _OneThread():
        chain = markov_chain(source_seed, n_symbols=model.vocab_size, concentration=concentration)
        model.eval()
        return _evaluate(model, _eval_sequences(chain, source_seed, length, eval_tokens), window=window)


def evaluation_sequences(length, *, source_seed=0, concentration=0.05, eval_tokens=4096) -> np.ndarray:
    """The sequences :func:`train_and_evaluate` and :func:`evaluate` score at context ``length``.

    Parameters
    ----------
    length : int
        Context length, at least 2.
    source_seed, concentration, eval_tokens
        As in :func:`train_and_evaluate`.

    Returns
    -------
    sequences : (n_sequences, length + 1) int64 array
        ``max(1, min(4096, eval_tokens // (length - 1)))`` sequences; a model reads the first ``length``
        symbols of each. Every length has its own draw, so two lengths are scored on different sequences
        (132 of them at 32 symbols, 16 at 256 with the defaults): :func:`chain_symbol_losses` on each says
        how easy each draw is.

    Examples
    --------
    >>> evaluation_sequences(32).shape, evaluation_sequences(256).shape
    ((132, 33), (16, 257))
    """
    chain = markov_chain(source_seed, n_symbols=N_SYMBOLS, concentration=concentration)
    return _eval_sequences(chain, source_seed, length, eval_tokens)


def symbol_losses(model, sequences, *, window=None) -> np.ndarray:
    r"""The loss of each scored prediction of a trained model, sequence by sequence and position by position.

    Parameters
    ----------
    model : TinyCausalLM
        A trained model, for example ``result.model`` from :func:`train_and_evaluate`.
    sequences : (n_sequences, length + 1) int array
        Symbols of the model's chain (:func:`sample_sequences`, :func:`evaluation_sequences`); the model
        reads the first ``length`` of each, ``length`` at least 2 (at most ``model.max_len`` for
        ``"learned"``).
    window : int or None, default None
        As in :func:`evaluate`.

    Returns
    -------
    losses : (n_sequences, length - 1) float64 array
        ``losses[k, t - 1]`` is the cross-entropy, in nats, of the prediction of symbol ``t + 1`` of sequence
        ``k``, made at position ``t`` (``t = 1 ... length - 1``; the prediction at position 0 is not scored,
        as in :func:`train_and_evaluate`). The mean of all of them is :func:`evaluate`'s number on these
        sequences, up to the rounding of a sum in another order.

    Notes
    -----
    The model is causal: its prediction at position :math:`t` depends on :math:`x_0 \dots x_t` only. So the
    losses at positions ``1 ... 31`` of a 256-symbol read are those of a 32-symbol read of the first 33
    symbols of the same sequences, up to rounding, and one read of long sequences gives the loss at every
    context length on the same symbols: the mean of the first ``L - 1`` columns is the loss at context
    length ``L``. Comparing columns separates what the position of a prediction does from which sequences
    were drawn.

    Examples
    --------
    >>> r = train_and_evaluate("alibi", seed=0, train_len=8, eval_lens=(8,), steps=2, d_model=8)
    >>> x = sample_sequences(markov_chain(0), 4, 17, seed=3)
    >>> symbol_losses(r.model, x).shape
    (4, 15)
    """
    x = np.asarray(sequences)
    n, length = x.shape[0], x.shape[1] - 1
    chunk = max(1, min(n, _ATTENTION_CHUNK // (model.n_heads * length * length)))
    parts = []
    with _OneThread(), torch.no_grad():
        model.eval()
        for start in range(0, n, chunk):
            part = torch.from_numpy(x[start : start + chunk])
            logits = model._logits(part[:, :-1], None, window)[:, 1:]
            targets = part[:, 2:]
            loss = nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
            parts.append(loss.double().numpy())
    return np.concatenate(parts)


class ShuffleResult(NamedTuple):
    r"""What :func:`shuffled_context_loss` measured, in nats.

    Attributes
    ----------
    in_order : float
        Mean loss of the prediction after the last symbol read, the earlier symbols in their order.
    shuffled : float
        The same predictions with the symbols before the current one permuted at random (each sequence
        its own permutation); the current symbol stays last. This is the loss of a predictor that sees the
        earlier symbols only as a multiset (the model fed them in a random order), so, up to the sampling
        error of ``n_sequences`` symbols, it bounds from above the best such loss at this position,
        :func:`order_blind_entropy` at :math:`t` = ``length - 1``.
    current_symbol_only : float
        Loss, on the same symbols, of the best predictor that sees only the current one: the mean of
        :math:`-\log P(x_{L} \mid x_{L-1})` under the stationary distribution, whose expectation is
        :attr:`MarkovChain.order1_entropy`. ``current_symbol_only - in_order`` is how much the model gains
        at this position from the earlier symbols, on these sequences.
    n_sequences, length : int
    """

    in_order: float
    shuffled: float
    current_symbol_only: float
    n_sequences: int
    length: int


def shuffled_context_loss(
    model, length, *, source_seed=0, concentration=0.05, n_sequences=2048, seed=0
) -> ShuffleResult:
    r"""Does the model's prediction depend on the order of the earlier symbols? Shuffle them and see.

    Parameters
    ----------
    model : TinyCausalLM
        A trained model, for example ``result.model`` from :func:`train_and_evaluate`.
    length : int
        Symbols read, at least 3 (at most ``model.max_len`` for ``"learned"``): the model predicts symbol
        ``length`` from symbols ``0 ... length - 1``.
    source_seed : int, default 0
        The chain, as in :func:`train_and_evaluate`.
    concentration : float, default 0.05
        As in :func:`markov_chain`.
    n_sequences : int, default 2048
        Sequences, hence predictions. With 2048, the gap between the two
        losses of a trained model of the chapter moves by 0.01 to 0.02 nats from one ``seed`` to another.
    seed : int, default 0
        Seeds the sequences (drawn apart from the evaluation sequences of :func:`evaluate`) and the
        permutations.

    Returns
    -------
    result : ShuffleResult

    Notes
    -----
    A predictor that sees the earlier symbols only as a multiset (see :func:`order_blind_entropy`) gives
    exactly the same prediction after the shuffle, so its two losses are equal (up to rounding in the
    order of a sum). A gap between them is therefore a direct measurement that the prediction uses the
    order of the context; it says nothing about *which* order information (absolute or relative) is used.
    Only the last prediction of each sequence is scored: under a causal mask every earlier prediction
    would see a shuffled prefix of a different length.

    Examples
    --------
    >>> r = train_and_evaluate("none", seed=0, train_len=8, eval_lens=(8,), steps=2, d_model=8)
    >>> s = shuffled_context_loss(r.model, 8, n_sequences=16)
    >>> s.n_sequences, s.length, s.in_order > 0 and s.shuffled > 0
    (16, 8, True)
    """
    rng = np.random.default_rng([source_seed, 4, length, seed])
    with _OneThread():
        chain = markov_chain(source_seed, n_symbols=model.vocab_size, concentration=concentration)
        sequences = _sample(chain, n_sequences, length + 1, rng)
        shuffled = sequences.copy()
        order = np.argsort(rng.random((n_sequences, length - 1)), axis=1)
        shuffled[:, : length - 1] = np.take_along_axis(sequences[:, : length - 1], order, axis=1)
        targets = torch.from_numpy(sequences[:, length])
        model.eval()
        losses = []
        chunk = max(1, _BATCH_SYMBOLS // length)
        with torch.no_grad():
            for tokens in (sequences, shuffled):
                logits = torch.cat(
                    [
                        model._logits(torch.from_numpy(tokens[start : start + chunk, :length]))[:, -1]
                        for start in range(0, n_sequences, chunk)
                    ]
                )
                losses.append(float(nn.functional.cross_entropy(logits, targets)))
    current_next = _current_next(chain.pair_distribution, chain.transitions)
    current_symbol_only = -np.log(current_next / current_next.sum(axis=1, keepdims=True))
    order1 = float(current_symbol_only[sequences[:, length - 1], sequences[:, length]].mean())
    return ShuffleResult(losses[0], losses[1], order1, n_sequences, length)


class InterpolationResult(NamedTuple):
    """What :func:`position_interpolation` measured; every loss in nats, as in :class:`ExtrapolationResult`.

    Attributes
    ----------
    seed, source_seed, train_len, factor, eval_len, finetune_steps : int
        ``eval_len = factor * train_len``.
    trained : float
        Loss of the trained model at ``train_len`` (positions ``0 ... train_len - 1``).
    extrapolated, interpolated : float
        Loss of the same model at ``eval_len`` with positions ``m = 0 ... eval_len - 1`` (extrapolation)
        or ``m / factor`` (Position Interpolation), without fine-tuning.
    finetuned_extrapolated, finetuned_interpolated : float
        The same two losses after ``finetune_steps`` updates at ``eval_len``, each of two copies of the
        model fine-tuned with its own positions on the same sequences.
    finetuned_extrapolated_short, finetuned_interpolated_short : float
        The two fine-tuned copies scored back at ``train_len``, each with its own positions (``m`` or
        ``m / factor``).
    interpolated_short : float
        The trained model, not fine-tuned, at ``train_len`` with positions ``m / factor``: neighbours a
        ``1 / factor`` step apart, but no key farther or more numerous than in training.
    """

    seed: int
    source_seed: int
    train_len: int
    factor: int
    eval_len: int
    finetune_steps: int
    trained: float
    extrapolated: float
    interpolated: float
    finetuned_extrapolated: float
    finetuned_interpolated: float
    finetuned_extrapolated_short: float
    finetuned_interpolated_short: float
    interpolated_short: float


def position_interpolation(
    *,
    seed,
    source_seed=0,
    concentration=0.05,
    train_len=32,
    factor=4,
    steps=150,
    finetune_steps=30,
    batch_size=16,
    d_model=32,
    n_heads=4,
    n_layers=2,
    lr=1e-2,
    finetune_lr=3e-3,
    eval_tokens=4096,
) -> InterpolationResult:
    r"""Run a rotary model at ``factor`` times its training length, extrapolating or interpolating positions.

    Parameters
    ----------
    seed, source_seed, concentration, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens
        As in :func:`train_and_evaluate` with ``scheme="rotary"``: equal arguments train the same model.
    factor : int, default 4
        Ratio of the longer length to ``train_len``, at least 2.
    finetune_steps : int, default 30
        Adam updates at the longer length for each fine-tuned copy. Each update uses
        ``max(1, batch_size // factor)`` sequences, about as many symbols as a training update.
    finetune_lr : float, default 3e-3
        Peak learning rate of fine-tuning (half-cosine decay to 0).

    Returns
    -------
    result : InterpolationResult

    Notes
    -----
    Position Interpolation (Chen et al., 2023) gives the rotary embedding the positions
    :math:`m' = m\,L / L'` for a model trained at length :math:`L` and run at :math:`L' = \mathrm{factor}
    \cdot L`, for :math:`m = 0, \dots, L' - 1`. The largest, :math:`(L' - 1)/\mathrm{factor} = L - 1/\mathrm{factor}`,
    lies :math:`1 - 1/\mathrm{factor}` of a step beyond the last trained position :math:`L - 1` (31.75 against 31
    for :math:`L = 32` and a factor of 4): every angle :math:`m'\theta_i` stays within one step of the range seen
    in training, not inside it. transformers'
    ``{"rope_type": "linear", "factor": factor}`` divides the frequencies instead, which gives the same
    angles. The price is resolution: neighbours are :math:`1/\mathrm{factor}` apart instead of 1.
    Chen et al. fine-tune their interpolated LLaMA models for at most 1000 steps; here ``finetune_steps``
    updates of a tiny model stand for that.

    References
    ----------
    .. [1] S. Chen, S. Wong, L. Chen, Y. Tian, "Extending Context Window of Large Language Models via
       Positional Interpolation", 2023, arXiv:2306.15595.

    Examples
    --------
    >>> r = position_interpolation(seed=0, train_len=8, factor=2, steps=2, finetune_steps=1, d_model=8)
    >>> r.eval_len, r.factor
    (16, 2)
    """
    eval_len = factor * train_len
    finetune_batch = max(1, batch_size // factor)

    with _OneThread():
        chain = markov_chain(source_seed, n_symbols=N_SYMBOLS, concentration=concentration)
        model, _ = _build_and_train(
            "rotary",
            seed,
            chain,
            train_len=train_len,
            steps=steps,
            batch_size=batch_size,
            d_model=d_model,
            n_heads=n_heads,
            n_layers=n_layers,
            lr=lr,
        )
        short = _eval_sequences(chain, source_seed, train_len, eval_tokens)
        long = _eval_sequences(chain, source_seed, eval_len, eval_tokens)
        scaled = {length: torch.arange(length, dtype=torch.float64) / factor for length in (train_len, eval_len)}
        trained = _evaluate(model, short)
        extrapolated = _evaluate(model, long)
        interpolated = _evaluate(model, long, scaled[eval_len])
        interpolated_short = _evaluate(model, short, scaled[train_len])
        finetuned = {}
        for name, interpolate in (("extrapolated", False), ("interpolated", True)):
            tuned = TinyCausalLM(
                "rotary",
                vocab_size=model.vocab_size,
                d_model=d_model,
                n_heads=n_heads,
                n_layers=n_layers,
                max_len=train_len,
            )
            tuned.load_state_dict(model.state_dict())
            long_positions = scaled[eval_len] if interpolate else None
            short_positions = scaled[train_len] if interpolate else None
            _train(
                tuned,
                chain,
                steps=finetune_steps,
                batch_size=finetune_batch,
                length=eval_len,
                lr=finetune_lr,
                rng=np.random.default_rng([seed, 3]),
                positions=long_positions,
                lr_name="finetune_lr",
            )
            finetuned[name] = (_evaluate(tuned, long, long_positions), _evaluate(tuned, short, short_positions))
    return InterpolationResult(
        seed,
        source_seed,
        train_len,
        factor,
        eval_len,
        finetune_steps,
        trained,
        extrapolated,
        interpolated,
        finetuned["extrapolated"][0],
        finetuned["interpolated"][0],
        finetuned["extrapolated"][1],
        finetuned["interpolated"][1],
        interpolated_short,
    )


# --- A task that needs order: copying --------------------------------------------------------------------------


class CopyResult(NamedTuple):
    """What :func:`copy_task` measured.

    Attributes
    ----------
    scheme : str
    seed, n_symbols, max_train_len : int
    accuracy : dict of int to float
        Token accuracy of the copy per number of symbols copied: the share of the copied symbols that the
        model's most likely next symbol gets right, each predicted from the true symbols before it.
    not_evaluated : tuple of int
        Requested lengths a ``"learned"`` model cannot run (its table is too short), left out of ``accuracy``.
    train_loss : float
        Mean training loss over the last 10 % of the steps, in nats per copied symbol.
    model : TinyCausalLM
        The trained model, in eval mode.
    """

    scheme: str
    seed: int
    n_symbols: int
    max_train_len: int
    accuracy: dict
    not_evaluated: tuple
    train_loss: float
    model: TinyCausalLM


def _copy_sequences(rng: np.random.Generator, n_sequences: int, length: int, n_symbols: int) -> torch.Tensor:
    """``<bos> x_1 ... x_length <sep> x_1 ... x_length``, with ``<sep> = n_symbols`` and ``<bos> = n_symbols + 1``."""
    x = rng.integers(0, n_symbols, (n_sequences, length))
    bos = np.full((n_sequences, 1), n_symbols + 1)
    sep = np.full((n_sequences, 1), n_symbols)
    return torch.from_numpy(np.concatenate([bos, x, sep, x], axis=1))


def _copy_logits_and_targets(model: TinyCausalLM, sequences: torch.Tensor):
    """Logits that predict the copied symbols, ``(batch, length, vocab)``, and those symbols ``(batch, length)``."""
    length = (sequences.shape[1] - 2) // 2
    logits = model._logits(sequences[:, :-1])[:, length + 1 :]  # read <sep> and the copy so far
    return logits, sequences[:, length + 2 :]


def copy_task(
    scheme,
    *,
    seed,
    n_symbols=8,
    max_train_len=8,
    eval_lens=(8, 12, 16),
    steps=600,
    batch_size=32,
    d_model=64,
    n_heads=4,
    n_layers=2,
    lr=3e-3,
    eval_sequences=256,
    eval_seed=0,
    rotary_dim=None,
    nope_layer_interval=None,
) -> CopyResult:
    r"""Train a :class:`TinyCausalLM` to copy short random sequences, then ask it to copy longer ones.

    Parameters
    ----------
    scheme : {"sinusoidal", "learned", "rotary", "t5", "alibi", "none"}
        The positional scheme (see :class:`TinyCausalLM`).
    seed : int
        Seeds the model's initial weights and its training sequences.
    n_symbols : int, default 8
        Symbols the copied sequences are drawn from, uniformly and independently; the model's vocabulary
        adds a separator and a start symbol.
    max_train_len : int, default 8
        Each training step copies sequences of one length drawn uniformly from ``1 ... max_train_len``.
    eval_lens : sequence of int, default (8, 12, 16)
        Lengths of the sequences to copy at evaluation.
    steps, batch_size, lr
        Adam updates, sequences per update and peak learning rate (half-cosine decay to 0, gradients
        clipped to norm 1), as in :func:`train_and_evaluate`.
    d_model, n_heads, n_layers, rotary_dim, nope_layer_interval
        As in :class:`TinyCausalLM`.
    eval_sequences : int, default 256
        Sequences copied per evaluation length.
    eval_seed : int, default 0
        Seeds the evaluation sequences, which are therefore the same for every scheme and every ``seed``.

    Returns
    -------
    result : CopyResult

    Notes
    -----
    A sequence of length :math:`n` is ``<bos>`` :math:`x_1 \dots x_n` ``<sep>`` :math:`x_1 \dots x_n`, of
    :math:`2n + 2` symbols; the loss and the accuracy cover the :math:`n` symbols after ``<sep>`` only,
    each predicted with the true symbols before it (teacher forcing), so the accuracy is a share of
    symbols, not of sequences copied without a mistake. Symbols repeat within a sequence, so the symbol
    that followed an earlier occurrence of the current one is no reliable answer: the model must find the
    symbol :math:`n` positions back, a distance that grows with the length. Kazemnejad et al. (2023)
    include a copy task, its input and output separated by a ``[SEP]`` token, among the tasks of their
    study of length generalization.

    References
    ----------
    .. [1] A. Kazemnejad, I. Padhi, K. Natesan Ramamurthy, P. Das, S. Reddy, "The Impact of Positional
       Encoding on Length Generalization in Transformers", NeurIPS 2023, arXiv:2305.19466.

    Examples
    --------
    >>> r = copy_task("alibi", seed=0, max_train_len=4, eval_lens=(4, 8), steps=2, d_model=8)
    >>> sorted(r.accuracy), all(0 <= a <= 1 for a in r.accuracy.values())
    ([4, 8], True)
    """
    vocab = n_symbols + 2
    with _OneThread():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = TinyCausalLM(
                scheme,
                vocab_size=vocab,
                d_model=d_model,
                n_heads=n_heads,
                n_layers=n_layers,
                max_len=2 * max_train_len + 1,
                rotary_dim=rotary_dim,
                nope_layer_interval=nope_layer_interval,
            )
        perturb_initial_weights(model)  # only inside posenc_book.robustness.perturbed
        rng = np.random.default_rng([seed, 5])

        def loss_at(step: int) -> torch.Tensor:
            length = int(rng.integers(1, max_train_len + 1))
            logits, targets = _copy_logits_and_targets(model, _copy_sequences(rng, batch_size, length, n_symbols))
            return nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

        train_loss = train_steps(model, loss_at, steps=steps, lr=lr)
        accuracy, not_evaluated = {}, []
        with torch.no_grad():
            for length in eval_lens:
                if scheme == "learned" and 2 * length + 1 > model.max_len:
                    not_evaluated.append(length)
                    continue
                sequences = _copy_sequences(
                    np.random.default_rng([6, eval_seed, n_symbols, length]), eval_sequences, length, n_symbols
                )
                logits, targets = _copy_logits_and_targets(model, sequences)
                accuracy[length] = float((logits.argmax(dim=-1) == targets).double().mean())
    return CopyResult(scheme, seed, n_symbols, max_train_len, accuracy, tuple(not_evaluated), train_loss, model)


# --- Several models at once ------------------------------------------------------------------------------------


def _run_perturbed(function: Callable[..., Any], perturbation: Perturbation | None, kwargs: Mapping[str, Any]) -> Any:
    """``function(**kwargs)`` under the caller's perturbation: the worker half of :func:`train_in_processes`."""
    with perturbed(perturbation):
        return function(**kwargs)


def train_in_processes(
    function: Callable[..., Any], jobs: Mapping[Hashable, Mapping[str, Any]], *, processes: int | None = None
) -> dict:
    """Run one of this module's training functions for several models at once, in worker processes.

    Parameters
    ----------
    function : callable
        :func:`train_and_evaluate`, :func:`copy_task` or another function of a module (workers import it by
        name), returning something that pickles.
    jobs : mapping of hashable to mapping of str to object
        ``key -> keyword arguments`` of one call of ``function``.
    processes : int or None, default None
        Worker processes. None: one per processor this process may run on, at most one per job. With 1 the
        calls run here, one after the other.

    Returns
    -------
    results : dict
        ``key -> function(**jobs[key])``, in the order of ``jobs``.

    Notes
    -----
    Each training function runs torch on one thread and seeds everything from its arguments, so a call gives
    the same numbers, bit for bit, in a worker as in this process (``tests/test_extrapolation.py`` compares
    them): the workers only let a machine with several processors train several models at once. They are
    started with ``spawn`` (a fork of a process whose torch has started threads can hang), once per process
    (each pays the import of torch, a second or two of processor time), and kept for later calls. Inside
    :func:`posenc_book.robustness.perturbed` the workers apply the same perturbation. ``spawn`` re-imports
    the main module in each worker: a script that calls this function does so under
    ``if __name__ == "__main__":`` (a notebook's kernel needs nothing).

    Examples
    --------
    >>> jobs = {s: dict(scheme=s, seed=0, train_len=8, eval_lens=(8,), steps=2, d_model=8) for s in ("none", "alibi")}
    >>> results = train_in_processes(train_and_evaluate, jobs, processes=1)
    >>> list(results), results["alibi"].losses[8] == train_and_evaluate(**jobs["alibi"]).losses[8]
    (['none', 'alibi'], True)
    """
    if processes is None:
        available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        processes = max(1, min(len(jobs), available))
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise ValueError(f"processes must be None or an int >= 1, got {processes!r}")
    perturbation = active_perturbation()
    if processes == 1 or len(jobs) <= 1:
        return {key: _run_perturbed(function, perturbation, kwargs) for key, kwargs in jobs.items()}
    pool = _worker_pool(processes)
    futures = {key: pool.submit(_run_perturbed, function, perturbation, kwargs) for key, kwargs in jobs.items()}
    try:
        return {key: future.result() for key, future in futures.items()}
    finally:  # after an interrupt or an error, the jobs not started are dropped (a finished one ignores this)
        for future in futures.values():
            future.cancel()


@functools.cache
def _worker_pool(processes: int) -> ProcessPoolExecutor:
    """The workers of :func:`train_in_processes`, started once per process and count and kept.

    A chapter calls :func:`train_in_processes` three times; starting the workers each time made each call pay
    the workers' import of torch again. Python's exit handler of :mod:`concurrent.futures` stops them.
    """
    return ProcessPoolExecutor(
        processes, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_interrupts
    )


def _ignore_interrupts() -> None:
    """In a worker: leave SIGINT to the parent (a Jupyter kernel's shutdown sends it to the whole group)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

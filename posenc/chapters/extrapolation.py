r"""Train short, test long: a tiny causal language model trained at one length and scored at longer ones.

The data is an order-2 Markov chain over a few symbols, generated in memory, so the best possible loss is
known exactly. The model is a small pre-norm Transformer decoder written out here (not
``torch.nn.TransformerDecoder``) so that each positional scheme can act where it belongs: added to the
token embeddings (``"sinusoidal"``, ``"learned"``), rotating queries and keys (``"rotary"``), added to the
attention logits (``"t5"``, ``"alibi"``), or nothing at all (``"none"``: the causal mask is the only source
of order). This module holds

- :func:`markov_chain`, the seeded source, with its exact entropy rate (the loss floor), and
  :func:`sample_sequences`, which draws sequences from it;
- :class:`TinyCausalLM`, the model;
- :func:`train_and_evaluate`, which trains one model at ``train_len`` and reports its loss at several
  evaluation lengths;
- :func:`position_interpolation`, the rotary model evaluated at a longer length with its positions
  divided by the length ratio (Chen et al., 2023), with and without a few steps of fine-tuning.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from posenc._validation import MAX_TABLE_ELEMENTS, check_count

__all__ = [
    "SCHEMES",
    "MarkovChain",
    "markov_chain",
    "sample_sequences",
    "TinyCausalLM",
    "ExtrapolationResult",
    "train_and_evaluate",
    "InterpolationResult",
    "position_interpolation",
]

SCHEMES = ("sinusoidal", "learned", "rotary", "t5", "alibi", "none")
"""The positional schemes :class:`TinyCausalLM` knows."""

MAX_SYMBOLS = 256
"""Largest alphabet :func:`markov_chain` builds (its table has ``n_symbols**3`` entries)."""

MAX_LENGTH = 4096
"""Longest sequence any function here accepts, for training or evaluation."""

MAX_STEPS = 100_000
"""Most optimiser updates a training call accepts: a book-sized loop, not a training run."""

MAX_D_MODEL = 1024
MAX_HEADS = 64
MAX_LAYERS = 16
MAX_BATCH = 4096
MAX_EVAL_TOKENS = 2**22

_ATTENTION_CHUNK = 2**22
"""Most attention-logit entries (sequences x heads x length**2) one evaluation batch holds."""

_MLP_RATIO = 4
T5_NUM_BUCKETS = 32
T5_MAX_DISTANCE = 128


# --- Argument checks ---------------------------------------------------------------------------------------


def _check_int(value, name: str, minimum: int, maximum: int) -> int:
    value = check_count(value, name, minimum=minimum)
    if value > maximum:
        raise ValueError(f"{name} must be an int in [{minimum}, {maximum}], got {value}")
    return value


def _check_positive_real(value, name: str, *, maximum: float = math.inf) -> float:
    accepted = f"a finite real number in (0, {maximum}]" if math.isfinite(maximum) else "a finite real number > 0"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {accepted}, got {type(value).__name__} {value!r}")
    value = float(value)
    if not (math.isfinite(value) and 0.0 < value <= maximum):
        raise ValueError(f"{name} must be {accepted}, got {value}")
    return value


def _check_seed(seed, name: str = "seed") -> int:
    return _check_int(seed, name, 0, 2**63 - 1)


def _check_scheme(scheme) -> str:
    if not isinstance(scheme, str):
        raise TypeError(f"scheme must be one of {SCHEMES}, got {type(scheme).__name__} {scheme!r}")
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return scheme


def _check_lengths(eval_lens) -> tuple[int, ...]:
    accepted = f"a non-empty sequence of distinct ints in [2, {MAX_LENGTH}]"
    if isinstance(eval_lens, (str, bytes)) or not isinstance(eval_lens, Sequence):
        raise TypeError(f"eval_lens must be {accepted}, got {type(eval_lens).__name__} {eval_lens!r}")
    if len(eval_lens) == 0 or len(eval_lens) > 64:
        raise ValueError(f"eval_lens must be {accepted} (at most 64 of them), got {len(eval_lens)} entries")
    lengths = []
    for length in eval_lens:
        if isinstance(length, (bool, np.bool_)) or not isinstance(length, numbers.Integral):
            raise TypeError(f"eval_lens must be {accepted}, got an entry {type(length).__name__} {length!r}")
        if not 2 <= int(length) <= MAX_LENGTH:
            raise ValueError(f"eval_lens must be {accepted}, got an entry {int(length)}")
        lengths.append(int(length))
    if len(set(lengths)) != len(lengths):
        raise ValueError(f"eval_lens must be {accepted}, got repeated entries {lengths}")
    return tuple(lengths)


def _check_architecture(d_model, n_heads, n_layers, scheme) -> tuple[int, int, int]:
    d_model = _check_int(d_model, "d_model", 1, MAX_D_MODEL)
    n_heads = _check_int(n_heads, "n_heads", 1, MAX_HEADS)
    n_layers = _check_int(n_layers, "n_layers", 1, MAX_LAYERS)
    if d_model % n_heads:
        raise ValueError(f"n_heads must divide d_model, got n_heads={n_heads} and d_model={d_model}")
    if scheme == "rotary" and (d_model // n_heads) % 2:
        raise ValueError(
            f"d_model / n_heads (the head width) must be even for rotary, got d_model={d_model}, n_heads={n_heads}"
        )
    if scheme == "sinusoidal" and d_model % 2:
        raise ValueError(f"d_model must be even for the sinusoidal scheme, got {d_model}")
    return d_model, n_heads, n_layers


def _check_training_size(batch_size: int, n_heads: int, length: int, length_name: str) -> None:
    """Refuse a training batch whose attention logits alone would exceed MAX_TABLE_ELEMENTS per layer."""
    if batch_size * n_heads * length * length > MAX_TABLE_ELEMENTS:
        raise ValueError(
            f"batch_size x n_heads x {length_name}**2 = {batch_size} x {n_heads} x {length}**2 exceeds the limit "
            f"of {MAX_TABLE_ELEMENTS} attention logits: ask for a smaller batch_size or {length_name}"
        )


class _Threads:
    """Run a block with torch on one thread (deterministic and cheap), restoring the caller's count."""

    def __enter__(self):
        self.previous = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.previous)
        return False


# --- The source ---------------------------------------------------------------------------------------------


class MarkovChain(NamedTuple):
    """An order-2 Markov chain over ``n`` symbols and its exact entropies (returned by :func:`markov_chain`).

    Attributes
    ----------
    transitions : (n, n, n) float64 array
        ``transitions[a, b, c]`` is the probability that the next symbol is ``c`` when the previous two are
        ``a`` (earlier) then ``b``; each ``transitions[a, b]`` sums to 1.
    pair_distribution : (n, n) float64 array
        The stationary distribution of consecutive pairs ``(x[t-1], x[t])``; sums to 1.
    entropy_rate : float
        :math:`H(X_{t+1} \\mid X_{t-1}, X_t)` in nats under ``pair_distribution``: the lowest expected
        cross-entropy any predictor can reach on a symbol that has two predecessors.
    order1_entropy : float
        :math:`H(X_{t+1} \\mid X_t)` in nats: the best loss of a predictor that sees only the current symbol,
        which needs no positional information.
    marginal_entropy : float
        :math:`H(X_t)` in nats: the best loss of a predictor that sees nothing.
    """

    transitions: np.ndarray
    pair_distribution: np.ndarray
    entropy_rate: float
    order1_entropy: float
    marginal_entropy: float


def _entropy(p: np.ndarray, axis=None) -> np.ndarray:
    """Shannon entropy in nats, with 0 log 0 = 0."""
    safe = np.where(p > 0, p, 1.0)
    return -np.sum(p * np.log(safe), axis=axis)


def markov_chain(seed, *, n_symbols=16, concentration=0.05) -> MarkovChain:
    r"""A random order-2 Markov chain, with the exact entropy rate that bounds any model's loss on it.

    Parameters
    ----------
    seed : int
        Seed of the transition table; an int in ``[0, 2**63 - 1]``.
    n_symbols : int, default 16
        Alphabet size :math:`n`; from 2 to :data:`MAX_SYMBOLS` (256).
    concentration : float, default 0.05
        Parameter :math:`\alpha` of the symmetric Dirichlet each row is drawn from; in ``(0, 100]``. A small
        value gives peaked rows, a low entropy rate, and a source a tiny model can learn.

    Returns
    -------
    chain : MarkovChain

    Notes
    -----
    Each row :math:`P(\cdot \mid a, b)` is an independent draw from :math:`\mathrm{Dirichlet}(\alpha, \dots,
    \alpha)`; a row entry that rounds to zero is raised to :math:`10^{-12}` and the row renormalised, so the
    chain on pairs, :math:`(a, b) \to (b, c)` with probability :math:`P(c \mid a, b)`, is irreducible and
    aperiodic. Its stationary distribution :math:`\pi(a, b)` is the unique solution of
    :math:`\pi(b, c) = \sum_a \pi(a, b) P(c \mid a, b)`, :math:`\sum \pi = 1`, solved exactly (a linear
    system, not a simulation). The entropy rate is

    .. math::

        H = -\sum_{a, b} \pi(a, b) \sum_c P(c \mid a, b) \log P(c \mid a, b).

    A sequence from :func:`sample_sequences` starts with a pair drawn from :math:`\pi`, so every symbol
    from the third one on is predicted at best with expected loss exactly :math:`H`; the first two are not
    (the first has entropy :math:`H(X_t)`, the second :math:`H(X_{t+1} \mid X_t)`).

    Examples
    --------
    >>> chain = markov_chain(0, n_symbols=4)
    >>> chain.transitions.shape, bool(np.allclose(chain.transitions.sum(axis=-1), 1.0))
    ((4, 4, 4), True)
    >>> chain.entropy_rate <= chain.order1_entropy <= chain.marginal_entropy <= np.log(4)
    True
    """
    seed = _check_seed(seed)
    n = _check_int(n_symbols, "n_symbols", 2, MAX_SYMBOLS)
    alpha = _check_positive_real(concentration, "concentration", maximum=100.0)
    rng = np.random.default_rng(seed)
    transitions = rng.dirichlet(np.full(n, alpha), size=(n, n))
    transitions = np.maximum(transitions, 1e-12)
    transitions /= transitions.sum(axis=-1, keepdims=True)

    # Stationary distribution of the pair chain (a, b) -> (b, c): solve pi = pi Q with sum(pi) = 1.
    pair_to_pair = np.zeros((n * n, n * n))
    for a in range(n):
        for b in range(n):
            pair_to_pair[a * n + b, b * n : (b + 1) * n] = transitions[a, b]
    system = pair_to_pair.T - np.eye(n * n)
    system[-1] = 1.0
    rhs = np.zeros(n * n)
    rhs[-1] = 1.0
    pairs = np.linalg.solve(system, rhs)
    pairs = np.maximum(pairs, 0.0)
    pairs = (pairs / pairs.sum()).reshape(n, n)

    entropy_rate = float(np.sum(pairs * _entropy(transitions, axis=-1)))
    current_next = np.einsum("ab,abc->bc", pairs, transitions)  # joint of (x[t], x[t+1])
    marginal = current_next.sum(axis=1)
    order1 = float(_entropy(current_next) - _entropy(marginal))
    return MarkovChain(transitions, pairs, entropy_rate, order1, float(_entropy(marginal)))


def _check_chain(chain) -> int:
    if not isinstance(chain, MarkovChain):
        raise TypeError(f"chain must be a MarkovChain from markov_chain(), got {type(chain).__name__}")
    return chain.transitions.shape[0]


def _sample(chain: MarkovChain, n_sequences: int, length: int, rng: np.random.Generator) -> np.ndarray:
    n = chain.transitions.shape[0]
    out = np.empty((n_sequences, length), dtype=np.int64)
    first = np.searchsorted(np.cumsum(chain.pair_distribution.ravel()), rng.random(n_sequences), side="right")
    first = np.minimum(first, n * n - 1)
    out[:, 0] = first // n
    if length > 1:
        out[:, 1] = first % n
    cumulative = np.cumsum(chain.transitions.reshape(n * n, n), axis=-1)
    for t in range(2, length):
        rows = cumulative[out[:, t - 2] * n + out[:, t - 1]]
        draws = rng.random(n_sequences)
        out[:, t] = np.minimum((draws[:, None] >= rows).sum(axis=-1), n - 1)
    return out


def sample_sequences(chain, n_sequences, length, *, seed) -> np.ndarray:
    """Draw sequences from ``chain``, each starting from its stationary distribution of pairs.

    Parameters
    ----------
    chain : MarkovChain
        From :func:`markov_chain`.
    n_sequences : int
        Number of sequences; from 1 to :data:`MAX_BATCH` (4096).
    length : int
        Symbols per sequence; from 1 to :data:`MAX_LENGTH` (4096).
    seed : int
        Seed of the draw; an int in ``[0, 2**63 - 1]``.

    Returns
    -------
    sequences : (n_sequences, length) int64 array
        Symbols in ``0 ... n_symbols - 1``.

    Examples
    --------
    >>> chain = markov_chain(0, n_symbols=4)
    >>> x = sample_sequences(chain, 3, 10, seed=1)
    >>> x.shape, x.dtype.name, bool(np.array_equal(x, sample_sequences(chain, 3, 10, seed=1)))
    ((3, 10), 'int64', True)
    """
    _check_chain(chain)
    n_sequences = _check_int(n_sequences, "n_sequences", 1, MAX_BATCH)
    length = _check_int(length, "length", 1, MAX_LENGTH)
    seed = _check_seed(seed)
    return _sample(chain, n_sequences, length, np.random.default_rng(seed))


# --- The model ----------------------------------------------------------------------------------------------


class _Block(nn.Module):
    """Pre-norm causal self-attention and MLP, with the positional scheme injected into the attention."""

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
        batch, seq, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, seq, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        if rotary is not None:
            q = rotary(q, positions=positions)
            k = rotary(k, positions=positions)
        # softmax(q k^T / sqrt(head_dim) + bias) v, the bias holding the scheme's terms and the causal mask
        mixed = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        x = x + self.out(mixed.transpose(1, 2).reshape(batch, seq, width))
        return x + self.mlp(self.norm2(x))


class TinyCausalLM(nn.Module):
    r"""A small pre-norm Transformer language model with a choice of positional scheme.

    Parameters
    ----------
    scheme : {"sinusoidal", "learned", "rotary", "t5", "alibi", "none"}
        Where position enters. ``"sinusoidal"``: :class:`posenc.nn.SinusoidalPositionalEncoding` added to the
        token embeddings (Vaswani et al., 2017). ``"learned"``: :class:`posenc.nn.LearnedPositionalEmbedding`
        with ``max_len`` rows, added likewise. ``"rotary"``: :class:`posenc.nn.RotaryEmbedding` applied to
        queries and keys in every layer (Su et al., 2021). ``"t5"``: one :class:`posenc.nn.T5RelativeBias`
        (unidirectional, 32 buckets, maximum distance 128, as in T5's decoder) added to the logits of every
        layer (Raffel et al., 2020). ``"alibi"``: :class:`posenc.nn.ALiBiBias` added to the logits of every
        layer (Press et al., 2022). ``"none"``: no positional information; the causal mask is the only
        source of order (Kazemnejad et al., 2023).
    vocab_size : int, default 16
        Number of symbols; from 2 to :data:`MAX_SYMBOLS`.
    d_model : int, default 32
        Width; from 1 to :data:`MAX_D_MODEL`, divisible by ``n_heads``, even for ``"sinusoidal"``, and with an
        even head width ``d_model // n_heads`` for ``"rotary"``.
    n_heads : int, default 4
        Attention heads per layer; from 1 to :data:`MAX_HEADS`.
    n_layers : int, default 2
        Number of blocks; from 1 to :data:`MAX_LAYERS`.
    max_len : int, default 32
        Rows of the learned table (``"learned"`` refuses longer inputs); the other schemes accept any length
        up to :data:`MAX_LENGTH` and ignore it, apart from sizing the sinusoidal cache.

    Notes
    -----
    ``forward(tokens)`` maps ``(batch, seq)`` int64 symbols to ``(batch, seq, vocab_size)`` logits for the
    next symbol. Each block computes, with pre-norm (as GPT-2),

    .. math::

        x \leftarrow x + \mathrm{Attn}(\mathrm{LN}(x)), \qquad x \leftarrow x + \mathrm{MLP}(\mathrm{LN}(x)),

    where the logits of head :math:`h` are :math:`q_i^\top k_j / \sqrt{d_h} + B_h(i, j)`, with :math:`B_h`
    the scheme's bias (zero for schemes without one) and :math:`-\infty` for :math:`j > i`. A final
    LayerNorm and a linear map give the next-symbol logits. ``forward(tokens, positions=p)`` (rotary only)
    rotates by the real positions ``p`` instead of ``0, 1, ..., seq - 1``: dividing them by a factor is
    Position Interpolation (Chen et al., 2023).

    References
    ----------
    .. [1] O. Press, N. A. Smith, M. Lewis, "Train Short, Test Long: Attention with Linear Biases Enables
       Input Length Extrapolation", ICLR 2022, arXiv:2108.12409.
    .. [2] A. Kazemnejad et al., "The Impact of Positional Encoding on Length Generalization in
       Transformers", NeurIPS 2023, arXiv:2305.19466.
    .. [3] S. Chen, S. Wong, L. Chen, Y. Tian, "Extending Context Window of Large Language Models via
       Positional Interpolation", 2023, arXiv:2306.15595.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = TinyCausalLM("alibi")
    >>> model(torch.zeros(2, 40, dtype=torch.long)).shape
    torch.Size([2, 40, 16])
    """

    def __init__(self, scheme, *, vocab_size=16, d_model=32, n_heads=4, n_layers=2, max_len=32):
        super().__init__()
        self.scheme = _check_scheme(scheme)
        self.vocab_size = _check_int(vocab_size, "vocab_size", 2, MAX_SYMBOLS)
        self.d_model, self.n_heads, self.n_layers = _check_architecture(d_model, n_heads, n_layers, scheme)
        self.max_len = _check_int(max_len, "max_len", 1, MAX_LENGTH)
        import posenc.nn as pnn  # noqa: PLC0415 - the modules other schemes need are imported on demand

        self.embed = nn.Embedding(self.vocab_size, self.d_model)
        self.absolute = None
        self.rotary = None
        self.relative = None
        if scheme == "sinusoidal":
            self.absolute = pnn.SinusoidalPositionalEncoding(self.d_model, max_len=self.max_len)
        elif scheme == "learned":
            self.absolute = pnn.LearnedPositionalEmbedding(self.max_len, self.d_model)
        elif scheme == "rotary":
            self.rotary = pnn.RotaryEmbedding(self.d_model // self.n_heads)
        elif scheme == "t5":
            self.relative = pnn.T5RelativeBias(
                self.n_heads, bidirectional=False, num_buckets=T5_NUM_BUCKETS, max_distance=T5_MAX_DISTANCE
            )
        elif scheme == "alibi":
            self.relative = pnn.ALiBiBias(self.n_heads)
        self.blocks = nn.ModuleList(_Block(self.d_model, self.n_heads) for _ in range(self.n_layers))
        self.norm = nn.LayerNorm(self.d_model)
        self.head = nn.Linear(self.d_model, self.vocab_size)

    def _bias(self, seq: int, dtype: torch.dtype) -> torch.Tensor:
        if self.scheme == "alibi":
            return self.relative(seq, seq, causal=True).to(dtype)
        causal = torch.full((seq, seq), float("-inf"), dtype=dtype).triu(1)
        if self.scheme == "t5":
            return self.relative(seq, seq).to(dtype) + causal
        return causal

    def forward(self, tokens: torch.Tensor, *, positions=None) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(f"tokens must be a torch.Tensor of shape (batch, seq), got {type(tokens).__name__}")
        if tokens.dtype != torch.long:
            raise TypeError(f"tokens must be an int64 tensor of symbols, got dtype {tokens.dtype}")
        if tokens.ndim != 2 or not 1 <= tokens.shape[1] <= MAX_LENGTH or tokens.shape[0] < 1:
            raise ValueError(f"tokens must have shape (batch >= 1, seq in [1, {MAX_LENGTH}]), got {tuple(tokens.shape)}")
        seq = tokens.shape[1]
        if self.scheme == "learned" and seq > self.max_len:
            raise ValueError(f"tokens has {seq} positions but the learned table has max_len={self.max_len} rows")
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise ValueError(f"tokens must hold symbols in [0, vocab_size={self.vocab_size}), got another value")
        if positions is not None:
            if self.scheme != "rotary":
                raise ValueError(f"positions is only used by the rotary scheme, not {self.scheme!r}: pass None")
            if not isinstance(positions, torch.Tensor) or not positions.is_floating_point():
                raise TypeError(f"positions must be a floating-point torch.Tensor of shape ({seq},)")
            if positions.shape != (seq,) or not bool(torch.isfinite(positions).all()):
                raise ValueError(f"positions must be a finite tensor of shape ({seq},), got {tuple(positions.shape)}")
        return self._logits(tokens, positions)

    def _logits(self, tokens: torch.Tensor, positions=None) -> torch.Tensor:
        seq = tokens.shape[1]
        x = self.embed(tokens)
        if self.absolute is not None:
            x = self.absolute(x)
        bias = self._bias(seq, x.dtype)
        for block in self.blocks:
            x = block(x, bias, self.rotary, positions)
        return self.head(self.norm(x))

    def extra_repr(self) -> str:
        return f"scheme={self.scheme!r}, max_len={self.max_len}"


# --- Training and evaluation --------------------------------------------------------------------------------


def _scored_loss(model: TinyCausalLM, sequences: torch.Tensor, positions=None) -> torch.Tensor:
    """Mean cross-entropy of the predictions of symbols 2, 3, ... (each has two predecessors)."""
    logits = model._logits(sequences[:, :-1], positions)[:, 1:]
    targets = sequences[:, 2:]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _train(model, chain, *, steps, batch_size, length, lr, rng, positions=None) -> float:
    """Adam with a cosine-decayed learning rate on fresh sequences; returns the mean loss of the last 10 %."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, fused=True)
    model.train()
    tail = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * step / steps))
        batch = torch.from_numpy(_sample(chain, batch_size, length + 1, rng))
        loss = _scored_loss(model, batch, positions)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step >= steps - max(1, steps // 10):
            tail.append(float(loss.detach()))
    model.eval()
    return float(np.mean(tail))


def _evaluate(model, sequences: np.ndarray, positions=None) -> float:
    """Mean scored loss over ``sequences`` (n, length + 1), in chunks small enough to bound memory."""
    n, length = sequences.shape[0], sequences.shape[1] - 1
    chunk = max(1, min(n, _ATTENTION_CHUNK // (model.n_heads * length * length)))
    total = 0.0
    with torch.no_grad():
        for start in range(0, n, chunk):
            part = torch.from_numpy(sequences[start : start + chunk])
            total += float(_scored_loss(model, part, positions)) * part.shape[0]
    return total / n


def _eval_sequences(chain, source_seed: int, length: int, eval_tokens: int) -> np.ndarray:
    """Evaluation sequences of ``length + 1`` symbols, about ``eval_tokens`` scored symbols, same for every model."""
    n = max(1, min(MAX_BATCH, eval_tokens // (length - 1)))
    return _sample(chain, n, length + 1, np.random.default_rng([source_seed, 1, length]))


class ExtrapolationResult(NamedTuple):
    """What :func:`train_and_evaluate` measured.

    Attributes
    ----------
    scheme : str
    seed, source_seed, train_len : int
    losses : dict[int, float]
        Mean cross-entropy (nats) per evaluation length, over the symbols that have two predecessors. A
        ``"learned"`` model has no entry for a length beyond ``train_len``: it has no vector for those
        positions, so there is nothing to measure.
    not_evaluated : tuple of int
        The requested lengths missing from ``losses``, for the reason above.
    train_loss : float
        Mean training loss over the last 10 % of the steps.
    entropy_rate, order1_entropy : float
        The chain's loss floor and the best loss without positional information (see :class:`MarkovChain`).
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


def _common(seed, source_seed, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens, scheme):
    seed = _check_seed(seed)
    source_seed = _check_seed(source_seed, "source_seed")
    train_len = _check_int(train_len, "train_len", 2, MAX_LENGTH)
    steps = _check_int(steps, "steps", 1, MAX_STEPS)
    batch_size = _check_int(batch_size, "batch_size", 1, MAX_BATCH)
    d_model, n_heads, n_layers = _check_architecture(d_model, n_heads, n_layers, scheme)
    lr = _check_positive_real(lr, "lr", maximum=1.0)
    eval_tokens = _check_int(eval_tokens, "eval_tokens", 1, MAX_EVAL_TOKENS)
    _check_training_size(batch_size, n_heads, train_len, "train_len")
    return seed, source_seed, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens


def _build_and_train(scheme, seed, chain, *, train_len, steps, batch_size, d_model, n_heads, n_layers, lr):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyCausalLM(scheme, vocab_size=chain.transitions.shape[0], d_model=d_model, n_heads=n_heads,
                             n_layers=n_layers, max_len=train_len)
    rng = np.random.default_rng([seed, 2])
    train_loss = _train(model, chain, steps=steps, batch_size=batch_size, length=train_len, lr=lr, rng=rng)
    return model, train_loss


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
) -> ExtrapolationResult:
    r"""Train a :class:`TinyCausalLM` on sequences of ``train_len`` symbols and score it at other lengths.

    Parameters
    ----------
    scheme : {"sinusoidal", "learned", "rotary", "t5", "alibi", "none"}
        The positional scheme (see :class:`TinyCausalLM`).
    seed : int
        Seeds the model's initial weights and the training sequences; an int in ``[0, 2**63 - 1]``.
    source_seed : int, default 0
        Seeds the Markov chain (:func:`markov_chain` with 16 symbols and concentration 0.1) and the
        evaluation sequences, which are therefore the same for every scheme and every ``seed``.
    train_len : int, default 32
        Symbols of context per training sequence; from 2 to :data:`MAX_LENGTH`.
    eval_lens : sequence of int, default (32, 64, 128, 256)
        Context lengths to score; distinct, each from 2 to :data:`MAX_LENGTH`.
    steps : int, default 150
        Adam updates, each on ``batch_size`` fresh sequences; from 1 to :data:`MAX_STEPS`.
    batch_size : int, default 16
        From 1 to :data:`MAX_BATCH`; ``batch_size * n_heads * train_len**2`` must not exceed
        ``posenc.MAX_TABLE_ELEMENTS``.
    d_model, n_heads, n_layers : int, default 32, 4, 2
        As in :class:`TinyCausalLM`.
    lr : float, default 1e-2
        Peak learning rate, in ``(0, 1]``; it decays to 0 along a half cosine.
    eval_tokens : int, default 4096
        Scored symbols per evaluation length (rounded down to whole sequences, at least one sequence);
        from 1 to :data:`MAX_EVAL_TOKENS`.

    Returns
    -------
    result : ExtrapolationResult
        ``result.losses[L]`` is the mean loss at context length ``L``; a ``"learned"`` model has no entry
        beyond ``train_len`` (listed in ``result.not_evaluated``) rather than an invented number.

    Notes
    -----
    A model of context length :math:`L` reads symbols :math:`x_0 \dots x_{L-1}` and predicts
    :math:`x_1 \dots x_L`; the loss is averaged over the predictions of :math:`x_2 \dots x_L`, each of which
    has two predecessors, so its floor is exactly the chain's entropy rate (see :func:`markov_chain`). The
    call runs torch on one thread (restoring the caller's setting afterwards) and leaves torch's global
    random state as it found it, so equal arguments give equal results on a given machine.

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
    scheme = _check_scheme(scheme)
    seed, source_seed, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens = _common(
        seed, source_seed, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens, scheme
    )
    eval_lens = _check_lengths(eval_lens)
    concentration = _check_positive_real(concentration, "concentration", maximum=100.0)
    with _Threads():
        chain = markov_chain(source_seed, concentration=concentration)
        model, train_loss = _build_and_train(
            scheme, seed, chain, train_len=train_len, steps=steps, batch_size=batch_size, d_model=d_model,
            n_heads=n_heads, n_layers=n_layers, lr=lr,
        )
        losses, skipped = {}, []
        for length in eval_lens:
            if scheme == "learned" and length > train_len:
                skipped.append(length)
                continue
            losses[length] = _evaluate(model, _eval_sequences(chain, source_seed, length, eval_tokens))
    return ExtrapolationResult(
        scheme, seed, source_seed, train_len, losses, tuple(skipped), train_loss, chain.entropy_rate,
        chain.order1_entropy,
    )


class InterpolationResult(NamedTuple):
    """What :func:`position_interpolation` measured; every loss is in nats, as in :class:`ExtrapolationResult`.

    Attributes
    ----------
    seed, source_seed, train_len, eval_len, finetune_steps : int
        ``eval_len = factor * train_len``.
    factor : int
    trained : float
        Loss of the trained model at ``train_len`` (positions ``0 ... train_len - 1``).
    extrapolated, interpolated : float
        Loss of the same model at ``eval_len`` with positions ``0 ... eval_len - 1`` (extrapolation) or
        ``m / factor`` (Position Interpolation), before any fine-tuning.
    finetuned_extrapolated, finetuned_interpolated : float
        The same two losses after ``finetune_steps`` updates at ``eval_len``, each copy fine-tuned with
        its own positions.
    finetuned_extrapolated_short, finetuned_interpolated_short : float
        The fine-tuned copies scored back at ``train_len``, each with the positions it was fine-tuned with
        (``m`` or ``m / factor``).
    """

    seed: int
    source_seed: int
    train_len: int
    eval_len: int
    factor: int
    finetune_steps: int
    trained: float
    extrapolated: float
    interpolated: float
    finetuned_extrapolated: float
    finetuned_interpolated: float
    finetuned_extrapolated_short: float
    finetuned_interpolated_short: float


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
    r"""Train a rotary model at ``train_len``, then run it at ``factor`` times that length, with and without PI.

    Parameters
    ----------
    seed, source_seed, concentration, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens
        As in :func:`train_and_evaluate` with ``scheme="rotary"``; equal arguments train the same model.
    factor : int, default 4
        Ratio of the longer length to ``train_len``; from 2 to 64, with ``factor * train_len`` at most
        :data:`MAX_LENGTH`.
    finetune_steps : int, default 30
        Adam updates at the longer length for each fine-tuned copy; from 1 to :data:`MAX_STEPS`. Each uses
        ``max(1, batch_size // factor)`` sequences, as many symbols as a training step.
    finetune_lr : float, default 3e-3
        Peak learning rate of fine-tuning (cosine decay to 0), in ``(0, 1]``.

    Returns
    -------
    result : InterpolationResult

    Notes
    -----
    Position Interpolation (Chen et al., 2023) feeds the rotary embedding the positions
    :math:`m' = m\,L / L'` for a model trained at length :math:`L` and run at :math:`L' = \text{factor}\cdot L`,
    so every angle :math:`m'\theta_i` stays inside the range seen in training (what transformers'
    ``{"rope_type": "linear", "factor": factor}`` does by dividing the frequencies instead). The price is
    resolution: neighbours are :math:`1/\text{factor}` apart instead of 1. Chen et al. fine-tune their
    interpolated LLaMA models for at most 1000 steps; here a few dozen steps at :math:`L'` stand for that.

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
    seed, source_seed, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens = _common(
        seed, source_seed, train_len, steps, batch_size, d_model, n_heads, n_layers, lr, eval_tokens, "rotary"
    )
    concentration = _check_positive_real(concentration, "concentration", maximum=100.0)
    factor = _check_int(factor, "factor", 2, 64)
    if factor * train_len > MAX_LENGTH:
        raise ValueError(
            f"factor x train_len must be at most {MAX_LENGTH}, got factor={factor} and train_len={train_len}"
        )
    finetune_steps = _check_int(finetune_steps, "finetune_steps", 1, MAX_STEPS)
    finetune_lr = _check_positive_real(finetune_lr, "finetune_lr", maximum=1.0)
    eval_len = factor * train_len
    finetune_batch = max(1, batch_size // factor)
    _check_training_size(finetune_batch, n_heads, eval_len, "factor x train_len")

    with _Threads():
        chain = markov_chain(source_seed, concentration=concentration)
        model, _ = _build_and_train(
            "rotary", seed, chain, train_len=train_len, steps=steps, batch_size=batch_size, d_model=d_model,
            n_heads=n_heads, n_layers=n_layers, lr=lr,
        )
        short = _eval_sequences(chain, source_seed, train_len, eval_tokens)
        long = _eval_sequences(chain, source_seed, eval_len, eval_tokens)
        short_scaled = torch.arange(train_len, dtype=torch.float64) / factor
        long_scaled = torch.arange(eval_len, dtype=torch.float64) / factor
        trained = _evaluate(model, short)
        extrapolated = _evaluate(model, long)
        interpolated = _evaluate(model, long, long_scaled)
        finetuned = {}
        for name, long_positions, short_positions in (
            ("extrapolated", None, None),
            ("interpolated", long_scaled, short_scaled),
        ):
            copy = TinyCausalLM("rotary", vocab_size=model.vocab_size, d_model=d_model, n_heads=n_heads,
                                n_layers=n_layers, max_len=train_len)
            copy.load_state_dict(model.state_dict())
            rng = np.random.default_rng([seed, 3])  # the same fine-tuning sequences for both copies
            _train(copy, chain, steps=finetune_steps, batch_size=finetune_batch, length=eval_len, lr=finetune_lr,
                   rng=rng, positions=long_positions)
            finetuned[name] = (_evaluate(copy, long, long_positions), _evaluate(copy, short, short_positions))
    return InterpolationResult(
        seed, source_seed, train_len, eval_len, factor, finetune_steps, trained, extrapolated, interpolated,
        finetuned["extrapolated"][0], finetuned["interpolated"][0], finetuned["extrapolated"][1],
        finetuned["interpolated"][1],
    )

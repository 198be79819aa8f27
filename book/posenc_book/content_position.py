r"""Position from content: tiny models whose attention finds positions from the tokens, trained on the CPU.

Chapter 16's helpers. The model, :class:`ContentLM`, is chapter 9's small pre-norm decoder
(:class:`posenc_book.extrapolation.TinyCausalLM`: the same layers, in the same order, under the same names) with
seven ways for a head to know where a key is:

- ``"rotary"``, ``"alibi"``, ``"none"``: chapter 9's rotary embedding, ALiBi bias and no encoding. Built from the
  same seed and trained on the same data, such a model is chapter 9's, bit for bit (``tests/test_content_position.py``
  checks it);
- ``"fox"``: forgetting attention (Lin et al., 2025), a decay bias from each head's forget gates
  (:class:`posenc.nn.ForgettingGate`, :func:`posenc.nn.forgetting_bias`);
- ``"stick_breaking"``: stick-breaking attention (Tan et al., 2025, :func:`posenc.nn.stick_breaking_attention`),
  the stick left over given to the token itself, as the authors' tests do;
- ``"cope"``: contextual positions (Golovneva et al., 2024, :class:`posenc.nn.CoPE`), one table per layer;
- ``"path"``: PaTH's data-dependent Householder products (Yang et al., 2025, :class:`posenc.nn.PaTHGate`,
  :func:`posenc.nn.path_logits`).

Any softmax scheme can also add a learned sink logit per head (GPT-OSS, :class:`posenc.nn.AttentionSink`).

The experiments, each a function that trains one model and returns what the chapter reads:

- :func:`chain_run`: chapter 9's train-short/test-long recipe (its Markov chain, its data stream, its steps), for
  any scheme of :data:`SCHEMES`, with or without a sink;
- :func:`drope_run`: DroPE (Gelberg et al., 2026) on that recipe: a rotary model, its rotation dropped, then a few
  recalibration steps at the training length;
- :func:`recall_run`: a counting task, recall the symbol of the second-to-last marked token, trained at one length
  and density of marks and scored at others;
- :func:`parity_run`: a state-tracking task, the running parity of a bit string (composing swaps), trained short
  and scored long;
- :func:`first_token_share`: how much attention the first token gets, and how much the sink takes.

Every function runs torch on one thread, seeds everything from its arguments and applies the active
:func:`posenc_book.robustness.perturbed` perturbation to each model it builds, as chapter 9's functions do, so
:func:`posenc_book.extrapolation.train_in_processes` runs them in worker processes with the same results.
``python -m posenc_book.content_position`` trains nine seeds of every experiment and writes the file the chapter
reads its claims about schemes from (:data:`SWEEP_FILE`); ``make check-position-from-content`` runs it.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import json
import math
import platform
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from posenc.nn import (
    ALiBiBias,
    AttentionSink,
    CoPE,
    ForgettingGate,
    PaTHGate,
    RotaryEmbedding,
    forgetting_bias,
    path_logits,
    stick_breaking_attention,
    stick_breaking_weights,
)
from posenc_book import extrapolation
from posenc_book.extrapolation import (
    N_SYMBOLS,
    _OneThread,
    evaluation_sequences,
    markov_chain,
    sample_sequences,
    train_in_processes,
    train_steps,
)
from posenc_book.robustness import (
    MARGIN_FACTOR,
    PERTURBATION_DRAWS,
    Bound,
    Perturbation,
    check_seed_values,
    perturb_initial_weights,
    perturbed,
)
from posenc_book.source_digest import code_of

__all__ = [
    "SCHEMES",
    "ContentLM",
    "ChainResult",
    "chain_run",
    "DropeResult",
    "drope_run",
    "recall_sequences",
    "RecallResult",
    "recall_run",
    "parity_sequences",
    "ParityResult",
    "parity_run",
    "first_token_share",
]

SCHEMES = ("rotary", "alibi", "none", "fox", "stick_breaking", "cope", "path")
"""The ways :class:`ContentLM` tells a head where a key is, in the order the chapter lists them."""


class _Block(extrapolation._Block):
    """Chapter 9's pre-norm block; the scheme's modules (gate, CoPE table, PaTH gate, sink) come after its own."""

    def __init__(self, scheme: str, d_model: int, n_heads: int, sink: bool, n_positions: int):
        super().__init__(d_model, n_heads)  # chapter 9's layers, created first: the same initial weights per seed
        self.scheme = scheme
        if scheme == "fox":
            self.gate = ForgettingGate(d_model, n_heads)
        elif scheme == "cope":
            self.cope = CoPE(n_positions, self.head_dim)
        elif scheme == "path":
            self.path = PaTHGate(d_model, n_heads, self.head_dim)
        self.sink = AttentionSink(n_heads) if sink else None

    def attend(self, h, rotary, bias, weights_out):
        """Attention of the normed input ``h``: the mixed values, ``(batch, heads, seq, head_dim)``."""
        batch, seq, _ = h.shape
        q, k, v = self.qkv(h).view(batch, seq, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        scale = 1.0 / math.sqrt(self.head_dim)
        if rotary is not None:
            q, k = rotary(q), rotary(k)
        if self.scheme == "stick_breaking":
            mixed, remainder = stick_breaking_attention(q, k, v)
            if weights_out is not None:
                logits = (q @ k.transpose(-1, -2)) * scale
                weights = stick_breaking_weights(logits) + torch.diag_embed(remainder)
                weights_out.append(weights)
            return mixed + remainder[..., None] * v  # the stick left over goes to the token itself
        if self.scheme == "cope":
            logits = self.cope.logits(q, k, scale=scale)
        elif self.scheme == "path":
            w, beta = self.path(h)
            logits = path_logits(q, k, w, beta) * scale
        elif bias is None and self.sink is None and weights_out is None and self.scheme != "fox":
            return nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            logits = q @ k.transpose(-1, -2) * scale
            if self.scheme == "fox":
                logits = logits + forgetting_bias(self.gate(h)).to(logits.dtype)
            elif bias is not None:
                logits = logits + bias
            else:
                logits = logits + torch.full((seq, seq), float("-inf"), dtype=logits.dtype).triu(1)
        weights = self.sink(logits) if self.sink is not None else torch.softmax(logits, dim=-1)
        if weights_out is not None:
            weights_out.append(weights)
        return weights @ v

    def forward(self, x, rotary, bias, weights_out=None):
        batch, seq, width = x.shape
        mixed = self.attend(self.norm1(x), rotary, bias, weights_out)
        x = x + self.out(mixed.transpose(1, 2).reshape(batch, seq, width))
        return x + self.mlp(self.norm2(x))


class ContentLM(nn.Module):
    r"""Chapter 9's tiny causal language model, with position from content among its schemes.

    Parameters
    ----------
    scheme : {"rotary", "alibi", "none", "fox", "stick_breaking", "cope", "path"}
        How a head knows where a key is (see the module's notes).
    vocab_size : int, default 16
        Number of symbols.
    d_model, n_heads, n_layers : int, default 32, 4, 2
        Width, heads per layer and blocks, as in :class:`posenc_book.extrapolation.TinyCausalLM`.
    sink : bool, default False
        Add a learned sink logit per head to every layer (:class:`posenc.nn.AttentionSink`); not for
        ``"stick_breaking"``, which has no softmax.
    n_positions : int, default 33
        ``"cope"`` only: rows of each layer's position table; larger contextual positions read the last row.

    Notes
    -----
    ``forward(tokens)`` maps ``(batch, seq)`` int64 symbols to ``(batch, seq, vocab_size)`` next-symbol logits.
    For ``"rotary"``, ``"alibi"`` and ``"none"`` without a sink the modules are those of
    :class:`~posenc_book.extrapolation.TinyCausalLM`, built in the same order, so one seed gives the same initial
    weights and ``load_state_dict`` moves weights between the two. ``"fox"`` adds to the logits of head :math:`h`
    the sum of :math:`\log f_t` over the tokens after the key up to the query, the gates computed from each block's
    normed input; ``"stick_breaking"`` weighs key :math:`j` by
    :math:`\sigma(z_{ij}) \prod_{j<k<i} (1 - \sigma(z_{ik}))` over the keys before the query and gives what is
    left to the query's own value; ``"cope"`` adds :math:`q_i^\top e[p_{ij}]` at the gated position
    :math:`p_{ij} = \sum_{t=j}^{i} \sigma(q_i^\top k_t / \sqrt{d})`; ``"path"`` takes the logits
    :math:`q_i^\top H_i \cdots H_{j+1} k_j` with :math:`H_t = I - \beta_t w_t w_t^\top` from the token.

    Examples
    --------
    >>> _ = torch.manual_seed(0)
    >>> model = ContentLM("fox")
    >>> model(torch.zeros(2, 40, dtype=torch.long)).shape
    torch.Size([2, 40, 16])
    """

    def __init__(self, scheme, *, vocab_size=16, d_model=32, n_heads=4, n_layers=2, sink=False, n_positions=33):
        super().__init__()
        if scheme not in SCHEMES:
            raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
        if d_model % n_heads:
            raise ValueError(f"n_heads must divide d_model, got n_heads={n_heads} and d_model={d_model}")
        if not isinstance(sink, bool):
            raise TypeError(f"sink must be a bool, got {type(sink).__name__}")
        if sink and scheme == "stick_breaking":
            raise ValueError("sink is for the softmax schemes: stick-breaking attention has no softmax to add it to")
        self.scheme, self.vocab_size, self.sink = scheme, vocab_size, sink
        self.d_model, self.n_heads, self.n_layers = d_model, n_heads, n_layers
        self.embed = nn.Embedding(vocab_size, d_model)
        self.rotary = RotaryEmbedding(d_model // n_heads) if scheme == "rotary" else None
        self.relative = ALiBiBias(n_heads) if scheme == "alibi" else None
        self.blocks = nn.ModuleList(_Block(scheme, d_model, n_heads, sink, n_positions) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self._run(tokens, None)

    def attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights of every layer, each ``(batch, n_heads, seq, seq)``, rows summing to at most 1."""
        weights: list[torch.Tensor] = []
        with torch.no_grad():
            self._run(tokens, weights)
        return weights

    def _run(self, tokens, weights_out):
        x = self.embed(tokens)
        seq = tokens.shape[1]
        bias = self.relative(seq, seq, causal=True).to(x.dtype) if self.relative is not None else None
        for block in self.blocks:
            x = block(x, self.rotary, bias, weights_out)
        return self.head(self.norm(x))

    def extra_repr(self) -> str:
        return f"scheme={self.scheme!r}, sink={self.sink}"


def _build(scheme, seed, **options) -> ContentLM:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = ContentLM(scheme, **options)
    perturb_initial_weights(model)  # only inside posenc_book.robustness.perturbed
    return model


# --- Chapter 9's chain: train short, test long ----------------------------------------------------------------


def _chain_loss(model, sequences: torch.Tensor) -> torch.Tensor:
    """Chapter 9's loss: the predictions of symbols 2, 3, ... of sequences of ``length + 1`` symbols."""
    logits = model(sequences[:, :-1])[:, 1:]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), sequences[:, 2:].reshape(-1))


def _chain_losses(model, lengths) -> dict:
    losses = {}
    with torch.no_grad():
        for length in lengths:
            sequences = evaluation_sequences(length)
            chunk = max(1, min(len(sequences), 2**20 // (length * length)))
            total = 0.0
            for start in range(0, len(sequences), chunk):
                part = torch.from_numpy(sequences[start : start + chunk])
                total += float(_chain_loss(model, part)) * part.shape[0]
            losses[length] = total / len(sequences)
    return losses


def _train_on_chain(model, seed, *, steps, batch_size, length, lr, stream=2) -> float:
    chain = markov_chain(0, n_symbols=N_SYMBOLS)
    rng = np.random.default_rng([seed, stream])  # chapter 9's stream: the same batches, in the same order

    def loss_at(step: int) -> torch.Tensor:
        return _chain_loss(model, torch.from_numpy(sample_sequences(chain, batch_size, length + 1, seed=rng)))

    return train_steps(model, loss_at, steps=steps, lr=lr)


def _train_on_targets(model, draw, *, steps, lr) -> float:
    """The book's recipe on batches ``(tokens, targets) = draw()``: cross-entropy where a target is not -100."""

    def loss_at(step: int) -> torch.Tensor:
        tokens, targets = (torch.from_numpy(a) for a in draw())
        logits = model(tokens)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)

    return train_steps(model, loss_at, steps=steps, lr=lr)


class ChainResult(NamedTuple):
    """What :func:`chain_run` measured: ``losses[L]`` in nats at context length ``L``, the model, and more."""

    scheme: str
    sink: bool
    seed: int
    losses: dict
    train_loss: float
    model: ContentLM


def chain_run(scheme, *, seed, sink=False, eval_lens=(32, 256), train_len=32, steps=150, batch_size=16, lr=1e-2):
    """Chapter 9's experiment (:func:`posenc_book.extrapolation.train_and_evaluate`'s defaults) for one scheme.

    Parameters
    ----------
    scheme : str
        One of :data:`SCHEMES`.
    seed : int
        Seeds the initial weights and the training batches, as in chapter 9.
    sink : bool, default False
        Add a learned sink logit per head (:class:`ContentLM`).
    eval_lens : sequence of int, default (32, 256)
        Context lengths scored, on chapter 9's evaluation sequences.
    train_len, steps, batch_size, lr
        Chapter 9's recipe: 150 Adam steps of 16 fresh sequences of 32 symbols, learning rate 0.01.

    Returns
    -------
    ChainResult

    Examples
    --------
    >>> r = chain_run("fox", seed=0, eval_lens=(8, 16), train_len=8, steps=2)
    >>> sorted(r.losses)
    [8, 16]
    """
    with _OneThread():
        model = _build(scheme, seed, sink=sink, n_positions=train_len + 1)
        train_loss = _train_on_chain(model, seed, steps=steps, batch_size=batch_size, length=train_len, lr=lr)
        losses = _chain_losses(model, eval_lens)
    return ChainResult(scheme, sink, seed, losses, train_loss, model)


# --- DroPE: drop the rotation of a trained rotary model, recalibrate, test long ---------------------------------


class DropeResult(NamedTuple):
    """What :func:`drope_run` measured: losses in nats per context length, before and after dropping the rotation."""

    seed: int
    steps: int
    rotary: dict
    dropped: dict
    recalibrated: dict
    model: ContentLM


def drope_run(model, *, seed, steps=30, lr=3e-3, eval_lens=(32, 256), train_len=32, batch_size=16):
    """DroPE (Gelberg et al., 2026) on chapter 9's recipe: remove a rotary model's rotation, recalibrate, test long.

    Parameters
    ----------
    model : ContentLM
        A trained ``"rotary"`` model without a sink, e.g. ``chain_run("rotary", seed=seed).model``; left unchanged.
    seed : int
        Seeds the recalibration batches (a stream of chapter 9's chain apart from the training one).
    steps : int, default 30
        Recalibration steps at ``train_len``, each of ``batch_size`` fresh sequences: the budget chapter 9 gives
        Position Interpolation's fine-tuning, a fifth of the 150 training steps.
    lr : float, default 3e-3
        Peak learning rate of the recalibration (half-cosine decay to 0), chapter 9's fine-tuning rate.
    eval_lens : sequence of int, default (32, 256)
        Context lengths scored, on chapter 9's evaluation sequences.
    train_len, batch_size : int, default 32, 16
        The recalibration's sequence length and batch, chapter 9's.

    Returns
    -------
    DropeResult
        ``rotary``: the model as given; ``dropped``: the same weights with no rotation (``"none"``), not
        recalibrated; ``recalibrated``: that model after ``steps`` steps (``model`` is it).

    Examples
    --------
    >>> r = chain_run("rotary", seed=0, eval_lens=(8,), train_len=8, steps=2)
    >>> d = drope_run(r.model, seed=0, steps=1, eval_lens=(8, 16), train_len=8)
    >>> sorted(d.recalibrated)
    [8, 16]
    """
    if not isinstance(model, ContentLM) or model.scheme != "rotary" or model.sink:
        raise ValueError("model must be a ContentLM of the 'rotary' scheme without a sink")
    with _OneThread():
        rotary = _chain_losses(model, eval_lens)
        options = dict(vocab_size=model.vocab_size, d_model=model.d_model, n_heads=model.n_heads)
        dropped = ContentLM("none", n_layers=model.n_layers, **options)
        dropped.load_state_dict(model.state_dict())  # the rotation has no weights: every weight carries over
        dropped.eval()
        before = _chain_losses(dropped, eval_lens)
        _train_on_chain(dropped, seed, steps=steps, batch_size=batch_size, length=train_len, lr=lr, stream=9)
        after = _chain_losses(dropped, eval_lens)
    return DropeResult(seed, steps, rotary, before, after, dropped)


# --- A counting task: recall the symbol of the second-to-last marked token ------------------------------------

N_FILLERS = 4
"""Unmarked symbols of :func:`recall_sequences`: ``0 ... N_FILLERS - 1``."""

N_MARKED = 8
"""Marked symbols of :func:`recall_sequences`: ``N_FILLERS ... N_FILLERS + N_MARKED - 1``."""


def recall_sequences(n_sequences, length, density, *, seed):
    """Sequences of unmarked and marked symbols, and at each position the symbol of the second-to-last mark.

    Parameters
    ----------
    n_sequences, length : int
        How many sequences, of how many symbols.
    density : float
        Probability that a symbol is marked, in ``(0, 1]``; a marked symbol is drawn uniformly from the
        :data:`N_MARKED` marked ones, an unmarked one from the :data:`N_FILLERS` others.
    seed : int, sequence of int or numpy.random.Generator
        Seeds the draw (a Generator is used as it is, continuing its stream).

    Returns
    -------
    tokens, targets : (n_sequences, length) int64 arrays
        ``targets[k, t]`` is the symbol of the second most recent marked token among ``tokens[k, :t + 1]``, or
        -100 (not scored) while fewer than two have come.

    Examples
    --------
    >>> tokens, targets = recall_sequences(1, 8, 0.5, seed=0)
    >>> tokens.shape, targets.shape
    ((1, 8), (1, 8))
    """
    rng = np.random.default_rng(seed)
    marked = rng.random((n_sequences, length)) < density
    tokens = np.where(
        marked,
        N_FILLERS + rng.integers(0, N_MARKED, (n_sequences, length)),
        rng.integers(0, N_FILLERS, (n_sequences, length)),
    )
    targets = np.full((n_sequences, length), -100, dtype=np.int64)
    last = np.full(n_sequences, -100, dtype=np.int64)  # the most recent mark so far
    before = np.full(n_sequences, -100, dtype=np.int64)  # the one before it
    for t in range(length):
        before = np.where(marked[:, t], last, before)
        last = np.where(marked[:, t], tokens[:, t], last)
        targets[:, t] = before
    return tokens.astype(np.int64), targets


class RecallResult(NamedTuple):
    """What :func:`recall_run` measured: ``accuracy[(length, density)]``, the share of scored positions right."""

    scheme: str
    seed: int
    accuracy: dict
    train_loss: float
    model: ContentLM


RECALL_TESTS = ((32, 0.25), (128, 0.25), (128, 0.08))
"""(length, density) of :func:`recall_run`'s tests: as trained, four times longer, and longer with marks three
times sparser (the second-to-last mark about three times farther back)."""


def recall_run(
    scheme, *, seed, steps=200, length=32, density=0.25, batch_size=32, lr=3e-3, tests=RECALL_TESTS, test_sequences=64
):
    """Train a :class:`ContentLM` to recall the second-to-last marked symbol; test it at other lengths and densities.

    Parameters
    ----------
    scheme : str
        One of :data:`SCHEMES`.
    seed : int
        Seeds the initial weights and the training sequences.
    steps, length, density, batch_size, lr
        Adam steps (the book's recipe, :func:`posenc_book.extrapolation.train_steps`), each on ``batch_size``
        fresh sequences of ``length`` symbols with marks of ``density``.
    tests : sequence of (int, float), default RECALL_TESTS
        (length, density) of the test sets, each of ``test_sequences`` sequences, the same for every scheme and
        seed.

    Returns
    -------
    RecallResult

    Notes
    -----
    The answer at position :math:`t` is the mark before the most recent one, a distance that depends on where
    the marks fell, not on :math:`t`. With :class:`posenc.nn.CoPE` a head can gate the marks and read the key at
    contextual position 2; with a position index it must count the marks some other way. Golovneva et al. (2024)
    report that CoPE solves counting and selective-copy tasks on which the usual encodings fail.

    Examples
    --------
    >>> r = recall_run("cope", seed=0, steps=2, tests=((16, 0.5),), test_sequences=4)
    >>> list(r.accuracy)
    [(16, 0.5)]
    """
    vocab = N_FILLERS + N_MARKED
    with _OneThread():
        model = _build(scheme, seed, vocab_size=vocab, n_positions=length + 1)
        rng = np.random.default_rng([seed, 7])
        draw = functools.partial(recall_sequences, batch_size, length, density, seed=rng)
        train_loss = _train_on_targets(model, draw, steps=steps, lr=lr)
        accuracy = {}
        with torch.no_grad():
            for test_length, test_density in tests:
                seed_of_test = [11, test_length, int(round(test_density * 1000))]
                tokens, targets = (
                    torch.from_numpy(a)
                    for a in recall_sequences(test_sequences, test_length, test_density, seed=seed_of_test)
                )
                scored = targets != -100
                right = model(tokens).argmax(dim=-1) == targets
                accuracy[(test_length, test_density)] = float(right[scored].double().mean())
    return RecallResult(scheme, seed, accuracy, train_loss, model)


# --- A state-tracking task: the running parity of a bit string -------------------------------------------------

PARITY_START = 2
"""The symbol that starts every sequence of :func:`parity_sequences`; the bits are 0 and 1."""


def parity_sequences(n_sequences, length, *, seed):
    """Bit strings after a start symbol, and at each bit the parity of the bits so far.

    Parameters
    ----------
    n_sequences, length : int
        How many sequences, of how many bits (each sequence has ``length + 1`` symbols).
    seed : int, sequence of int or numpy.random.Generator
        Seeds the draw.

    Returns
    -------
    tokens, targets : (n_sequences, length + 1) int64 arrays
        ``tokens[:, 0]`` is :data:`PARITY_START`; ``targets[k, t]`` is the parity of ``tokens[k, 1:t + 1]``
        (-100 at ``t = 0``, not scored).

    Notes
    -----
    The parity is the state of a two-element permutation after composing a swap for every 1 and the identity
    for every 0: the smallest state-tracking problem of composing permutations.

    Examples
    --------
    >>> tokens, targets = parity_sequences(1, 4, seed=0)
    >>> tokens.shape, int(targets[0, -1]) == int(tokens[0, 1:].sum() % 2)
    ((1, 5), True)
    """
    bits = np.random.default_rng(seed).integers(0, 2, (n_sequences, length))
    tokens = np.concatenate([np.full((n_sequences, 1), PARITY_START), bits], axis=1).astype(np.int64)
    targets = np.concatenate([np.full((n_sequences, 1), -100), np.cumsum(bits, axis=1) % 2], axis=1).astype(np.int64)
    return tokens, targets


class ParityResult(NamedTuple):
    """What :func:`parity_run` measured: ``accuracy[L]`` over ``L``-bit strings, ``beyond`` past the training length."""

    scheme: str
    seed: int
    train_len: int
    accuracy: dict
    beyond: float
    train_loss: float
    model: ContentLM


def parity_run(scheme, *, seed, steps=300, train_len=16, test_lens=(16, 64), batch_size=32, lr=3e-3, test_sequences=64):
    """Train a :class:`ContentLM` on the running parity of ``train_len`` bits, then test it on longer strings.

    Parameters
    ----------
    scheme : str
        One of :data:`SCHEMES`.
    seed : int
        Seeds the initial weights and the training sequences.
    steps, train_len, batch_size, lr
        Adam steps, each on ``batch_size`` fresh strings of ``train_len`` bits.
    test_lens : sequence of int, default (16, 64)
        Lengths of the test strings, ``test_sequences`` each, the same for every scheme and seed.

    Returns
    -------
    ParityResult
        ``accuracy[L]``: the share of the parities right over every bit of the ``L``-bit strings;
        ``beyond``: the share over the bits after ``train_len`` of the longest strings (0.5 is chance).

    Examples
    --------
    >>> r = parity_run("path", seed=0, steps=2, train_len=4, test_lens=(4, 8), test_sequences=4)
    >>> sorted(r.accuracy), 0.0 <= r.beyond <= 1.0
    ([4, 8], True)
    """
    with _OneThread():
        model = _build(scheme, seed, vocab_size=3, n_positions=max(test_lens) + 2)
        rng = np.random.default_rng([seed, 8])
        draw = functools.partial(parity_sequences, batch_size, train_len, seed=rng)
        train_loss = _train_on_targets(model, draw, steps=steps, lr=lr)
        accuracy, beyond = {}, float("nan")
        with torch.no_grad():
            for length in test_lens:
                tokens, targets = (
                    torch.from_numpy(a) for a in parity_sequences(test_sequences, length, seed=[12, length])
                )
                right = (model(tokens).argmax(dim=-1) == targets)[:, 1:]
                accuracy[length] = float(right.double().mean())
                if length == max(test_lens):
                    beyond = float(right[:, train_len:].double().mean())
    return ParityResult(scheme, seed, train_len, accuracy, beyond, train_loss, model)


# --- Sinks: how much attention the first token gets -----------------------------------------------------------


def first_token_share(model, *, length=32, first=16):
    """The attention the first token gets, and the sink's, over chapter 9's evaluation sequences.

    Parameters
    ----------
    model : ContentLM
        A model trained on chapter 9's chain (:func:`chain_run`).
    length : int, default 32
        Context length read, on the evaluation sequences of that length.
    first : int, default 16
        The queries scored are at positions ``first ... length - 1``.

    Returns
    -------
    first_token, sink, uniform : float
        The mean weight of key 0 over those queries, every head and every layer; the mean share of the sink
        (1 minus each row's sum: 0 without a sink); and the mean of ``1 / (t + 1)``, key 0's share if every
        query spread its attention evenly.

    Examples
    --------
    >>> r = chain_run("none", seed=0, sink=True, eval_lens=(8,), train_len=8, steps=2)
    >>> token, sink, uniform = first_token_share(r.model, length=8, first=4)
    >>> 0.0 <= token <= 1.0 and 0.0 < sink < 1.0 and abs(uniform - (1/5 + 1/6 + 1/7 + 1/8) / 4) < 1e-12
    True
    """
    tokens = torch.from_numpy(evaluation_sequences(length)[:, :length])
    with _OneThread():
        weights = model.attention_weights(tokens)
    rows = torch.stack([w[:, :, first:length] for w in weights])  # (layers, batch, heads, queries, keys)
    token = float(rows[..., 0].double().mean())
    sink = float((1.0 - rows.double().sum(dim=-1)).mean())
    uniform = float(np.mean(1.0 / np.arange(first + 1, length + 1)))
    return token, sink, uniform


# --- The chapter's experiments, for one seed, and the sweep over nine ---------------------------------------------

PAGE_SEED = 0
"""The training seed whose models the chapter trains and shows."""

SWEEP_SEEDS = tuple(range(9))
"""The seeds :func:`sweep` trains: a claim about a scheme must hold on each (posenc_book.robustness.MIN_SEEDS)."""

CHAIN_SCHEMES = ("rotary", "alibi", "none", "fox", "stick_breaking", "cope", "path")
SINK_SCHEMES = ("rotary", "alibi", "none", "fox")
RECALL_SCHEMES = ("cope", "rotary", "alibi", "none")
PARITY_SCHEMES = ("path", "rotary", "alibi", "none")

SWEEP_FILE = Path(__file__).resolve().parent.parent / "data" / "position_from_content.json"
"""Where :func:`sweep` writes its results, which the chapter reads (``book/data/position_from_content.json``)."""

SOURCES = (
    "book/posenc_book/content_position.py",
    "book/posenc_book/extrapolation.py",
    "book/posenc_book/adam.py",
    "book/posenc_book/robustness.py",
    "posenc/nn/forgetting.py",
    "posenc/nn/stick_breaking.py",
    "posenc/nn/cope.py",
    "posenc/nn/path_attention.py",
    "posenc/nn/sink.py",
)
"""The files whose code the experiments run and whose change makes :data:`SWEEP_FILE` stale (its
``sources_sha256``). ``posenc/nn/rotary.py`` and ``alibi.py`` are tested against their references elsewhere and
left out, so that work on them does not ask for a new sweep."""


def run_job(kind, scheme, seed, sink=False):
    """One training run of the chapter: ``kind`` is ``"chain"``, ``"recall"`` or ``"parity"`` (for worker processes).

    Examples
    --------
    >>> run_job("nothing", "rotary", 0)
    Traceback (most recent call last):
        ...
    ValueError: kind must be 'chain', 'recall' or 'parity', got 'nothing'
    """
    if kind == "chain":
        return chain_run(scheme, seed=seed, sink=sink)
    if kind == "recall":
        return recall_run(scheme, seed=seed)
    if kind == "parity":
        return parity_run(scheme, seed=seed)
    raise ValueError(f"kind must be 'chain', 'recall' or 'parity', got {kind!r}")


def jobs(seed=PAGE_SEED) -> dict:
    """The chapter's training runs for one seed, as ``train_in_processes`` takes them: key -> keyword arguments.

    The longest runs come first (PaTH and CoPE on their tasks, PaTH on the chain), so that two worker processes,
    which take the runs in this order, finish together rather than one waiting for the last long run.
    """
    runs = {("parity", "path"): dict(kind="parity", scheme="path", seed=seed)}
    runs[("recall", "cope")] = dict(kind="recall", scheme="cope", seed=seed)
    runs[("chain", "path", False)] = dict(kind="chain", scheme="path", seed=seed)
    runs |= {("parity", s): dict(kind="parity", scheme=s, seed=seed) for s in PARITY_SCHEMES if s != "path"}
    runs |= {("recall", s): dict(kind="recall", scheme=s, seed=seed) for s in RECALL_SCHEMES if s != "cope"}
    runs |= {("chain", s, True): dict(kind="chain", scheme=s, seed=seed, sink=True) for s in SINK_SCHEMES}
    runs |= {("chain", s, False): dict(kind="chain", scheme=s, seed=seed) for s in CHAIN_SCHEMES if s != "path"}
    return runs


def quantities(results, seed=PAGE_SEED) -> dict:
    """The numbers the chapter's claims read, from the results of :func:`jobs` (DroPE and the sinks computed here).

    Returns
    -------
    dict of str to float
        ``chain/<scheme>/<length>`` and ``chain/<scheme>/rise`` (loss at 256 minus loss at 32, nats);
        ``drope/<model>/<length>`` for ``rotary``, ``dropped`` and ``recalibrated``; ``sink/<scheme>/<kind>`` for
        ``token`` and ``sink`` without and with (``token+sink``, ``sink+sink``) a learned sink, and
        ``sink/uniform``; ``recall/<scheme>/<length>/<density>``; ``parity/<scheme>/<length>`` and
        ``parity/<scheme>/beyond``; and the differences and extremes :data:`CLAIMS` bound (``chain/<scheme>/below
        alibi/<length>``, ``drope/gain/256``, ``drope/cost/32``, ``drope/above none/<length>``, ``recall/best
        other/...``, ``recall/cope ahead/...``, ``parity/best other/...``, ``sink/first token minus uniform``
        with and without a sink, ``sink/largest other sink+sink``).
    """
    q = {}
    for scheme in CHAIN_SCHEMES:
        losses = results["chain", scheme, False].losses
        for length, loss in losses.items():
            q[f"chain/{scheme}/{length}"] = loss
        q[f"chain/{scheme}/rise"] = losses[256] - losses[32]
    drope = drope_run(results["chain", "rotary", False].model, seed=seed)
    for name in ("rotary", "dropped", "recalibrated"):
        for length, loss in getattr(drope, name).items():
            q[f"drope/{name}/{length}"] = loss
    for scheme in SINK_SCHEMES:
        for sink in (False, True):
            token, share, uniform = first_token_share(results["chain", scheme, sink].model)
            suffix = "+sink" if sink else ""
            q[f"sink/{scheme}/token{suffix}"], q[f"sink/{scheme}/sink{suffix}"] = token, share
            q[f"sink/{scheme}/256{suffix}"] = results["chain", scheme, sink].losses[256]
    q["sink/uniform"] = uniform
    for scheme in RECALL_SCHEMES:
        for (length, density), accuracy in results["recall", scheme].accuracy.items():
            q[f"recall/{scheme}/{length}/{density}"] = accuracy
    for scheme in PARITY_SCHEMES:
        r = results["parity", scheme]
        for length, accuracy in r.accuracy.items():
            q[f"parity/{scheme}/{length}"] = accuracy
        q[f"parity/{scheme}/beyond"] = r.beyond
    # the differences the claims bound
    for scheme in ("fox", "stick_breaking"):
        for length in (32, 256):
            q[f"chain/{scheme}/below alibi/{length}"] = q[f"chain/alibi/{length}"] - q[f"chain/{scheme}/{length}"]
    q["drope/gain/256"] = q["drope/rotary/256"] - q["drope/recalibrated/256"]
    q["drope/cost/32"] = q["drope/recalibrated/32"] - q["drope/rotary/32"]
    for length in (32, 256):
        q[f"drope/above none/{length}"] = q[f"drope/recalibrated/{length}"] - q[f"chain/none/{length}"]
    for length, density in RECALL_TESTS:
        best = max(q[f"recall/{s}/{length}/{density}"] for s in RECALL_SCHEMES if s != "cope")
        q[f"recall/best other/{length}/{density}"] = best
        q[f"recall/cope ahead/{length}/{density}"] = q[f"recall/cope/{length}/{density}"] - best
    for measure in ("16", "beyond"):
        q[f"parity/best other/{measure}"] = max(q[f"parity/{s}/{measure}"] for s in PARITY_SCHEMES if s != "path")
    q["sink/first token minus uniform"] = max(q[f"sink/{s}/token"] for s in SINK_SCHEMES) - q["sink/uniform"]
    q["sink/first token minus uniform+sink"] = max(q[f"sink/{s}/token+sink"] for s in SINK_SCHEMES) - q["sink/uniform"]
    q["sink/largest other sink+sink"] = max(q[f"sink/{s}/sink+sink"] for s in SINK_SCHEMES if s != "fox")
    return q


CLAIMS = (
    # chapter 9's chain: trained at 32 symbols, scored at 256 (loss in nats)
    Bound("chain/fox/rise", below=0.1),
    Bound("chain/stick_breaking/rise", below=0.1),
    Bound("chain/path/rise", below=0.2),
    Bound("chain/cope/rise", above=0.3),
    Bound("chain/rotary/rise", above=0.8),
    Bound("chain/fox/below alibi/32", above=0.3),
    Bound("chain/fox/below alibi/256", above=0.3),
    Bound("chain/stick_breaking/below alibi/32", above=0.3),
    Bound("chain/stick_breaking/below alibi/256", above=0.3),
    # DroPE: the rotary model, its rotation dropped and 30 steps of recalibration
    Bound("drope/gain/256", above=0.1),
    Bound("drope/cost/32", above=0.3),
    Bound("drope/above none/32", below=0.15),
    Bound("drope/above none/256", below=0.15),
    # counting: recall the second-to-last mark (accuracy)
    *(Bound(f"recall/cope/{n}/{d}", above=low) for (n, d), low in zip(RECALL_TESTS, (0.9, 0.8, 0.7))),
    *(Bound(f"recall/best other/{n}/{d}", below=0.7) for n, d in RECALL_TESTS),
    *(Bound(f"recall/cope ahead/{n}/{d}", above=0.3) for n, d in RECALL_TESTS),
    # state tracking: the running parity (accuracy; 0.5 is chance)
    Bound("parity/path/16", above=0.99),
    Bound("parity/path/beyond", above=0.7),
    Bound("parity/best other/16", below=0.95),
    Bound("parity/best other/beyond", below=0.55),
    # sinks: the first token's share of attention at positions 16-31, and a learned sink's
    Bound("sink/first token minus uniform", below=0.0),
    Bound("sink/first token minus uniform+sink", below=0.0),
    Bound("sink/fox/sink+sink", above=0.4),
    Bound("sink/largest other sink+sink", below=0.1),
)
"""The chapter's claims about schemes: each must hold on every seed of :data:`SWEEP_SEEDS`, its mean three
standard deviations inside the bound (:func:`posenc_book.robustness.check_seed_values`)."""

PAGE_CLAIMS = tuple(Bound(b.quantity, above=0.5) if b.quantity == "parity/path/beyond" else b for b in CLAIMS)
"""The same claims for the run the page shows (:data:`PAGE_SEED`), each with a margin of three times the spread
that four perturbed runs give it. The page's PaTH model is right on 0.886 of the bits beyond its training length,
and the perturbed runs move that by up to 0.11 (0.85 to 1.0): the page claims only that it is above chance."""


def check_page(values, data) -> list:
    """The page's run against :data:`PAGE_CLAIMS`, with the perturbation spreads :func:`sweep` measured.

    Parameters
    ----------
    values : dict of str to float
        :func:`quantities` of the page's run.
    data : dict
        :func:`read_sweep`'s result: its ``perturbed`` values of :data:`PAGE_SEED` give each quantity's spread.

    Returns
    -------
    list of dict
        One row per claim: ``quantity``, ``bound``, ``value``, ``spread``, ``margin`` and ``holds`` (the bound
        met, by at least :data:`~posenc_book.robustness.MARGIN_FACTOR` times the spread).
    """
    rows = []
    for bound in PAGE_CLAIMS:
        value = float(values[bound.quantity])
        reference = data["quantities"][bound.quantity][data["seeds"].index(data["page_seed"])]
        spread = max((abs(other - reference) for other in data["perturbed"][bound.quantity]), default=0.0)
        margin = float(bound.margin(np.asarray(value)))
        holds = bool(margin > 0 and margin >= MARGIN_FACTOR * spread)
        rows.append(
            dict(quantity=bound.quantity, bound=bound.text(), value=value, spread=spread, margin=margin, holds=holds)
        )
    return rows


def seed_quantities(seed, draw=None) -> dict:
    """:func:`quantities` of every run of :func:`jobs` for ``seed``, in turn, under perturbation ``draw`` (or none)."""
    perturbation = None if draw is None else Perturbation(draw)
    with perturbed(perturbation):
        return quantities({key: run_job(**kwargs) for key, kwargs in jobs(seed).items()}, seed)


def _sources_sha256(root: Path) -> str:
    """One sha256 over the code of :data:`SOURCES` (:func:`posenc_book.source_digest.code_of`: docstrings and
    comments left out), in order (each file's path and the code's length included)."""
    digest = hashlib.sha256()
    for name in SOURCES:
        data = code_of((root / name).read_text(encoding="utf-8")).encode()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()


def sources_sha256() -> str:
    """The hash of the experiments' code as it is now: :data:`SWEEP_FILE` records the one it ran."""
    return _sources_sha256(Path(__file__).resolve().parents[2])


def sweep(seeds=SWEEP_SEEDS, draws=PERTURBATION_DRAWS, *, processes=None) -> dict:
    """Train every run of the chapter for ``seeds``, and the page's seed under ``draws``; check :data:`CLAIMS`.

    Returns
    -------
    dict
        What :data:`SWEEP_FILE` holds: the versions and date, the sources' hash, every quantity per seed and per
        draw, and one row per claim: over the seeds (:func:`posenc_book.robustness.check_seed_values`: every seed
        meets the bound, and the mean by three standard deviations) and for the page's seed (its margin against
        three times its spread under the perturbations, as :func:`posenc_book.robustness.check_claim` measures it).
    """
    runs = {("seed", seed): dict(seed=seed) for seed in seeds}
    runs |= {("draw", draw): dict(seed=PAGE_SEED, draw=draw) for draw in draws}
    results = train_in_processes(seed_quantities, runs, processes=processes)
    by_seed = [results["seed", seed] for seed in seeds]
    names = sorted(by_seed[0])
    values = {name: [run[name] for run in by_seed] for name in names}
    perturbed_values = {name: [results["draw", draw][name] for draw in draws] for name in names}
    seed_check = check_seed_values(values, CLAIMS, seeds)
    page = results["seed", PAGE_SEED] if PAGE_SEED in seeds else seed_quantities(PAGE_SEED)
    rows = []
    for bound, page_bound, checked in zip(CLAIMS, PAGE_CLAIMS, seed_check.checks):
        value = page[bound.quantity]
        spread = max((abs(other - value) for other in perturbed_values[bound.quantity]), default=0.0)
        margin = float(page_bound.margin(np.asarray(value)))
        rows.append(
            dict(
                quantity=bound.quantity,
                bound=bound.text(),
                seeds_min=min(checked.values),
                seeds_max=max(checked.values),
                seeds_mean=checked.mean,
                seeds_spread=checked.spread,
                seeds_margin=checked.margin,
                seeds_holds=checked.passed,
                page_bound=page_bound.text(),
                page_value=value,
                page_spread=spread,
                page_margin=margin,
                page_holds=bool(margin > 0 and margin >= MARGIN_FACTOR * spread),
            )
        )
    return dict(
        what="posenc_book.content_position.sweep: chapter 16's runs over seeds, and its own seed under perturbations",
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        versions=dict(python=platform.python_version(), torch=torch.__version__, numpy=np.__version__),
        sources_sha256=sources_sha256(),
        seeds=list(seeds),
        page_seed=PAGE_SEED,
        draws=list(draws),
        quantities=values,
        perturbed=perturbed_values,
        claims=rows,
    )


def read_sweep(path=SWEEP_FILE) -> dict:
    """The results :func:`sweep` wrote to ``path`` (the chapter reads them from :data:`SWEEP_FILE`)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def main(argv=None) -> int:
    """``python -m posenc_book.content_position [--out FILE]``: run :func:`sweep`, write it, print the claims."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--out", type=Path, default=SWEEP_FILE, help="where to write the results (JSON)")
    arguments = parser.parse_args(argv)
    result = sweep()
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    arguments.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    failed = 0
    for row in result["claims"]:
        verdict = "holds" if row["seeds_holds"] and row["page_holds"] else "FAILS"
        failed += verdict == "FAILS"
        print(
            f"{row['quantity']:<46} {row['bound']:>10}  seeds {row['seeds_min']:.3f} to {row['seeds_max']:.3f}, "
            f"mean {row['seeds_mean']:.3f}, spread {row['seeds_spread']:.3g}; page {row['page_value']:.3f} "
            f"(perturbed {row['page_spread']:.2g})  {verdict}"
        )
    print(f"wrote {arguments.out}: {len(result['claims']) - failed} of {len(result['claims'])} claims hold")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

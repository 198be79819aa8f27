"""The book's own helpers: what the chapters import besides :mod:`posenc`, and the benchmark.

This package is not part of the ``posenc`` wheel and no model needs it: it lives with the book, in
``book/posenc_book``, and ``requirements.txt`` installs it (editable) for the chapters. It uses only the
public API of :mod:`posenc` and :mod:`posenc.nn`. Each module serves the chapter it is named after:

- :mod:`posenc_book.attention_block`: a causal self-attention block with RoPE and a KV cache (the start-here
  page, which shows its source whole for readers to copy);
- :mod:`posenc_book.prototypes`: the position codes tried before the sinusoid (chapter 2);
- :mod:`posenc_book.add_or_concatenate`: layer costs and the split of an attention logit (chapter 4);
- :mod:`posenc_book.tabular`: a feature tokenizer and a tiny FT-Transformer (chapter 5);
- :mod:`posenc_book.bench`: ``python -m posenc_book.bench`` (``make bench``), the timings of chapters 6 and 7;
- :mod:`posenc_book.bench_gpu`: ``make check-gpu``, posenc.nn on a CUDA GPU (parity, no synchronisation, a tiny
  Llama, compiled, FlexAttention, timings), and :mod:`posenc_book.host_reads`, the guard against reading a
  tensor's values on the host that it and ``tests/test_host_reads.py`` use;
- :mod:`posenc_book.extrapolation`: a tiny causal language model trained short and tested long (chapter 9);
- :mod:`posenc_book.base_bound`: the smallest rotary base at which Xu et al.'s condition holds for a context
  length, and the band above it (chapter 12);
- :mod:`posenc_book.frequency_usage`: which rotary pairs a trained model uses, and p-RoPE (chapter 12);
- :mod:`posenc_book.robustness`: training claims checked against a perturbation that stands in for another
  processor (the tests of chapters 9 and 12);
- :mod:`posenc_book.plotting`: the book's figure style, its legibility check and heat map (every chapter);
- :mod:`posenc_book.tables`: results tables rendered as HTML, not printed (chapters 4, 6, 8 and 9);
- :mod:`posenc_book.audit`: adapters to six libraries' positional-encoding code and the audit runner
  (chapters 13 and 14);
- :mod:`posenc_book.zoo`: every rotary configuration of transformers read by posenc, six published configs, and
  tiny transformers models that rotate with posenc's modules (chapter 15).

The helpers check what a reader is likely to get wrong (an unknown scheme name, a sequence longer than a
model's table, shapes that do not fit together) and nothing more.
"""

__all__: list[str] = []

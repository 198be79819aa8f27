"""Helpers that exist for the book's chapters, not for models.

Nothing here is imported by :mod:`posenc` or :mod:`posenc.nn`; a model never needs it. Each module serves
the chapter it is named after:

- :mod:`posenc.chapters.prototypes`: the position codes tried before the sinusoid (chapter 2);
- :mod:`posenc.chapters.add_or_concatenate`: layer costs and the split of an attention logit (chapter 4);
- :mod:`posenc.chapters.tabular`: a feature tokenizer and a tiny FT-Transformer (chapter 5);
- :mod:`posenc.chapters.extrapolation`: a tiny causal language model trained short and tested long (chapter 9);
- :mod:`posenc.chapters.plotting`: the book's figure style and heat map (every chapter).
"""

__all__: list[str] = []

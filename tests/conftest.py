"""Shared hypothesis settings: deterministic, so a failure reproduces on every machine."""

from hypothesis import settings

settings.register_profile("posenc", derandomize=True, max_examples=60, deadline=None)
settings.load_profile("posenc")

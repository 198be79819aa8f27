"""The model zoo: every rotary configuration of the pinned transformers, as posenc reads it (chapter 15).

:func:`rotary_configs` builds, with its defaults, every configuration class defined in transformers' configuration
modules and keeps those that carry rotary parameters; :func:`census` reads each with
:meth:`posenc.RotaryPlan.from_config`; :func:`families_by_rope_type` counts the families per rope type. The same
list is what tests/test_model_zoo.py checks, family by family, against transformers' own rotary classes.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pathlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import posenc

__all__ = ["ZooEntry", "census", "families_by_rope_type", "model_type_of", "rotary_configs"]

MODEL_TYPES = {"Qwen3OmniMoeCode2WavConfig": "qwen3_omni_moe_code2wav"}
"""Configuration classes without a ``model_type`` of their own, and the name posenc's table gives them."""

_MENTIONS_ROTARY = re.compile(r"rope_parameters|rope_theta|rope_scaling|rotary")


@contextmanager
def _quiet() -> Iterator[None]:
    """transformers logs (does not warn) about defaults while configs are built; keep it quiet."""
    logger = logging.getLogger("transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def rotary_configs() -> list[tuple[str, object]]:
    """(family, config) for every configuration class of transformers that builds with its defaults and rotates.

    The family is the directory of the class's module (``transformers/models/<family>/``). A class is kept if its
    default instance has a non-empty ``rope_parameters``; modules whose source never mentions rotary parameters are
    not imported (about 320 of 530), which keeps this to a few seconds.

    Returns
    -------
    list of (str, transformers.PreTrainedConfig)
        Sorted by family, then class name.
    """
    import transformers
    from transformers import PreTrainedConfig

    root = pathlib.Path(transformers.__file__).parent / "models"
    found = []
    with _quiet():
        for path in sorted(root.glob("*/configuration_*.py")):
            if not _MENTIONS_ROTARY.search(path.read_text()):
                continue
            module = importlib.import_module(f"transformers.models.{path.parent.name}.{path.stem}")
            for _, cls in sorted(vars(module).items()):
                defined_here = inspect.isclass(cls) and cls.__module__ == module.__name__
                if not (defined_here and issubclass(cls, PreTrainedConfig)):
                    continue
                try:
                    config = cls()
                except (TypeError, ValueError, AttributeError, KeyError):  # no defaults to build from
                    continue
                if getattr(config, "rope_parameters", None):
                    found.append((path.parent.name, config))
    return found


def model_type_of(config: object) -> str:
    """The ``model_type`` posenc reads ``config`` as: its own, or :data:`MODEL_TYPES`'s name for its class."""
    return MODEL_TYPES.get(type(config).__name__) or str(getattr(config, "model_type", ""))


@dataclass(frozen=True)
class ZooEntry:
    """One configuration class of the zoo and its :class:`posenc.RotaryPlan` (None if posenc refused it)."""

    family: str
    config_class: str
    model_type: str
    plan: posenc.RotaryPlan | None
    refusal: str | None

    @property
    def rope_types(self) -> tuple[str, ...]:
        """The rope types of the rotating layer kinds, in order of first appearance ("axial", "mrope": several axes)."""
        if self.plan is None:
            return ()
        kinds = []
        for kind in self.plan.kinds:
            if kind.rotates:
                kinds.append(kind.scaling.rope_type if kind.n_axes == 1 else _multiaxis_name(kind))
        return tuple(dict.fromkeys(kinds))


def _multiaxis_name(kind: posenc.LayerRotary) -> str:
    return "mrope" if kind.axes == ("time", "height", "width") and kind.frequency_dim == 0 else "axial"


def census() -> list[ZooEntry]:
    """Every configuration of :func:`rotary_configs`, read by :meth:`posenc.RotaryPlan.from_config`.

    A config posenc refuses (its ``ValueError``) is kept with the refusal's message and no plan.
    """
    entries = []
    for family, config in rotary_configs():
        model_type = model_type_of(config)
        try:
            plan, refusal = posenc.RotaryPlan.from_config(config, model_type=model_type), None
        except ValueError as error:
            plan, refusal = None, str(error)
        entries.append(ZooEntry(family, type(config).__name__, model_type, plan, refusal))
    return entries


def families_by_rope_type(entries: list[ZooEntry]) -> dict[str, list[str]]:
    """For each rope type, the sorted families with a layer kind of that type (a family may count under several)."""
    table: dict[str, set[str]] = {}
    for entry in entries:
        for rope_type in entry.rope_types:
            table.setdefault(rope_type, set()).add(entry.family)
    return {rope_type: sorted(families) for rope_type, families in sorted(table.items())}

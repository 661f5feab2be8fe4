"""Judging methods, found through a registry with lazy imports.

======================  ======================================================================
method                  what it is
======================  ======================================================================
``gveval``              G-VEval overall score 0-100 (ref-free / ref-only / combined)
``gveval-accr``         G-VEval ACCR: accuracy, completeness, conciseness, relevance + mean
``visce2``              VisCE²: 0-100 rating with the extracted visual context (and variants)
``harmoniceval``        HarmonicEval: 5 criteria on 1-5, harmonic weighting (gamma)
``cap3d``               3D-caption correctness / hallucination points and precision
``likelihood``          reference-conditioned likelihood (PMI) for small base LMs
======================  ======================================================================

Each method is a :class:`~capjudge.methods.base.Method` that declares its own scales, pass
marks, criteria, what needs the image, how criteria combine and its system-level aggregates.
Adding a built-in method is its module plus its prompts folder and one ``add_lazy`` line
below. An installed package adds one through the ``capjudge.methods`` entry-point group
(``name = "package.module:Class"``), and code with the :func:`register_method` decorator; see
:mod:`capjudge.registry` for what happens on a name clash or a broken plugin.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from capjudge.methods.base import (
    AggregateOptions,
    AggregateSetting,
    BaseMethod,
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
    Verdict,
    item_image,
    slot_criteria,
    verdict,
)
from capjudge.registry import Registry, RegistryError, subclass_check

log = logging.getLogger(__name__)

METHOD_REGISTRY: Registry[type[Method]] = Registry("method", group="capjudge.methods",
                                                 check=subclass_check(Method))
METHOD_REGISTRY.add_lazy("gveval", "capjudge.methods.gveval:GVEval")
METHOD_REGISTRY.add_lazy("gveval-accr", "capjudge.methods.gveval:GVEvalACCR")
METHOD_REGISTRY.add_lazy("visce2", "capjudge.methods.visce2:VisCE2")
METHOD_REGISTRY.add_lazy("harmoniceval", "capjudge.methods.harmoniceval:HarmonicEval")
METHOD_REGISTRY.add_lazy("cap3d", "capjudge.methods.cap3d:Cap3D")
METHOD_REGISTRY.add_lazy("likelihood", "capjudge.methods.likelihood:Likelihood")

DEFAULT_METHOD = "gveval"
"""What the CLI uses when ``--method`` is not given."""

register_method = METHOD_REGISTRY.decorator
"""``@register_method("name")`` on a :class:`Method` subclass registers it."""


def get_method(name: str) -> Method:
    """A method instance by registry name (imported lazily).

    Raises:
        RegistryError: (a ``KeyError``) no method of that name (the message lists the
            registered ones), a name claimed twice, or a plugin that cannot be loaded.
    """
    cls = METHOD_REGISTRY.get(name)
    method = cls()
    if method.name != name:  # a class registered under another name still reports that name
        method.name = name  # type: ignore[misc]
    return method


def method_names() -> list[str]:
    """Every registered method name, plugins included (nothing is imported)."""
    return METHOD_REGISTRY.names()


def check_method_options(name: str, options: Mapping[str, object]
                         ) -> tuple[tuple[str, str], ...]:
    """The named options in force for method ``name`` under ``options``, checked.

    ``method_options`` are free-form (backends, profiles and methods read their own keys),
    but a key that is a named option of other methods and not of this one would be ignored
    without a word (``visual_input`` on a method that shows one picture): it is refused,
    naming the methods that have it. A method that cannot be loaded (a broken plugin) is
    left out of that search with a warning.

    Raises:
        ValueError: a value that is not one of the option's choices, or another method's
            named option.
        RegistryError: no method ``name``.
    """
    settings = get_method(name).settings(MethodOptions(extra=dict(options)))
    unnamed = sorted(set(options) - {key for key, _ in settings})
    if not unnamed:
        return settings
    named: dict[str, set[str]] = {}  # each loadable method's named options (its settings)
    for other in method_names():
        try:
            named[other] = {key for key, _ in get_method(other).settings(MethodOptions())}
        except RegistryError as exc:
            log.warning("method %s left out of the option check: %s", other, exc)
    for key in unnamed:
        owners = [other for other, keys in named.items() if key in keys]
        if owners:
            raise ValueError(f"{name} has no option {key!r} (it is an option of "
                             f"{', '.join(owners)})")
    return settings


def aggregate_settings() -> dict[str, tuple[AggregateSetting, list[str]]]:
    """Every loadable method's aggregate settings: name -> (setting, the methods declaring it).

    The keys ``params.yaml: aggregate`` accepts beside its own (a method that cannot be loaded
    is left out, logged at debug level). Where two methods declare one name, the first one's
    bounds check the value; each method reads it with its own default.
    """
    found: dict[str, tuple[AggregateSetting, list[str]]] = {}
    for name in method_names():
        try:
            declared = get_method(name).aggregate_settings
        except RegistryError as exc:
            # Said where the method is used (params checks, get_method): not once more per
            # config built.
            log.debug("method %s left out of the aggregate settings: %s", name, exc)
            continue
        for key, setting in declared.items():
            found.setdefault(key, (setting, []))[1].append(name)
    return found


def context_method_names() -> list[str]:
    """The registered methods that have a context stage (each method is loaded to ask it).

    A method that cannot be loaded is left out with a warning: a broken plugin must not stop
    a ``contexts`` section from defaulting to the one working method with a context stage.
    """
    found = []
    for name in method_names():
        try:
            if get_method(name).needs_context:
                found.append(name)
        except RegistryError as exc:
            log.warning("method %s left out of the context-stage methods: %s", name, exc)
    return found


def default_context_method() -> str | None:
    """What a ``contexts`` section without ``method:`` runs.

    Returns:
        The one registered method with a context stage, or None when there are several (or
        none) to choose from.
    """
    found = context_method_names()
    return found[0] if len(found) == 1 else None


__all__ = ["DEFAULT_METHOD", "METHOD_REGISTRY", "AggregateOptions", "AggregateSetting",
           "BaseMethod", "Criterion", "aggregate_settings",
           "CriterionSpec", "Method", "MethodOptions", "Planned", "Scale", "Skip", "Verdict",
           "check_method_options", "context_method_names", "default_context_method",
           "get_method", "item_image", "method_names", "register_method", "slot_criteria",
           "verdict"]

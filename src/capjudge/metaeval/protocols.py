"""How each dataset is scored. The papers differ, so every reported number names its protocol.

A protocol says how human ratings become rows (every annotator's rating its own row, or the
annotators' mean, or one annotator at a time averaged afterwards), which statistics are the
headline, how many references the reference-based metrics see (or several reference settings,
each reported), and whether metric scores are rounded first.

Each dataset declares its protocols, and its default one, in its own module
(:class:`~capjudge.metaeval.datasets.DatasetSpec`). A protocol for a dataset declared
elsewhere (e.g. a new way of scoring a built-in dataset) comes from an installed package's
``capjudge.protocols`` entry point (``name = "package.module:PROTOCOL"``, a
:class:`Protocol`) or from code with :func:`register_protocol`. A name declared twice is an
error naming both, when it is asked for (see :mod:`capjudge.registry`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from capjudge.metaeval.datasets import DatasetError, Protocol, dataset_names, get_dataset
from capjudge.registry import Registry, RegistryError, instance_check

PROTOCOL_REGISTRY: Registry[Protocol] = Registry("protocol", group="capjudge.protocols",
                                                 check=instance_check(Protocol))
"""Protocols not declared by their dataset's spec: entry points and :func:`register_protocol`."""


def _declared(dataset: str | None = None) -> list[Protocol]:
    """The protocols datasets declare in their specs (of one dataset when given).

    A dataset that cannot be loaded (a broken plugin) is left out of the listing; asking for
    the dataset itself says what is wrong.
    """
    out = []
    for name in [dataset] if dataset else dataset_names():
        try:
            out += list(get_dataset(name).protocols)
        except DatasetError:
            if dataset:
                raise
    return out


def _registered(dataset: str | None = None) -> list[Protocol]:
    """The protocols registered on their own (of one dataset when given); broken ones left out."""
    out = []
    for name in PROTOCOL_REGISTRY.names():
        try:
            protocol = PROTOCOL_REGISTRY.get(name)
        except RegistryError:
            continue
        if dataset is None or protocol.dataset == dataset:
            out.append(protocol)
    return out


def register_protocol(protocol: Protocol, *, replace: bool = False) -> Protocol:
    """Add a protocol from code (e.g. for a dataset registered from outside).

    Raises:
        ValueError: the name is taken (by a registered protocol, or one a dataset declares)
            and ``replace`` is false.
    """
    if not replace and any(p.name == protocol.name for p in _declared()):
        raise ValueError(f"protocol {protocol.name!r} is already registered (declared by its "
                         "dataset)")
    return PROTOCOL_REGISTRY.add(protocol.name, protocol, replace=replace)


def unregister_protocol(name: str) -> None:
    """Forget a protocol registered in code (tests that register toys clean up with this)."""
    PROTOCOL_REGISTRY.remove(name)


def protocol_names(dataset: str | None = None) -> list[str]:
    """The protocol names (of one dataset when ``dataset`` is given), datasets in name order."""
    names = [p.name for p in _declared(dataset) + _registered(dataset)]
    return list(dict.fromkeys(names))


def default_protocol(dataset: str) -> str:
    """The name of the dataset's default protocol (declared in its spec).

    Raises:
        KeyError: unknown dataset.
    """
    try:
        return get_dataset(dataset).default_protocol
    except DatasetError as exc:
        raise KeyError(str(exc)) from exc


class _DefaultView(Mapping[str, str]):
    """``DEFAULT_PROTOCOL[dataset]``, read from the dataset registry."""

    def __getitem__(self, dataset: str) -> str:
        return default_protocol(dataset)

    def __iter__(self) -> Iterator[str]:
        return iter(dataset_names())

    def __len__(self) -> int:
        return len(dataset_names())


DEFAULT_PROTOCOL: Mapping[str, str] = _DefaultView()


class _ProtocolView(Mapping[str, Protocol]):
    """``PROTOCOLS[name]``: every protocol, declared by a dataset or registered, by name."""

    def _all(self) -> dict[str, Protocol]:
        return {p.name: p for p in _registered() + _declared()}

    def __getitem__(self, name: str) -> Protocol:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(protocol_names())

    def __len__(self) -> int:
        return len(protocol_names())


PROTOCOLS: Mapping[str, Protocol] = _ProtocolView()


def get_protocol(dataset: str, name: str | None = None) -> Protocol:
    """The named protocol (or the dataset's default); it must belong to the dataset.

    Raises:
        KeyError: unknown dataset or protocol, a protocol of another dataset, or a name
            declared twice.
    """
    key = name or default_protocol(dataset)
    try:
        declared = [p for p in _declared(dataset) if p.name == key]
    except DatasetError as exc:
        raise KeyError(str(exc)) from exc
    if key in PROTOCOL_REGISTRY:
        registered = PROTOCOL_REGISTRY.get(key)  # a broken or doubly claimed one raises here
        if declared and registered != declared[0]:
            raise RegistryError(f"protocol {key!r} is declared by dataset {dataset!r} and "
                                f"registered again ({PROTOCOL_REGISTRY.origin(key)})")
        declared = declared or [registered]
    if not declared:
        other = [p for d in dataset_names() if d != dataset for p in _safe_declared(d)
                 if p.name == key]
        if other:
            raise KeyError(f"protocol {key!r} is for {other[0].dataset}, not {dataset}")
        raise KeyError(f"unknown protocol {key!r} for {dataset}; known: "
                       f"{', '.join(protocol_names(dataset))}")
    protocol = declared[0]
    if protocol.dataset != dataset:
        raise KeyError(f"protocol {key!r} is for {protocol.dataset}, not {dataset}")
    return protocol


def _safe_declared(dataset: str) -> list[Protocol]:
    try:
        return _declared(dataset)
    except DatasetError:
        return []

"""Meta-evaluation datasets: the records loaders produce, and the dataset registry.

Every loader returns a :class:`MetaDataset`: candidates with their references and per-annotator
ratings (per criterion), or caption pairs with the human preference. The files themselves are
not shipped (their licences do not allow it); point ``--path`` at your copy. Each loader reads
the file as its authors published it; anything else (a malformed file, a missing key, a score
string that does not parse, wrong counts) is a :class:`DatasetError` naming the file and the
entry.

**One module per dataset.** The built-in datasets are the modules of
:mod:`capjudge.metaeval.datasets.loaders` (``vatex_eval.py`` is ``vatex-eval``); each declares
a :class:`DatasetSpec` named ``SPEC``: its loader, default protocol, whether its published file
carries references, whether it is pairwise, the file it reads, and its scoring protocols. The
registry finds them by listing that folder, without importing them; a module is imported when
its dataset is asked for. The generated reference page (docs/reference/datasets.md) lists them.

**Adding one from outside**: an installed package declares a ``capjudge.datasets`` entry point
(``my-set = "my_package.my_set:SPEC"``, a :class:`DatasetSpec`), or code calls
:func:`register_dataset`, as a decorator or lazily with ``"package.module:function"``::

    @register_dataset("my-set", default_protocol="my-set-rows")
    def load_my_set(path: Path) -> MetaDataset: ...

Name clashes and broken plugins follow :mod:`capjudge.registry`'s rules.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from capjudge.registry import Registry, instance_check


@dataclass
class Candidate:
    """One judged text with its references and human ratings (one value per annotator)."""

    key: str
    candidate: str
    references: list[str]
    ratings: dict[str, list[float]]
    image: str | None = None
    system: str | None = None
    group: str | None = None  # what candidates compete within (best-of-N)
    question: str | None = None


@dataclass
class Pair:
    """Two candidates for the same input and which one humans preferred."""

    key: str
    a: str
    b: str
    references: list[str]
    prefers_a: bool
    category: str = "all"
    image: str | None = None


@dataclass
class MetaDataset:
    """A loaded human-judgment dataset."""

    name: str
    candidates: list[Candidate] = field(default_factory=list)
    pairs: list[Pair] = field(default_factory=list)
    notes: str = ""

    @property
    def has_references(self) -> bool:
        """Whether every candidate (or pair) has at least one reference."""
        items: list[Candidate] | list[Pair] = self.pairs or self.candidates
        return bool(items) and all(item.references for item in items)


class DatasetError(ValueError):
    """The file is not in the expected format (the message names the file and the entry)."""


@dataclass(frozen=True)
class Protocol:
    """One way of scoring a dataset."""

    name: str
    dataset: str
    rows: str  # "ratings": every rating a row | "mean": annotators averaged | "per-annotator"
    criterion: str = "overall"
    headline: str = "kendall_tau_c"
    refs: int | None = None  # how many references reference-based metrics see (None: all)
    round_to: int | None = None  # metric scores rounded before correlating (EMScore protocol)
    pairwise: bool = False
    exclude_systems: tuple[str, ...] = ()
    description: str = ""
    # Several reference counts, each scored and reported (EMScore: the first reference, and all
    # 9); empty: the single setting ``refs``.
    ref_settings: tuple[int, ...] = ()


# --------------------------------------------------------------------------------------------
# Registry

Loader = Callable[[Path], MetaDataset]


@dataclass(frozen=True)
class DatasetSpec:
    """What the registry knows about a dataset, declared by the dataset's own module.

    Attributes:
        name: the ``--dataset`` name.
        loader: the loader, or ``"package.module:function"`` imported on first use.
        default_protocol: the protocol used when none is named (see ``protocols``).
        has_references: whether the published file carries references (a loaded file may
            still lack them, see :attr:`MetaDataset.has_references`).
        pairwise: whether the dataset holds caption pairs (accuracy) rather than ratings.
        file: the published file the loader reads (for messages and listings).
        description: one line on the dataset.
        protocols: the ways of scoring it (its default protocol among them, unless that one
            is registered separately with
            :func:`~capjudge.metaeval.protocols.register_protocol`).
    """

    name: str
    loader: Loader | str
    default_protocol: str
    has_references: bool = True
    pairwise: bool = False
    file: str = ""
    description: str = ""
    protocols: tuple[Protocol, ...] = ()

    def get_loader(self) -> Loader:
        """The loader, importing its module first when it was registered by path.

        Raises:
            DatasetError: the module or the function does not exist.
        """
        if not isinstance(self.loader, str):
            return self.loader
        module, _, attribute = self.loader.partition(":")
        try:
            loader: Loader = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise DatasetError(f"dataset {self.name!r}: cannot import its loader "
                               f"{self.loader!r} ({exc})") from exc
        return loader


DATASET_REGISTRY: Registry[DatasetSpec] = Registry("dataset", group="capjudge.datasets",
                                                   check=instance_check(DatasetSpec))
"""Dataset name -> :class:`DatasetSpec`: the built-in modules, entry points, code."""



def _register_builtins() -> None:
    """Every module of ``loaders/`` is a dataset (``vatex_eval.py``: ``vatex-eval``).

    Listing the folder imports nothing, so the built-ins need no list of their own and an
    editable install sees a new module at once.
    """
    package = "capjudge.metaeval.datasets.loaders"
    for module in pkgutil.iter_modules([str(Path(__file__).with_name("loaders"))]):
        if not module.name.startswith("_"):
            DATASET_REGISTRY.add_lazy(module.name.replace("_", "-"),
                                      f"{package}.{module.name}:SPEC")


_register_builtins()


@overload
def register_dataset(name: str, loader: None = None, *, default_protocol: str | None = ...,
                     has_references: bool = ..., pairwise: bool = ..., file: str = ...,
                     description: str = ..., replace: bool = ...
                     ) -> Callable[[Loader], Loader]: ...


@overload
def register_dataset(name: str, loader: Loader | str, *, default_protocol: str | None = ...,
                     has_references: bool = ..., pairwise: bool = ..., file: str = ...,
                     description: str = ..., replace: bool = ...) -> Loader | str: ...


def register_dataset(name: str, loader: Loader | str | None = None, *,
                     default_protocol: str | None = None, has_references: bool = True,
                     pairwise: bool = False, file: str = "", description: str = "",
                     replace: bool = False) -> Callable[[Loader], Loader] | Loader | str:
    """Register a meta-evaluation dataset from code (as a decorator, or with ``loader``).

    An installed package registers through the ``capjudge.datasets`` entry-point group
    instead (see the module doc).

    Args:
        name: the ``--dataset`` name.
        loader: the loader, or ``"package.module:function"`` to import it only when the dataset
            is loaded; omit it to use this as a decorator.
        default_protocol: the protocol used when none is named (default: ``name``); register
            new protocols with :func:`capjudge.metaeval.protocols.register_protocol`.
        has_references: whether the published file carries references.
        pairwise: whether the dataset holds caption pairs rather than ratings.
        file: the published file the loader reads.
        description: one line on the dataset.
        replace: allow replacing a dataset of the same name.

    Returns:
        The decorator, or ``loader`` itself.

    Raises:
        ValueError: the name is taken (and ``replace`` is false) or the path is not
            ``module:function``.
    """
    def add(component: Loader | str) -> None:
        if isinstance(component, str) and ":" not in component:
            raise ValueError(f"a lazy loader must be 'module:function', got {component!r}")
        spec = DatasetSpec(name=name, loader=component,
                           default_protocol=default_protocol or name,
                           has_references=has_references, pairwise=pairwise, file=file,
                           description=description)
        DATASET_REGISTRY.add(name, spec, replace=replace)

    if loader is None:
        def decorator(function: Loader) -> Loader:
            add(function)
            return function

        return decorator
    add(loader)
    return loader


def unregister_dataset(name: str) -> None:
    """Forget a dataset registered in code (tests that register toys clean up with this)."""
    DATASET_REGISTRY.remove(name)


def dataset_names() -> list[str]:
    """Every registered dataset name, sorted (imports no loader): the CLI's choices."""
    return DATASET_REGISTRY.names()


def get_dataset(name: str) -> DatasetSpec:
    """The registered dataset ``name`` (its module is imported on first use).

    Raises:
        DatasetError: no such dataset (the message lists the registered ones), a name
            claimed twice, or a plugin that cannot be loaded.
    """
    try:
        return DATASET_REGISTRY.get(name)
    except KeyError as exc:
        raise DatasetError(str(exc)) from exc


class _LoaderView(Mapping[str, Loader]):
    """``LOADERS[name]``: the registry seen as a name -> loader mapping."""

    def __getitem__(self, name: str) -> Loader:
        if name not in DATASET_REGISTRY:
            raise KeyError(name)
        return get_dataset(name).get_loader()

    def __iter__(self) -> Iterator[str]:
        return iter(dataset_names())

    def __len__(self) -> int:
        return len(dataset_names())


LOADERS: Mapping[str, Loader] = _LoaderView()


def load(name: str, path: str | Path) -> MetaDataset:
    """Load a registered dataset from its file.

    Raises:
        DatasetError: unknown name, missing file, or a file not in the dataset's format (the
            message names the file and, where there is one, the entry).
    """
    spec = get_dataset(name)
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: dataset file not found")
    loader = spec.get_loader()
    try:
        data = loader(p)
    except DatasetError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        # A safety net for loaders registered from outside; the built-in ones validate.
        raise DatasetError(f"{p}: not in the {name} format ({type(exc).__name__}: {exc})"
                           ) from exc
    if not data.candidates and not data.pairs:
        expected = f" (expected {spec.file})" if spec.file else ""
        raise DatasetError(f"{p}: no {name} entries found{expected}")
    return data

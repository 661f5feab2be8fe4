"""One registry mechanism for every kind of component: methods, backends, datasets, protocols.

A :class:`Registry` maps names to components and imports a component's module only when the
component is asked for. Components come from three places:

- **built-ins**, registered by the project itself as ``"package.module:attribute"`` paths
  (:meth:`Registry.add_lazy`), so listing the names imports nothing and an editable install
  keeps working without a re-install;
- **installed packages**, through Python entry points: a distribution that declares, e.g.::

      [project.entry-points."capjudge.methods"]
      my-method = "my_package.method:MyMethod"

  adds ``my-method`` without touching this repository (groups ``capjudge.methods``,
  ``capjudge.backends``, ``capjudge.datasets`` and ``capjudge.protocols``). Entry points are
  read once, the first time a registry is listed or asked (:meth:`Registry.refresh` reads them
  again), and an entry point is loaded only when its name is asked for;
- **code**, with :meth:`Registry.add` or the decorator (``@register_method("name")``), e.g. a
  test's toy component.

Rules (the same for every kind):

- **No silent replacement.** A name is claimed once. An entry point whose name is already taken
  (by a built-in or another plugin) makes that name an error when it is asked for, naming both
  claimants; the other names keep working. Registering a taken name from code raises
  ``ValueError`` naming the holder, unless ``replace=True`` says it is meant.
- **A broken plugin fails alone.** An entry point that cannot be imported (or does not hold
  the expected kind of object) is a one-line :class:`RegistryError` naming the entry point and
  its distribution when its name is asked for; listing, and every other name, still work.

The CLI's choices come from :meth:`Registry.names`, so a registered component is usable
everywhere at once (like lm-evaluation-harness's task registry or inspect_ai's ``@modelapi``).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Check = Callable[[str, Any], "str | None"]
"""``check(name, component)``: what is wrong with a loaded component, or None."""


_REGISTRIES: weakref.WeakSet[Registry[Any]] = weakref.WeakSet()
_ENTRY_POINTS: Any = None  # every installed entry point, read once (EntryPoints/SelectableGroups)
_EP_LOCK = threading.Lock()


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The group's entry points; the installed distributions are read once for all groups."""
    global _ENTRY_POINTS
    with _EP_LOCK:
        if _ENTRY_POINTS is None:
            _ENTRY_POINTS = importlib.metadata.entry_points()
        return list(_ENTRY_POINTS.select(group=group))


def refresh_plugins() -> None:
    """Read every registry's entry points again (after installing a plugin in a running process).

    Calls :func:`importlib.invalidate_caches` first, so a distribution that appeared on
    ``sys.path`` since the last read is found.
    """
    global _ENTRY_POINTS
    importlib.invalidate_caches()
    with _EP_LOCK:
        _ENTRY_POINTS = None
    for registry in list(_REGISTRIES):
        registry.refresh(reread=False)


class RegistryError(KeyError):
    """An unknown name, a name claimed twice, or a component that cannot be loaded.

    A ``KeyError`` (what a name lookup raises), whose message prints as it is (one line).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


@dataclass
class _Entry:
    """Where one name comes from, and the component once it is loaded."""

    origin: str  # for messages and listings: "built-in a.b:C", "entry point ...", "code"
    path: str | None = None  # "module:attribute" of a built-in
    entry_point: importlib.metadata.EntryPoint | None = None
    component: Any = None
    loaded: bool = False
    overrides: bool = False  # registered with replace=True: wins over entry points


def _describe(ep: importlib.metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    where = f" of {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point '{ep.name} = {ep.value}' (group {ep.group}{where})"


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class Registry(Generic[T]):
    """A mapping from names to components, imported on first use.

    Args:
        kind: what is registered ("method", "backend kind", ...), used in messages.
        group: the entry-point group installed packages register under (None: none read).
        check: ``check(name, component)`` returns what is wrong with a component loaded from
            a path or an entry point (e.g. not a subclass of the expected base), or None.
    """

    def __init__(self, kind: str, group: str | None = None, check: Check | None = None) -> None:
        self.kind = kind
        self.group = group
        self._check = check
        self._own: dict[str, _Entry] = {}  # built-ins and components registered in code
        self._plugins: dict[str, list[_Entry]] = {}  # entry points, every claimant of a name
        self._scanned = group is None
        self._lock = threading.RLock()
        _REGISTRIES.add(self)

    # -- registering ------------------------------------------------------------------------

    def _claim(self, name: str, entry: _Entry, replace: bool) -> None:
        """Add ``entry`` under ``name`` (lock held); a taken name needs ``replace``.

        A built-in (a path) does not read the entry points: the project registers its own at
        import time, and a plugin claiming the same name is caught when the name is asked for.
        """
        if entry.path is None:
            self._scan()
        claimants = ([self._own[name]] if name in self._own else []) + \
            self._plugins.get(name, [])
        if claimants and not replace:
            holder = " and ".join(e.origin for e in claimants)
            raise ValueError(f"{self.kind} {name!r} is already registered ({holder}); pass "
                             "replace=True to replace it on purpose")
        entry.overrides = replace
        self._own[name] = entry

    def add_lazy(self, name: str, path: str, *, replace: bool = False) -> None:
        """Register ``name`` as ``"package.module:attribute"``, imported on first :meth:`get`.

        Raises:
            ValueError: the path is not ``module:attribute``, or the name is taken.
        """
        if ":" not in path:
            raise ValueError(f"lazy {self.kind} path must be 'module:attribute', got {path!r}")
        with self._lock:
            self._claim(name, _Entry(origin=f"built-in {path}", path=path), replace)

    def add(self, name: str, component: T, *, replace: bool = False) -> T:
        """Register an already imported component; returns it.

        Raises:
            ValueError: the name is taken and ``replace`` is false.
        """
        with self._lock:
            self._claim(name, _Entry(origin=f"registered in code ({_qualname(component)})",
                                     component=component, loaded=True), replace)
        return component

    def decorator(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """``@registry.decorator("name")``: register the decorated class or function."""
        def register(component: T) -> T:
            return self.add(name, component, replace=replace)

        return register

    def remove(self, name: str) -> None:
        """Forget a component registered by the project or in code (tests clean up with this)."""
        with self._lock:
            self._own.pop(name, None)

    # -- entry points -----------------------------------------------------------------------

    def refresh(self, reread: bool = True) -> None:
        """Read the entry points again (after a package was installed or put on the path).

        Components registered by the project or from code are kept; entry-point ones are
        read afresh (and loaded again when asked for).

        Args:
            reread: read the installed distributions again (False: :func:`refresh_plugins`
                has just dropped what was read, for every registry at once).
        """
        if reread:
            global _ENTRY_POINTS
            importlib.invalidate_caches()
            with _EP_LOCK:
                _ENTRY_POINTS = None
        with self._lock:
            self._plugins.clear()
            self._scanned = self.group is None
            self._scan()

    def _scan(self) -> None:
        """Read this group's entry points once (lock held)."""
        if self._scanned:
            return
        self._scanned = True
        assert self.group is not None
        for ep in _entry_points(self.group):
            claimants = self._plugins.setdefault(ep.name, [])
            # The same distribution found twice on the path (an editable install and a copy).
            if not any(c.entry_point is not None and c.entry_point.value == ep.value
                       for c in claimants):
                claimants.append(_Entry(origin=_describe(ep), entry_point=ep))

    def _claimants(self, name: str) -> list[_Entry]:
        """Every entry that claims ``name`` (lock held, scanned); one unless there is a clash."""
        own = self._own.get(name)
        if own is not None and own.overrides:
            return [own]
        return ([own] if own is not None else []) + self._plugins.get(name, [])

    # -- asking -----------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every registered name, sorted (nothing is imported).

        A name claimed twice is listed too: asking for it says who claims it.
        """
        with self._lock:
            self._scan()
            return sorted({*self._own, *self._plugins})

    def __contains__(self, name: object) -> bool:
        with self._lock:
            self._scan()
            return name in self._own or name in self._plugins

    def origin(self, name: str) -> str:
        """Where ``name`` comes from (built-in path, entry point and distribution, or code).

        Raises:
            RegistryError: no such name.
        """
        with self._lock:
            self._scan()
            claimants = self._claimants(name)
            if not claimants:
                raise RegistryError(self._unknown(name))
            return " and ".join(e.origin for e in claimants)

    def is_builtin(self, name: str) -> bool:
        """Whether ``name`` is one of the project's own components (listed in its code)."""
        with self._lock:
            self._scan()
            claimants = self._claimants(name)
            return len(claimants) == 1 and claimants[0].path is not None

    def _unknown(self, name: str) -> str:
        return f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}"

    def get(self, name: str) -> T:
        """The component registered as ``name`` (imported on first use).

        Raises:
            RegistryError: no such name (the message lists the registered ones), a name
                claimed by two components (the message names both), or a component that
                cannot be loaded (the message names its entry point or path).
        """
        with self._lock:
            self._scan()
            claimants = self._claimants(name)
            if not claimants:
                raise RegistryError(self._unknown(name))
            if len(claimants) > 1:
                raise RegistryError(
                    f"{self.kind} {name!r} is claimed by "
                    f"{' and by '.join(e.origin for e in claimants)}: a plugin may not replace "
                    "a built-in or another plugin; uninstall one of them or rename its entry "
                    "point")
            entry = claimants[0]
            if entry.loaded:
                component: T = entry.component
                return component
        component = self._load(name, entry)
        with self._lock:
            if not entry.loaded:
                entry.component, entry.loaded = component, True
            loaded: T = entry.component
            return loaded

    def _load(self, name: str, entry: _Entry) -> T:
        """Import a built-in's path or load an entry point; every failure is one line."""
        try:
            if entry.entry_point is not None:
                component = entry.entry_point.load()
            else:
                assert entry.path is not None
                module, _, attribute = entry.path.partition(":")
                component = getattr(importlib.import_module(module), attribute)
        except Exception as exc:  # a plugin can fail in any way; it must fail alone
            raise RegistryError(f"{self.kind} {name!r}: cannot load its {entry.origin}: "
                                f"{_one_line(exc)}") from exc
        problem = self._check(name, component) if self._check else None
        if problem:
            raise RegistryError(f"{self.kind} {name!r}: its {entry.origin} {problem}")
        loaded: T = component
        return loaded


def _qualname(component: object) -> str:
    module = getattr(component, "__module__", None) or type(component).__module__
    name = getattr(component, "__qualname__", None) or type(component).__qualname__
    return f"{module}:{name}"


def subclass_check(base: type) -> Check:
    """A ``check`` that wants a subclass of ``base`` (a method or backend class)."""
    def check(name: str, component: Any) -> str | None:
        if isinstance(component, type) and issubclass(component, base):
            return None
        return f"is not a {base.__name__} subclass (got {_qualname(component)})"

    return check


def instance_check(cls: type) -> Check:
    """A ``check`` that wants a ``cls`` declaring the name it is registered under (a spec)."""
    def check(name: str, component: Any) -> str | None:
        if not isinstance(component, cls):
            return f"is not a {cls.__name__} (got {type(component).__name__})"
        declared = getattr(component, "name", name)
        if declared != name:
            return f"declares the name {declared!r}"
        return None
    return check

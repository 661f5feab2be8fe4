"""Name -> component registries with lazy imports (methods, backends, meta-eval datasets).

Built-in components are registered by dotted path (``"capjudge.methods.gveval:GVEval"``), so
listing the names imports nothing heavy; a component is imported the first time it is asked
for. Code outside the package (a plugin, a test) registers its own component with the
decorator, e.g.::

    @register_method("my-method")
    class MyMethod(Method): ...

The CLI's choices come from :meth:`Registry.names`, so a registered component is usable
everywhere at once (like lm-evaluation-harness's task registry or inspect_ai's ``@modelapi``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """A mapping from names to components, imported on first use.

    Args:
        kind: what is registered ("method", "backend", ...), used in error messages.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._paths: dict[str, str] = {}
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()

    def add_lazy(self, name: str, path: str) -> None:
        """Register ``name`` as ``"package.module:attribute"``, imported on first :meth:`get`."""
        if ":" not in path:
            raise ValueError(f"lazy {self.kind} path must be 'module:attribute', got {path!r}")
        with self._lock:
            self._paths[name] = path
            self._loaded.pop(name, None)

    def add(self, name: str, component: T) -> T:
        """Register an already imported component (replaces an earlier one of that name)."""
        with self._lock:
            self._loaded[name] = component
            self._paths.pop(name, None)
        return component

    def decorator(self, name: str) -> Callable[[T], T]:
        """``@registry.decorator("name")``: register the decorated class or function."""
        def register(component: T) -> T:
            return self.add(name, component)

        return register

    def remove(self, name: str) -> None:
        """Forget a component (tests that register toys clean up with this)."""
        with self._lock:
            self._paths.pop(name, None)
            self._loaded.pop(name, None)

    def names(self) -> list[str]:
        """Every registered name, sorted (nothing is imported)."""
        return sorted({*self._paths, *self._loaded})

    def __contains__(self, name: object) -> bool:
        return name in self._paths or name in self._loaded

    def get(self, name: str) -> T:
        """The component registered as ``name``.

        Raises:
            KeyError: no such name; the message lists the registered ones.
        """
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            path = self._paths.get(name)
        if path is None:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        module, _, attribute = path.partition(":")
        component: T = getattr(importlib.import_module(module), attribute)
        with self._lock:
            self._loaded.setdefault(name, component)
            return self._loaded[name]

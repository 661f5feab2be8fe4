"""Structure rules the design depends on, checked on the source itself.

- No code outside ``capjudge/methods`` (and its prompts) names a method: validate, compare,
  report, aggregate, the CLI and the context stage ask the method for its metadata.
- No module imports another module's private names.
- The library never imports Prefect or DVC (orchestration stays in flows/ and tasks/).
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

from capjudge.methods import method_names

SOURCES = [p for d in ("src/capjudge", "flows", "tasks") for p in (ROOT / d).rglob("*.py")]


def _outside_methods() -> list[Path]:
    methods = ROOT / "src/capjudge/methods"
    return [p for p in SOURCES if methods not in p.parents]


def test_no_method_is_named_outside_its_own_module() -> None:
    names = "|".join(re.escape(n) for n in method_names())
    quoted = re.compile(rf"""['"]({names})['"]""")
    found = []
    for path in _outside_methods():
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            stripped = line.split("#", 1)[0]
            if quoted.search(stripped) and "DEFAULT_METHOD =" not in stripped:
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    # The one allowed mention is the CLI's default, declared next to the registry.
    assert found == [], "\n".join(found)


def test_no_private_cross_module_imports() -> None:
    private = re.compile(r"from (capjudge[\w.]*|flows[\w.]*|tasks[\w.]*) import .*\b_[a-z]\w*")
    found = [f"{p.relative_to(ROOT)}: {line.strip()}" for p in SOURCES
             for line in p.read_text().splitlines() if private.search(line)]
    assert found == [], "\n".join(found)


def test_the_library_does_not_import_orchestration() -> None:
    rx = re.compile(r"^\s*(import|from)\s+(prefect|dvc)\b")
    found = [f"{p.relative_to(ROOT)}: {line.strip()}"
             for p in (ROOT / "src/capjudge").rglob("*.py")
             for line in p.read_text().splitlines() if rx.match(line)]
    assert found == [], "\n".join(found)

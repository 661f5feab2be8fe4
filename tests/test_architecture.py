"""Structure rules the design depends on, checked on the source itself.

- No code outside ``capjudge/methods`` (and its prompts) names a method: validate, compare,
  report, aggregate, the CLI and the context stage ask the method for its metadata.
- No module imports another module's private names.
- The library never imports Prefect or DVC (orchestration stays in flows/ and tasks/).
- The import graph of src/capjudge has no cycle and no arrow up the declared layers.
- No function in src/capjudge is longer than 80 lines.
"""

from __future__ import annotations

import ast
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


# -- the import graph ------------------------------------------------------------------------
#
# Every module of src/capjudge with the capjudge modules it imports, read from the source with
# ast. Imports inside functions count like top-level ones: a lazy import defers the cost of a
# dependency (torch, a backend's SDK, the report's plotting), not the dependency itself, so it
# must respect the layers too and may not close a cycle (a function-level import that exists
# only to dodge a cycle is what this test is for). ``if TYPE_CHECKING:`` imports would count
# the same way (an annotation is a dependency of the design); there are none today.
# ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``.
# The implicit import of a parent package's ``__init__`` is not an edge: packages import their
# own submodules, and those edges would make every package a cycle by construction.

PACKAGE = ROOT / "src" / "capjudge"


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


def import_graph() -> dict[str, set[str]]:
    """Module -> the capjudge modules it imports (anywhere in its body)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in modules.items():
        here = module if is_package else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                         for a in node.names]
            else:
                continue
            for name in names:
                target = resolve(name) if name.startswith("capjudge") else None
                if target and target != module:
                    targets.add(target)
        graph[module] = targets
    return graph


# The layers, lowest first; a module may import its own layer and the ones below, never one
# above. Why this order:
# - base: what knows nothing of judging (files, credentials, the registry mechanism, maths,
#   statistics, manifests and items, media, the rate limiters).
# - protocol: the request/response types (capjudge.protocol) and what reads only them: the
#   request cache, the token cost estimate, the media checks of a request.
# - prompts: templates render messages (protocol types), nothing else.
# - backends: answer requests; they may use the cost estimate and media checks below them.
# - client: retries, caching and rate limits around a backend (and the Batch API client,
#   which is a JudgeClient).
# - methods: build requests and read responses; VisCE2's context stage runs a client.
# - stages: the pipeline's library stages (judge, aggregate, validate, compare, ingest,
#   meta-eval, lineage, watch) use methods, clients and backends.
# - report: reads what the stages wrote.
# - entry: what drives everything: the CLI, the params schema (it checks ids against every
#   registry and section against every stage's config), the starter params file it checks
#   (capjudge init) and the test servers/helpers.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("capjudge", "capjudge.util", "capjudge.registry", "capjudge.scoring",
              "capjudge.stats", "capjudge.reliability", "capjudge.manifest", "capjudge.sample",
              "capjudge.item", "capjudge.media", "capjudge.records", "capjudge.stage_files")),
    ("protocol", ("capjudge.protocol", "capjudge.cache", "capjudge.cost", "capjudge.reading",
                  "capjudge.media_check")),
    ("prompts", ("capjudge.prompts",)),
    ("backends", ("capjudge.backends",)),
    ("client", ("capjudge.client",)),
    ("methods", ("capjudge.methods",)),
    ("stages", ("capjudge.judge", "capjudge.aggregate", "capjudge.validate", "capjudge.compare",
                "capjudge.ingest", "capjudge.metaeval", "capjudge.history", "capjudge.lineage",
                "capjudge.watch", "capjudge.verify")),
    ("report", ("capjudge.report",)),
    ("entry", ("capjudge.cli", "capjudge.params", "capjudge.testing", "capjudge.starter")),
]


def layer_of(module: str) -> int:
    """The index of the layer whose longest prefix names ``module``."""
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


def test_every_module_has_a_layer() -> None:
    unplaced = sorted(m for m in import_graph() if layer_of(m) < 0)
    assert unplaced == [], f"add these modules to LAYERS: {unplaced}"


def test_no_import_points_up_a_layer() -> None:
    found = []
    for module, targets in sorted(import_graph().items()):
        for target in sorted(targets):
            if layer_of(target) > layer_of(module):
                found.append(f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                             f"({LAYERS[layer_of(target)][0]})")
    assert found == [], "\n".join(found)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle_and_accepts_a_dag() -> None:
    # The check above passes on an empty result; this shows it can fail.
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_relative_and_function_level_imports(tmp_path: Path) -> None:
    graph = import_graph()
    # A function-level import (cli.judge imports the judge stage inside its command).
    assert "capjudge.judge" in graph["capjudge.cli.judge"]
    # ``from capjudge.reading.masking import ...`` names the submodule; cap3d, whose counts
    # are read in the seam, imports nothing of the reader.
    assert "capjudge.reading.masking" in graph["capjudge.reading.points"]
    assert not any(m.startswith("capjudge.reading") for m in graph["capjudge.methods.cap3d"])
    # The protocol types sit below prompts and methods.
    assert "capjudge.protocol" in graph["capjudge.prompts"]
    assert "capjudge.backends.base" not in graph["capjudge.prompts"]
    # The order the layering check enforces, on the modules #23 named.
    assert (layer_of("capjudge.protocol") < layer_of("capjudge.prompts")
            < layer_of("capjudge.backends.base") < layer_of("capjudge.client")
            < layer_of("capjudge.methods.gveval") < layer_of("capjudge.judge")
            < layer_of("capjudge.report.run") < layer_of("capjudge.cli.judge"))


def test_backends_read_answers_through_the_reading_seam_only() -> None:
    # Issue 40: a backend sends requests and hands what the judge sent to capjudge.reading; it
    # runs no reading step of its own, so it imports the package's names, never its modules.
    graph = import_graph()
    found = sorted(f"{module} imports {target}" for module, targets in graph.items()
                   if module.startswith("capjudge.backends")
                   for target in targets if target.startswith("capjudge.reading."))
    assert found == []
    assert "capjudge.reading" in graph["capjudge.backends.openai_backend"]
    assert "capjudge.reading" in graph["capjudge.backends.hf_digits"]


# The entry point's names: one function (read), what it takes and gives, the options' values.
READING_ENTRY = {"read", "Answer", "Reading", "Teacher", "ResponseBase", "TokenLogprob",
                 "READING_RULES_VERSION", "CONFIRM_MODES", "FOLLOW_UP_MIN_P"}


def test_outside_the_reader_only_the_reading_entry_point_is_imported() -> None:
    # Issue 40's done-when: no backend (nor client, method or stage) imports a reading step;
    # ``capjudge.reading.read`` is the one entry point. Names imported from the package,
    # anywhere in src/capjudge outside capjudge.reading:
    used: dict[str, set[str]] = {}
    for path in sorted((ROOT / "src" / "capjudge").rglob("*.py")):
        if "reading" in path.relative_to(ROOT / "src" / "capjudge").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "capjudge.reading"):
                for alias in node.names:
                    used.setdefault(f"{node.module}.{alias.name}", set()).add(path.name)
    outside = {name: sorted(files) for name, files in used.items()
               if name.rpartition(".")[0] != "capjudge.reading"
               or name.rpartition(".")[2] not in READING_ENTRY}
    assert outside == {}
    calls = {name for name in used if name.endswith(".read")}
    assert calls == {"capjudge.reading.read"}
    assert {"openai_backend.py", "hf_digits.py"} <= used["capjudge.reading.read"]


# -- function length -------------------------------------------------------------------------

MAX_FUNCTION_LINES = 80


def test_no_function_in_the_library_is_longer_than_80_lines() -> None:
    # A function longer than a screen hides its steps; split it into named helpers. The length
    # counts from the ``def`` line to the last line of the body (docstring included).
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {length}")
    assert found == [], "\n".join(found)

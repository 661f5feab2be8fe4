"""Run lineage: what produced a report, and a local registry of runs to compare.

A run records its id, time, git revision (and whether the tree was dirty), the sha256 of
``dvc.lock``, of ``params.yaml`` and of the dataset (``items.parquet``), each judge's backend id,
model snapshot, the models and fingerprints its answers reported, its template versions, and the
versions of the packages that matter. The report stage stores it in the report's DuckDB database
(tables ``runs`` and ``run_backends``), in ``reports/lineage.json`` and in the report, and files
a copy of the report's database in the registry (``.capjudge-runs/<run id>/``) so
``capjudge compare`` can put any two runs side by side.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TypedDict

import pyarrow.parquet as pq

from capjudge.records import BackendLineage, RunLineage
from capjudge.stage_files import items_file, judgements_file, summary_file
from capjudge.util.credentials import redact_value

PACKAGES = ("capjudge", "torch", "transformers", "openai", "prefect", "dvc", "duckdb",
            "great-expectations", "pyarrow", "pillow", "av", "pycocoevalcap")


def _sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


class GitState(TypedDict):
    """HEAD's commit and whether tracked files differ from it."""

    git_revision: str | None
    git_dirty: bool | None


def git_revision(root: Path = Path(".")) -> GitState:
    """HEAD's commit and whether tracked files differ from it (None outside a repository)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                    cwd=root, capture_output=True, text=True, check=True,
                                    timeout=10).stdout.strip())
        return {"git_revision": rev, "git_dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"git_revision": None, "git_dirty": None}


def package_versions() -> dict[str, str | None]:
    """The installed version of each package in :data:`PACKAGES` (None when not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def backend_lineage(judge_dirs: list[Path]) -> list[BackendLineage]:
    """Per judge: backend id, snapshot, and the models/fingerprints its answers reported."""
    rows: list[BackendLineage] = []
    for d in judge_dirs:
        # redact_value: a summary written before base URLs were checked may hold user-info;
        # none of it reaches lineage.json, the report database or the registry.
        summary = redact_value(json.loads(summary_file(d).read_text()))
        path = judgements_file(d)
        columns = ["model", "system_fingerprint", "template", "status"]
        # ``settings`` (a method's named options) is absent from runs written before it.
        has_settings = "settings" in pq.read_schema(path).names
        table = pq.read_table(path, columns=columns + (["settings"] if has_settings else []))
        data = table.to_pylist()
        answered = [r for r in data if r["status"] != "skipped"]
        rows.append({
            "judge": d.name, "method": summary.get("method"),
            "backend": summary.get("backend", {}).get("backend"),
            "snapshot": summary.get("backend", {}).get("snapshot"),
            "backend_facts": json.dumps(summary.get("backend", {}), sort_keys=True),
            "models": sorted({r["model"] for r in answered if r["model"]}),
            "fingerprints": sorted({r["system_fingerprint"] for r in answered
                                    if r["system_fingerprint"]}),
            "templates": sorted({r["template"] for r in data if r["template"]}),
            "settings": sorted({r["settings"] for r in data if r.get("settings")}),
            "judgements": len(answered),
            # Summaries written before pinning was asked say nothing: taken as pinned.
            "pinned": bool(summary.get("backend", {}).get("pinned", True)),
            "pinning": summary.get("backend", {}).get("pinning"),
            "judgements_sha256": judgements_sha256(path),
        })
    return rows


READ_COLUMNS = ("item_id", "mode", "criterion", "repeat", "status", "score", "printed",
                "probs", "reasoning")


def judgements_sha256(path: Path) -> str:
    """A hash of what a user reads of each judgement row (see ``BackendLineage``).

    Rows are sorted by (item, mode, criterion, repeat); floats are taken by their exact bits
    (``float.hex``), so equal hashes mean bit-identical judgements.
    """
    names = pq.read_schema(path).names
    table = pq.read_table(path, columns=[c for c in READ_COLUMNS if c in names])

    def exact(value: object) -> object:
        if isinstance(value, float):
            return value.hex()
        if isinstance(value, list):
            return [exact(v) for v in value]
        return value

    rows = [[exact(r.get(c)) for c in READ_COLUMNS] for r in table.to_pylist()]
    rows.sort(key=lambda r: json.dumps(r[:4], default=str))
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, default=str, ensure_ascii=False).encode())
    return digest.hexdigest()


def committed_lineage(root: Path = Path("."), path: str = "reports/lineage.json"
                      ) -> RunLineage | None:
    """The lineage committed in git (HEAD's ``reports/lineage.json``), or None."""
    try:
        text = subprocess.run(["git", "show", f"HEAD:{path}"], cwd=root, capture_output=True,
                              text=True, check=True, timeout=10).stdout
        committed: RunLineage = json.loads(text)
        return committed
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def mark_reproduced(backends: list[BackendLineage], committed: RunLineage | None) -> None:
    """Set each judge's ``reproduced``: its judgements against the committed run's."""
    previous: list[BackendLineage] = committed["backends"] if committed else []
    before = {b["judge"]: b.get("judgements_sha256") for b in previous}
    for b in backends:
        old = before.get(b["judge"])
        b["reproduced"] = None if old is None else old == b.get("judgements_sha256")


def collect(params_path: Path, ingest_dir: Path, judge_dirs: list[Path],
            root: Path = Path(".")) -> RunLineage:
    """Everything needed to say what produced a report."""
    git = git_revision(root)
    return {
        "run_id": datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:8],
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_revision": git["git_revision"], "git_dirty": git["git_dirty"],
        "dvc_lock_sha256": _sha256(root / "dvc.lock"),
        "params_sha256": _sha256(params_path),
        "dataset_sha256": _sha256(items_file(ingest_dir)),
        "packages": package_versions(),
        "backends": _backends_against_committed(judge_dirs, root),
    }


def _backends_against_committed(judge_dirs: list[Path], root: Path) -> list[BackendLineage]:
    backends = backend_lineage(judge_dirs)
    mark_reproduced(backends, committed_lineage(root))
    return backends


def register(run: RunLineage, report_dir: Path, registry: Path) -> Path:
    """Copy the run's database and lineage into the registry; returns the run's folder."""
    target = registry / str(run["run_id"])  # a run id is a string (see collect)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(report_dir / "capjudge.duckdb", target / "capjudge.duckdb")
    (target / "lineage.json").write_text(json.dumps(run, indent=2, sort_keys=True) + "\n")
    return target


def list_runs(registry: Path) -> list[RunLineage]:
    """Registered runs, oldest first."""
    runs: list[RunLineage] = []
    for p in sorted(registry.glob("*/lineage.json")):
        runs.append(json.loads(p.read_text()))
    return sorted(runs, key=lambda r: r["time"])


def resolve_run(ref: str, registry: Path) -> Path:
    """A run's DuckDB database from a run id, a report folder, or a database path.

    A run id may also be a unique prefix, or 'latest' or 'previous'.

    Raises:
        FileNotFoundError: nothing matches, or the prefix is ambiguous.
    """
    p = Path(ref)
    if p.is_file():
        return p
    if p.is_dir() and (p / "capjudge.duckdb").is_file():
        return p / "capjudge.duckdb"
    runs = list_runs(registry)
    if ref in ("latest", "previous") and len(runs) >= (1 if ref == "latest" else 2):
        return registry / str(runs[-1 if ref == "latest" else -2]["run_id"]) / "capjudge.duckdb"
    matches = [str(r["run_id"]) for r in runs if r["run_id"].startswith(ref)]
    if len(matches) == 1:
        return registry / matches[0] / "capjudge.duckdb"
    raise FileNotFoundError(f"no single run matches {ref!r} in {registry} "
                            f"({len(matches)} matches; {len(runs)} runs registered)")

"""A starter ``params.yaml`` for evaluating your own data (what ``capjudge init`` writes).

The pipeline's stages run ``python -m flows.<stage>`` from a checkout of this repository: the
``flows`` and ``tasks`` packages and ``dvc.yaml`` are not part of the installed ``capjudge``
package. So a new evaluation is a checkout (a clone, or ``git worktree add``) whose
``params.yaml`` points at your manifest, media and judges; this module writes that file.

The starter keeps every section ``dvc.yaml`` reads (``sample`` too: its stage stays in the
graph, cheap and unused by your data), sets ``contexts`` and ``context_judges`` empty and
defines one judge, ``mine``. Mappings are written block style: ``dvc exp run -S`` rewrites a
flow-style mapping holding a URL into something else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from capjudge.backends import DEFAULT_BACKEND
from capjudge.manifest import ManifestError, read_rows
from capjudge.methods import DEFAULT_METHOD

CHECKOUT_MARKERS = ("dvc.yaml", "flows/__init__.py", "tasks/__init__.py")
"""Files that make a folder a capjudge checkout the pipeline can run in."""


@dataclass(frozen=True)
class Starter:
    """What the starter params point at."""

    manifest: str = "my-data/manifest.jsonl"
    media_root: str = "my-data"
    method: str = DEFAULT_METHOD
    backend: str = DEFAULT_BACKEND
    base_url: str | None = None
    human_criterion: str = "overall"
    label_keys: tuple[str, ...] = ()
    """The manifest's label names, listed in a comment beside ``human_criterion``."""


def missing_markers(folder: Path) -> list[str]:
    """The checkout files ``folder`` lacks (empty: the pipeline can run there)."""
    return [m for m in CHECKOUT_MARKERS if not (folder / m).is_file()]


def manifest_label_keys(manifest: Path, max_rows: int = 100_000) -> list[str]:
    """The label names of a manifest's rows (the first ``max_rows``), sorted.

    Raises:
        ManifestError: the manifest cannot be read at all.
    """
    keys: set[str] = set()
    for n, raw in enumerate(read_rows(manifest)):
        if n >= max_rows:
            break
        labels = raw.data.get("labels") if raw.data else None
        if isinstance(labels, str):  # CSV: a JSON cell
            try:
                labels = json.loads(labels)
            except ValueError:
                continue
        if isinstance(labels, dict):
            keys.update(str(k) for k in labels)
    return sorted(keys)


def pick_criterion(keys: Sequence[str]) -> str:
    """The human criterion a starter compares with: ``overall`` if labelled, else the first."""
    return "overall" if "overall" in keys or not keys else sorted(keys)[0]


def project_path(path: Path, root: Path) -> str:
    """``path`` as params.yaml should name it: relative to ``root`` when inside it."""
    resolved = path.expanduser().resolve()
    try:
        return resolved.relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(resolved)


def _q(value: str) -> str:
    """A YAML scalar that stays a string whatever it holds (JSON strings are YAML)."""
    return json.dumps(value)


def _judge_block(s: Starter) -> str:
    """The ``judges`` section: the judge ``mine``, and an example server judge if none given."""
    lines = ["judges:", "  mine:", f"    method: {s.method}", f"    backend: {_q(s.backend)}"]
    # The embedded judge is a small base model that rarely writes its verdict: it is read at
    # the method's forced anchor, one channel alone, so only where asked (force_anchor).
    base_model = s.backend.rsplit("/", 1)[-1] == "gemma-3-270m" and (
        s.backend.startswith("llamacpp/") or bool(s.base_url))
    anchor = ("      force_anchor: true   # the base model never writes its verdict: read it "
              "at the method's anchor" if base_model else
              "      # force_anchor: true   # read a verdict the model never writes at the "
              "method's anchor")
    if s.base_url:
        lines += ["    backend_options:", f"      base_url: {_q(s.base_url)}", anchor]
    elif base_model:
        lines += ["    backend_options:", anchor]
    else:
        lines += ["  # A judge on your own OpenAI-compatible server (vLLM, SGLang, Ollama,",
                  "  # capjudge serve): the served model's name after openai/.",
                  "  # my-server:",
                  f"  #   method: {s.method}",
                  "  #   backend: openai/my-served-model",
                  "  #   backend_options:",
                  "  #     base_url: \"http://127.0.0.1:8000/v1\""]
    return "\n".join(lines) + "\n"


def starter_params(s: Starter) -> str:
    """The starter ``params.yaml`` text (it passes :func:`capjudge.params.load_params`)."""
    found = (f"  # label keys in the manifest: {', '.join(s.label_keys)}" if s.label_keys
             else "  # the label (manifest `labels` key) the judges are compared with")
    return f"""\
# Evaluating your own data (docs/guides/your-data.md); written by `capjudge init`.
# Run `dvc repro` here (again after editing the manifest: ingest depends on it).
sample:                 # the bundled sample's stage stays in dvc.yaml; unused by your data
  out: data/sample
  seed: 0
  images: 20

ingest:
  manifest: {_q(s.manifest)}
  media_root: {_q(s.media_root)}
  out: data/ingest
  frame_policy: first_middle_last
  uniform_frames: 3
  decode_timeout_s: 60
  max_candidate_chars: 20000

runner:
  kind: threads
  workers: 1

judge:                  # shared by every judge; each may override a key
  min_mass: 0.5
  max_attempts: 5
  repeats: 1
  cache_dir: .capjudge-cache

contexts: {{}}            # VisCE2 context extractors (docs/guides/configuring-judges.md)

{_judge_block(s)}
context_judges: {{}}

aggregate:
  gamma: 0.75
  include_low_mass: true

validate:
  min_mass: 0.5
  max_failure_rate: 0.2

report:
  human_criterion: {_q(s.human_criterion)}
{found}
  bootstrap: 500
  title: {_q(f"capjudge report: {s.manifest}")}
"""


__all__ = ["CHECKOUT_MARKERS", "ManifestError", "Starter", "manifest_label_keys",
           "missing_markers", "pick_criterion", "project_path", "starter_params"]

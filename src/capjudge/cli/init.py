"""``capjudge init DIR``: a starter ``params.yaml`` for your own data in a capjudge checkout.

The pipeline runs ``python -m flows.<stage>`` from a checkout of the repository (``flows``,
``tasks`` and ``dvc.yaml`` are not in the installed package), so DIR must be one: a clone, or a
second working tree of one (``git worktree add ../my-eval``). See :mod:`capjudge.starter`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from capjudge.cli.common import EXIT_OK, UsageError


def _starter(args: argparse.Namespace, root: Path) -> Any:
    """The :class:`~capjudge.starter.Starter` the flags describe (paths checked)."""
    from capjudge.starter import (
        ManifestError,
        Starter,
        manifest_label_keys,
        pick_criterion,
        project_path,
    )

    fields: dict[str, Any] = {"method": args.method, "backend": args.backend,
                              "base_url": args.base_url}
    keys: list[str] = []
    if args.manifest is not None:
        if not args.manifest.is_file():
            raise UsageError(f"--manifest {args.manifest}: no such file")
        try:
            keys = manifest_label_keys(args.manifest)
        except ManifestError as exc:
            raise UsageError(f"--manifest {exc}") from None
        fields["manifest"] = project_path(args.manifest, root)
    if args.media_root is not None:
        if not args.media_root.is_dir():
            raise UsageError(f"--media-root {args.media_root}: not a folder")
        media = args.media_root.resolve()
        outputs = [root.resolve() / "data", root.resolve() / "reports"]
        if any(out == media or out.is_relative_to(media) for out in outputs):
            # dvc.yaml's ingest stage depends on the media root: DVC refuses a dependency
            # that holds the pipeline's own outputs.
            raise UsageError(f"--media-root {args.media_root}: holds the pipeline's outputs "
                             "(data/, reports/); put your media in a folder of its own, e.g. "
                             "my-data/media")
        fields["media_root"] = project_path(args.media_root, root)
    fields["label_keys"] = tuple(keys)
    fields["human_criterion"] = args.human_criterion or pick_criterion(keys)
    return Starter(**fields)


def run(args: argparse.Namespace) -> int:
    """Write DIR/params.yaml (refused over an existing file without --force)."""
    from capjudge.params import load_params
    from capjudge.starter import missing_markers, starter_params

    root: Path = args.dir
    missing = missing_markers(root)
    if missing:
        raise UsageError(
            f"{root} is not a capjudge checkout (no {', '.join(missing)}): the pipeline runs "
            "`python -m flows.<stage>` from one, and the installed package does not include "
            "them; clone the repository (or `git worktree add DIR` in a clone) and run "
            "`capjudge init DIR` there")
    if args.base_url and not args.backend.startswith("openai/"):
        raise UsageError(f"--base-url is for an openai/<served-name> backend, not "
                         f"{args.backend!r}")
    target = root / "params.yaml"
    if target.exists() and not args.force:
        raise UsageError(f"{target} exists (in a fresh clone: the bundled sample's); --force "
                         "replaces it (`git checkout params.yaml` brings the sample's back)")
    starter = _starter(args, root)
    text = starter_params(starter)
    # Checked as every stage will read it (a backend id that is not registered, credentials
    # in --base-url) before anything is replaced.
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "params.yaml").write_text(text, encoding="utf-8")
        try:
            load_params(Path(tmp) / "params.yaml")
        except ValueError as exc:
            raise UsageError(str(exc).replace(f"{tmp}/", "")) from None
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}: manifest {starter.manifest}, media root {starter.media_root}, "
          f"judge 'mine' ({starter.method} on {starter.backend}), human criterion "
          f"'{starter.human_criterion}'", file=sys.stderr)
    print(f"next: cd {root} && dvc repro   (guide: docs/guides/your-data.md)", file=sys.stderr)
    return EXIT_OK


def register(sub: Any) -> None:
    """Add the subcommand."""
    from capjudge.backends import DEFAULT_BACKEND
    from capjudge.methods import DEFAULT_METHOD, method_names

    p = sub.add_parser("init", help="write a starter params.yaml for your own data into a "
                       "capjudge checkout")
    p.add_argument("dir", type=Path, metavar="DIR", help="a checkout of the capjudge "
                   "repository (a clone or a git worktree of one)")
    p.add_argument("--manifest", type=Path, help="your manifest (JSONL, CSV or Parquet); its "
                   "label keys pick the human criterion (default my-data/manifest.jsonl)")
    p.add_argument("--media-root", type=Path, help="the folder its media paths resolve under "
                   "(default my-data)")
    p.add_argument("--human-criterion", help="the label the judges are compared with "
                   "(default: 'overall' if the manifest has it, else its first label key)")
    p.add_argument("--method", default=DEFAULT_METHOD, choices=method_names(),
                   help="the judge's method")
    p.add_argument("--backend", default=DEFAULT_BACKEND, help="the judge's backend, e.g. "
                   "openai/<served-name> for your own OpenAI-compatible server")
    p.add_argument("--base-url", help="that server's URL, e.g. http://127.0.0.1:8000/v1 "
                   "(written as backend_options.base_url)")
    p.add_argument("--force", action="store_true", help="replace an existing params.yaml")
    p.set_defaults(func=run)

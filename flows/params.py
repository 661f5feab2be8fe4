"""Reading ``params.yaml`` sections for the flows (DVC passes no arguments beyond the file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from capjudge.credentials import refuse_credentials


def load_params(path: str | Path = "params.yaml") -> dict[str, Any]:
    """Load the whole params file (a missing file is an error naming the path).

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a mapping, or a URL in it carries credentials
            (:class:`~capjudge.credentials.CredentialsInURLError`).
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: params file not found (run from the project root)")
    data = yaml.safe_load(p.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: expected a mapping at the top level")
    # DVC records params in dvc.lock and the flows pass sections on as Prefect parameters: a
    # URL with user-info in here would be persisted, so no flow starts with one.
    refuse_credentials(data, "")
    return data

"""Where local models and what is remembered about them live on this machine."""

from __future__ import annotations

import os
from pathlib import Path


def models_dir() -> Path:
    """``$CAPJUDGE_MODELS_DIR``, else ``~/.cache/capjudge/models``."""
    env = os.environ.get("CAPJUDGE_MODELS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "capjudge" / "models"

"""Reading ``params.yaml`` for the flows (DVC passes no arguments beyond the file).

The one reader is :func:`capjudge.params.load_params`: it checks every section's key names,
types and method/backend ids against the schema before any stage runs.
"""

from __future__ import annotations

from capjudge.params import ParamsError, load_params

__all__ = ["ParamsError", "load_params"]

"""The report stage's settings (``params.yaml: report``), apart from the stage's code.

A module of its own so that what only needs the settings (the params schema, the flows'
signatures, the aggregate and validate stages' processes) does not import the report's
statistics and plotting (about a second of imports).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReportConfig:
    """``params.yaml: report``."""

    human_criterion: str = "overall"
    bootstrap: int = 500
    title: str = "capjudge report"
    registry: str | None = ".capjudge-runs"  # where runs are filed for `capjudge compare`
    params: str = "params.yaml"
    calibration: bool = True  # fit an isotonic judge -> human map (Judge reliability section)
    calibration_fit: float = 0.5  # share of the labelled items the map is fitted on
    seed: int = 0  # the calibration split and every bootstrap of the reliability sections

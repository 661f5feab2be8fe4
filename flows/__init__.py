"""Prefect flows: one per pipeline stage, each a thin composition of ``tasks`` over the library.

Importing this package switches off telemetry before Prefect is imported (``prefect.toml`` covers
the server's analytics; ``DO_NOT_TRACK`` covers the rest), so nothing leaves the machine.
"""

from __future__ import annotations

import os

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

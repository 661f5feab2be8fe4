"""Progress reporting for long work (ingest, judging, context extraction, meta-evaluation).

On a terminal a tqdm bar with rate and ETA; elsewhere (CI logs, Prefect task logs) a log line
about every 10 % or 30 s, so a log stays readable. Library functions take a plain callback
``(done, total)``; this module makes one.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

log = logging.getLogger("capjudge.util.progress")


class Progress:
    """A ``(done, total)`` callback showing progress; call :meth:`close` when finished.

    Args:
        label: what is being counted ("judge gveval", "ingest").
        unit: the unit ("request", "row").
        bar: force a tqdm bar on or off (default: on when stderr is a terminal).
    """

    def __init__(self, label: str, unit: str = "item", bar: bool | None = None) -> None:
        self.label, self.unit = label, unit
        self._bar: Any = None
        self._use_bar = sys.stderr.isatty() if bar is None else bar
        self._t0 = time.perf_counter()
        self._last_fraction = -1.0
        self._last_time = 0.0

    def __call__(self, done: int, total: int | None = None) -> None:
        """Report ``done`` of ``total`` (None: unknown).

        Updates the tqdm bar, or logs a line at every further 10 % (or when done), at least
        every 30 s.
        """
        if self._use_bar:
            from tqdm import tqdm

            if self._bar is None:
                self._bar = tqdm(total=total, desc=self.label, unit=self.unit, leave=True,
                                 dynamic_ncols=True, file=sys.stderr)
            if total is not None and self._bar.total != total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)
            return
        now = time.perf_counter()
        elapsed = now - self._t0
        fraction = done / total if total else 0.0
        due = (total and (fraction - self._last_fraction >= 0.1 or done == total)) \
            or now - self._last_time >= 30
        if not due:
            return
        self._last_fraction, self._last_time = fraction, now
        rate = done / elapsed if elapsed > 0 else 0.0
        if total:
            eta = (total - done) / rate if rate > 0 else float("nan")
            log.info("%s: %d/%d %ss (%.0f%%), %.1f/s, ~%.0f s left", self.label, done, total,
                     self.unit, 100 * fraction, rate, eta)
        else:
            log.info("%s: %d %ss, %.1f/s", self.label, done, self.unit, rate)

    def close(self) -> None:
        """Finish the bar (a no-op for log lines)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

"""Flow for the ``ingest`` stage: ``python -m flows.ingest [--params params.yaml]``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from prefect import flow, get_run_logger

from capjudge.manifest import ManifestError
from flows.params import load_params
from tasks.ingest import ingest_task


@flow(name="capjudge-ingest")
def ingest_flow(manifest: str, media_root: str, out: str, config: dict[str, Any]
                ) -> dict[str, Any]:
    """Validate a manifest, hash media and sample frames; quarantined rows are reported."""
    logger = get_run_logger()
    result = ingest_task(manifest, media_root, out, config)
    logger.info("ingest: %(n_rows)s rows -> %(n_items)s items, %(n_quarantined)s quarantined",
                result)
    for reason, count in sorted(result["reasons"].items()):
        logger.warning("quarantined: %d x %s", count, reason)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the ingest stage as a flow (params.yaml: ingest)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    p = load_params(args.params)["ingest"]
    config = {k: p[k] for k in ("frame_policy", "uniform_frames", "decode_timeout_s",
                                "max_candidate_chars") if k in p}
    try:
        ingest_flow(p["manifest"], p["media_root"], p["out"], config)
    except ManifestError as exc:
        print(f"ingest: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

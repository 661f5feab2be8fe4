"""Flow for the ``sample`` stage: ``python -m flows.sample [--params params.yaml]``."""

from __future__ import annotations

import argparse
import sys

from prefect import flow

from flows.params import load_params
from tasks.ingest import generate_sample_task


@flow(name="capjudge-sample")
def sample_flow(out: str, seed: int, images: int) -> dict[str, int]:
    """Generate the bundled synthetic sample suite (deterministic in the seed)."""
    return generate_sample_task(out, seed, images)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args(argv)
    try:
        params = load_params(args.params)  # the schema: a typo fails before anything runs
    except (OSError, ValueError) as exc:
        print(f"sample: error: {exc}", file=sys.stderr)
        return 2
    p = {"out": "data/sample", "seed": 0, "images": 20, **(params.get("sample") or {})}
    sample_flow(p["out"], int(p["seed"]), int(p["images"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

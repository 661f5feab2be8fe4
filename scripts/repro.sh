#!/usr/bin/env bash
# Quick start, command 1: set everything up, then reproduce the pipeline on the bundled sample.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
dvc repro "$@"
echo "[repro] done: see data/ and reports/ (dvc metrics show, dvc status)"

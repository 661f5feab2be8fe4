#!/usr/bin/env bash
# Quick start, command 2: set everything up, then run the test suite (hermetic: no network).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
python -m pytest "$@"

#!/usr/bin/env bash
# Quick start, command 1: set everything up, then reproduce the pipeline on the bundled sample.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
# One local Prefect server for the whole `dvc repro`: every stage's flow then costs 1-2 s of
# orchestration instead of starting a temporary server of its own (8-15 s each on 2 cores).
# A server you already run (PREFECT_API_URL set) is used as it is.
if [ -z "${PREFECT_API_URL:-}" ] && [ "${CAPJUDGE_SHARED_PREFECT:-1}" = 1 ]; then
  port=$(python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  log=$(mktemp -t capjudge-prefect-server.XXXXXX.log)
  prefect server start --host 127.0.0.1 --port "$port" >"$log" 2>&1 &
  server_pid=$!
  trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT
  export PREFECT_API_URL="http://127.0.0.1:$port/api"
  if python - "$PREFECT_API_URL" <<'PY'
import sys, time, urllib.request
url = sys.argv[1] + "/health"
for _ in range(180):
    try:
        urllib.request.urlopen(url, timeout=2).read()
        sys.exit(0)
    except Exception:
        time.sleep(0.5)
sys.exit(1)
PY
  then
    echo "[repro] Prefect server on $PREFECT_API_URL (log: $log)"
  else
    echo "[repro] warning: the local Prefect server did not start (see $log); each stage" \
         "starts a temporary one instead" >&2
    kill "$server_pid" 2>/dev/null || true
    unset PREFECT_API_URL
  fi
fi
start=$(date +%s)
dvc repro "$@"
echo "[repro] done in $(( $(date +%s) - start )) s: see reports/report.html (dvc metrics show, dvc status)"
# This machine's speed beside the time, to compare it with the documented timings (issue 42).
echo "[repro] $(python "$(dirname "${BASH_SOURCE[0]}")/../bench/calibrate.py" 2>/dev/null || echo "calibration not measured")"

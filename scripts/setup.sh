#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with the pinned stack, the project installed
# editable, DVC/Prefect telemetry off. Sourced by scripts/repro.sh and scripts/test.sh.
#
# torch is pinned to 2.13.0 exactly: an unpinned torch pulls several GB of CUDA wheels on a machine
# that only needs the CPU build, and the same pin gives the CUDA build on a GPU machine.
#
# `source scripts/setup.sh` leaves the caller's shell options as it found them: the install
# steps run strictly (set -euo pipefail) in a bash of their own, so neither `set -e` nor
# `nounset` leaks into an interactive shell (where a later failing command would close the
# terminal), and a failure returns a status instead of exiting the caller's shell. (A subshell
# would not do: bash ignores `set -e` inside `( ... ) || ...`.) repro.sh and test.sh set their
# own strictness.
cd "$(dirname "${BASH_SOURCE[0]}")/.." || return 1 2>/dev/null || exit 1
# The steps are a script given to `bash -c`, not fed on stdin: pip or apt-get reading stdin
# would otherwise eat the rest of it.
_capjudge_setup_steps=$(cat <<'SETUP'
set -euo pipefail
PY=$PYTHON
# A .venv left half-made (set-up interrupted while creating it) is made again from scratch.
if [ ! -x .venv/bin/python ] || [ ! -f .venv/bin/activate ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv --clear .venv
  rm -f .venv/.setup-stamp
fi
# Reinstall only when the lock or the project metadata changed (a second run costs ~1 s).
stamp=$(cat requirements.lock pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat .venv/.setup-stamp 2>/dev/null)" != "$stamp" ]; then
  # uv installs the same pinned set in seconds where pip takes minutes (issue 42: the set-up was
  # a third of the main job on a slower machine); scripts/pip_like_uv.py hands it pip's own
  # package sources. pip stays the fallback, and CAPJUDGE_INSTALLER=pip forces it.
  installed=""
  if [ "${CAPJUDGE_INSTALLER:-uv}" = uv ] \
     && .venv/bin/python -m pip install -q --disable-pip-version-check "uv>=0.9,<1" 2>/dev/null; then
    echo "[setup] installing the pinned stack with uv"
    if .venv/bin/python scripts/pip_like_uv.py .venv/bin/uv --python .venv/bin/python -q \
         -c requirements.lock -e ".[dev]"; then
      installed=uv
    else
      echo "[setup] uv could not install the stack; trying pip" >&2
    fi
  elif [ "${CAPJUDGE_INSTALLER:-uv}" = uv ]; then
    echo "[setup] uv is not available here; using pip" >&2
  fi
  if [ -z "$installed" ]; then
    echo "[setup] installing the pinned stack with pip (first time: ~3 min)"
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade "pip>=24"
    .venv/bin/python -m pip install -q --disable-pip-version-check -c requirements.lock -e ".[dev]"
  fi
  echo "$stamp" > .venv/.setup-stamp
fi
# Java runs the PTB tokenizer and METEOR of the classical baselines (capjudge meta-eval).
if ! command -v java >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "[setup] installing a Java runtime for METEOR / the PTB tokenizer"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends default-jre-headless >/dev/null) \
      || echo "[setup] warning: could not install Java; METEOR/PTB baselines will be unavailable"
  else
    echo "[setup] warning: no Java on PATH; install a JRE for the METEOR/PTB baselines"
  fi
fi
SETUP
)
_capjudge_setup_status=0
PYTHON="${PYTHON:-python3}" bash -c "$_capjudge_setup_steps" || _capjudge_setup_status=$?
unset _capjudge_setup_steps
if [ "$_capjudge_setup_status" != 0 ]; then
  echo "[setup] failed (exit $_capjudge_setup_status)" >&2
  return "$_capjudge_setup_status" 2>/dev/null || exit "$_capjudge_setup_status"
fi
unset _capjudge_setup_status
# Offline-friendly defaults; every one can still be overridden by the caller's environment.
export DO_NOT_TRACK=${DO_NOT_TRACK:-1}
export DVC_NO_ANALYTICS=${DVC_NO_ANALYTICS:-1}
export PREFECT_SERVER_ANALYTICS_ENABLED=${PREFECT_SERVER_ANALYTICS_ENABLED:-false}
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=${PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS:-90}
export HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}
export TRANSFORMERS_OFFLINE=${TRANSFORMERS_OFFLINE:-1}
export TOKENIZERS_PARALLELISM=${TOKENIZERS_PARALLELISM:-false}
# shellcheck disable=SC1091
source .venv/bin/activate

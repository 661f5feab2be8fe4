#!/usr/bin/env bash
# Run THERE, on the lent GPU machine, as the one command of a device run (issue 31):
#   run(command="bash bench/gpu_device.sh", carry=[".whl", ".carry"], timeout_s=600)
# after `bash bench/gpu_carry.sh` here. Everything it prints also lands in $OUT (it comes back
# even if the run is cut at its limit). Budget: under 2.5 min of tests, 5 min of benchmark,
# so the whole call ends inside 600 s with its start and transfers.
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 CAPJUDGE_DEVICE=${CAPJUDGE_DEVICE:-cuda}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{
  python3 --version
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 - <<'PYEOF'
import importlib
for name in ("torch", "transformers", "torchvision", "tokenizers", "huggingface_hub"):
    try:
        print(name, importlib.import_module(name).__version__)
    except ImportError as exc:
        print(name, "missing:", exc)
PYEOF
} 2>&1 | tee "$OUT/env.txt"
# The local-backend tests on cuda (they take the default device and pin float32). The tests
# on the embedded model are left out (-k "not embedded"): its package, a 250 MB GGUF, does not
# travel; they run on the CPU in CI.
timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
  tests/test_local_backends.py tests/test_vlm_families.py tests/test_generated_prefix.py \
  tests/test_hf_numerics.py tests/test_sentencepiece_digits.py -k "not embedded" 2>&1 \
  | tee "$OUT/tests.txt"
tests=${PIPESTATUS[0]}
echo "pytest exit status: $tests" | tee -a "$OUT/tests.txt"
# The benchmark: Gemma 3 270M shape and a LLaVA-7B shape, per dtype, GPU vs CPU.
timeout 300 python3 bench/bench_gpu.py --tokenizer .carry/gemma-tokenizer 2>&1 \
  | grep --line-buffered -v "it/s]" | tee "$OUT/bench.txt"
bench=${PIPESTATUS[0]}
echo "bench exit status: $bench" | tee -a "$OUT/bench.txt"
exit $(( tests != 0 || bench != 0 ))

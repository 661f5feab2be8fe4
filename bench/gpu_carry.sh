#!/usr/bin/env bash
# Run HERE (with network to the package registries) before a device run: fetches what the
# device machine lacks into ignored folders that the run carries (issue 31).
#   .whl/                 transformers 5.23 (the device image has 5.17; its other needs are
#                         there: huggingface_hub 1.33, tokenizers 0.23, safetensors 0.8)
#   .carry/gemma-tokenizer  the embedded Gemma 3 270M tokenizer (the device has no embedded
#                         model package; bench_gpu.py --tokenizer reads it)
# Then: run(command="bash bench/gpu_device.sh", carry=[".whl", ".carry"], timeout_s=600).
set -euo pipefail
cd "$(dirname "$0")/.."
# Both folders are in .gitignore: they travel only because the run names them in `carry`.
PY=${PYTHON:-.venv/bin/python}
VERSION=$("$PY" -c "import transformers; print(transformers.__version__)")
rm -rf .whl && mkdir -p .whl .carry
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  -d .whl "transformers==$VERSION"
"$PY" - <<'PYEOF'
from pathlib import Path
from transformers import AutoTokenizer
from capjudge.backends.embedded import prepare_embedded
out = Path(".carry/gemma-tokenizer")
AutoTokenizer.from_pretrained(prepare_embedded("gemma-3-270m")).save_pretrained(out)
PYEOF
du -sh .whl .carry
echo "the tree and the carried folders must stay under 64 MiB together:"
{ git ls-files -z; printf '.whl\0.carry\0'; } | du -shc --files0-from=- | tail -1

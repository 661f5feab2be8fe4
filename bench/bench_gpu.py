"""Local judges on a GPU: throughput per dtype, GPU vs CPU, bfloat16 vs float32 (issue 31).

One script, at most ~6 minutes on one GPU. It builds random-weight models of the real shapes
(nothing is downloaded):

- a Gemma 3 270M-shaped text model with the embedded model's real tokenizer: the likelihood
  judge's candidates/s per dtype on the GPU, and in float32 on the CPU in the same run;
  bfloat16 vs float32 agreement of its scores (Kendall tau, largest difference);
- a LLaVA-shaped VLM (CLIP-L/14 vision tower + a 7B-class Llama decoder): G-VEval evaluations/s
  (generation plus the exact digit distribution) at ``--gen-tokens`` generated tokens;

and prints peak memory. Without a GPU it runs small shapes on the CPU, labelled so (the
figures are then only a smoke test of the script).

    python bench/bench_gpu.py                      # GPU if visible
    python bench/bench_gpu.py --candidates 300 --evals 64 --gen-tokens 128

On the lent device machine (no network, transformers 5.17): ``bash bench/gpu_carry.sh`` here
fetches what travels (transformers 5.23, the tokenizer); ``bench/gpu_device.sh`` is the one
command to run there (the local-backend tests on cuda, then this script).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def gemma_model(small: bool, dtype: Any, device: str) -> Any:
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    shape = dict(hidden_size=640, intermediate_size=2048, num_hidden_layers=18,
                 num_attention_heads=4, num_key_value_heads=1, head_dim=256)
    if small:
        shape = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=2, num_key_value_heads=1, head_dim=64)
    config = Gemma3TextConfig(vocab_size=262144, max_position_embeddings=4096, **shape)
    return Gemma3ForCausalLM(config).to(dtype=dtype, device=device).eval()


def pairs(n: int) -> list[tuple[str, str]]:
    """(context, candidate) pairs from the bundled sample's image captions (made here).

    Only the image rows are drawn (``_image_rows``, the suite's first draws for seed 0): the
    device machine has no ffmpeg packages to encode the sample's videos, and the captions are
    all this needs.
    """
    import random

    from capjudge.sample import _image_rows

    rows = _image_rows(Path(tempfile.mkdtemp()), random.Random(0), 20, 5)
    made = [(f"A caption of the picture: {r['references'][0]}\nAnother: ", r["candidate"])
            for r in rows if r.get("references")]
    return (made * (n // max(1, len(made)) + 1))[:n]


def likelihood_rate(backend: Any, work: list[tuple[str, str]]) -> tuple[float, list[float]]:
    backend.clear_memo()
    start = time.perf_counter()
    scores = [ll for ll, _ in backend.loglikelihoods(work)]
    return len(work) / (time.perf_counter() - start), scores


def likelihood_section(args: argparse.Namespace, device: str, small: bool) -> None:
    import torch
    from scipy.stats import kendalltau
    from transformers import AutoTokenizer

    from capjudge.backends.embedded import prepare_embedded
    from capjudge.backends.hf import HFBackend

    # The device machine has no embedded model package: bench/gpu_carry.sh carries its
    # tokenizer (--tokenizer); here it is the embedded model's own.
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or prepare_embedded("gemma-3-270m"))
    work = pairs(args.candidates)
    results: dict[str, tuple[float, list[float]]] = {}
    dtypes = [("float32", torch.float32)]
    if device.startswith("cuda"):
        dtypes.append(("bfloat16", torch.bfloat16))
    for name, dtype in dtypes:
        model = gemma_model(small, dtype, device)
        backend = HFBackend.from_loaded(model, tokenizer, snapshot=f"random-{name}")
        results[f"{device} {name}"] = likelihood_rate(backend, work)
        del backend, model
    if device.startswith("cuda"):
        model = gemma_model(small, torch.float32, "cpu")
        backend = HFBackend.from_loaded(model, tokenizer, snapshot="random-cpu")
        results["cpu float32"] = likelihood_rate(backend, work[: max(20, len(work) // 10)])
    label = "(small shapes, CPU: a smoke test)" if small else "(Gemma 3 270M shape)"
    print(f"likelihood judge {label}, {len(work)} candidates:")
    for key, (rate, _) in results.items():
        print(f"  {key:<22} {rate:8.1f} candidates/s")
    if "cuda bfloat16" in results:
        a, b = results["cuda float32"][1], results["cuda bfloat16"][1]
        tau = kendalltau(a, b).statistic
        worst = max(abs(x - y) for x, y in zip(a, b, strict=True))
        spread = statistics.pstdev(a)
        print(f"  bfloat16 vs float32: Kendall {tau:.3f}, max |diff| {worst:.3f} (scores' sd "
              f"{spread:.3f})")


def vlm_section(args: argparse.Namespace, device: str, small: bool) -> None:

    from capjudge.item import Item
    from capjudge.media import sha256_file
    from capjudge.methods import MethodOptions, get_method
    from capjudge.methods.base import Planned
    from capjudge.protocol import Decoding

    folder = Path(tempfile.mkdtemp())
    if small:
        from tiny_vlm import build_tiny_llava

        path = build_tiny_llava(folder / "vlm")
    else:
        path = build_llava_7b(folder / "vlm", device)
    from PIL import Image

    picture = folder / "p.png"
    Image.new("RGB", (336, 336), (120, 40, 40)).save(picture)
    sha = sha256_file(picture)
    items = [Item(id=f"i{k}", candidate=f"A red square number {k}.", media_kind="image",
                  media_root=str(folder), media_path=picture.name, media_sha256=sha,
                  judge_path=str(picture), judge_sha256=sha, references=("A red box.",))
             for k in range(args.evals)]
    method = get_method("gveval")
    options = MethodOptions(decoding=Decoding(max_tokens=args.gen_tokens), vision=True)
    requests = [p.request for i in items for p in method.plan(i, "combined", options)
                if isinstance(p, Planned)]
    label = "tiny LLaVA on the CPU (a smoke test)" if small else "LLaVA 7B shape"
    kernels = [k or None for k in (args.attention or "").split(",")]
    for name, dtype in (("float32", "float32"), ("bfloat16", "bfloat16")):
        if name == "bfloat16" and not device.startswith("cuda"):
            continue
        for kernel in kernels:
            vlm_rates(args, path, requests, device, name, dtype, kernel, label)


def vlm_rates(args: argparse.Namespace, path: Path, requests: list[Any], device: str,
              name: str, dtype: str, kernel: str | None, label: str) -> None:
    """G-VEval evaluations/s of one dtype and attention kernel, scores read both ways."""
    import torch

    from capjudge.backends.hf import HFBackend

    # Side by side: the digit distributions read on generation's own cache (the default)
    # and with each context re-encoded (image included), as before.
    rates, probs = {}, {}
    for share in (True, False):
        backend = HFBackend(str(path), device=device, dtype=dtype, batch_size=args.batch,
                            linear_kernel="default", share_generated=share, attention=kernel)
        start = time.perf_counter()
        answers = []
        for k in range(0, len(requests), args.batch):
            answers += backend.generate(requests[k:k + args.batch])
        rates[share] = len(requests) / (time.perf_counter() - start)
        probs[share] = [p for a in answers for s in getattr(a, "slots", [])
                        for p in (s.probs or [])]
        attention = backend.attention
        del backend
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    gap = max((abs(a - b) for a, b in zip(probs[True], probs[False], strict=True)),
              default=float("nan"))
    print(f"G-VEval combined, {label}, {name}, attention {attention}, {args.gen_tokens} "
          f"generated tokens, batch {args.batch}: {rates[True]:.2f} evaluations/s on "
          f"generation's cache, {rates[False]:.2f} re-encoding each context "
          f"({rates[True] / rates[False]:.2f}x; largest probability difference {gap:.1e})")


def build_llava_7b(path: Path, device: str) -> Path:
    """A LLaVA-1.5-7B-shaped model with random weights, saved with a tiny processor.

    Its weights are drawn on ``device`` (seconds on a GPU; 7 billion draws on the CPU would
    take minutes of the run's budget) and saved in bfloat16 (14 GB).
    """
    from tiny_vlm import build_tiny_llava
    from transformers import AutoConfig, LlavaForConditionalGeneration

    build_tiny_llava(path)  # the processor and tokenizer (vocabulary kept small)
    config = AutoConfig.from_pretrained(path)
    config.vision_config.update(dict(hidden_size=1024, intermediate_size=4096,
                                     num_hidden_layers=24, num_attention_heads=16,
                                     image_size=336, patch_size=14))
    config.text_config.update(dict(hidden_size=4096, intermediate_size=11008,
                                   num_hidden_layers=32, num_attention_heads=32,
                                   num_key_value_heads=32))
    import torch

    with torch.device(device):
        model = LlavaForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(path)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=300)
    parser.add_argument("--evals", type=int, default=64)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--tokenizer", help="a folder holding the Gemma 3 tokenizer (default: "
                        "the embedded model's, converted from its GGUF)")
    parser.add_argument("--attention", help="the VLM's attention implementations, comma-"
                        "separated, each measured side by side (sdpa, eager; default: "
                        "transformers' choice)")
    parser.add_argument("--skip", choices=("likelihood", "vlm"), action="append", default=[],
                        help="leave a section out (repeatable)")
    args = parser.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    small = device == "cpu"
    if small:
        args.candidates, args.evals, args.gen_tokens = min(args.candidates, 40), \
            min(args.evals, 8), min(args.gen_tokens, 16)
    name = torch.cuda.get_device_name() if device == "cuda" else "no GPU: CPU, small shapes"
    print(f"device: {name}; torch {torch.__version__}; {time.strftime('%Y-%m-%d')}")
    if "likelihood" not in args.skip:
        likelihood_section(args, device, small)
    if "vlm" not in args.skip:
        vlm_section(args, device, small)
    peak = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    print(f"peak memory: {peak:.2f} GB ({'GPU' if device == 'cuda' else 'CPU RSS'})")


if __name__ == "__main__":
    main()

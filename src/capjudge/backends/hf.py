"""``hf/<local path>``: a local transformers model as a judge, with *exact* score distributions.

The model writes its reasoning (greedy, batched, left-padded). Then, at each score slot, the
distribution over the whole scale is computed by teacher forcing instead of being sampled from
the top-20 alternatives an API returns:

- For tokenizers that split numbers into single digits (Gemma, Llama 2, Qwen; SentencePiece
  ones write a text-initial "8" as "▁", "8", so the digits' own tokens are taken from "$85"),
  a **digit tree**:
  one pass over the context gives the first digit; one batched pass over all 1-digit prefixes
  gives the second digit or the end of the number; one batched pass over the 2-digit prefixes
  (and "100") gives the end. The context's key/value cache is computed once and shared, so a
  0-100 scale costs 4 forward passes per slot, not 101. By default (``tree_mask``) the three
  digit levels are one pass: every digit prefix in one sequence over the context's cache, a
  4D attention mask letting each see only the context and its own ancestors (2 passes). Each
  node's position id is its depth after the context plus the model's RoPE offset (the Qwen
  families' ``rope_deltas``: their images take fewer positions than tokens). The first masked
  tree of a loaded model is checked against the level walk, where the model places every token
  itself; a family whose positions differ in a way not known here falls back to the walk.
- Otherwise, every value's token sequence is scored in one batched pass over the shared cache.

The context's cache is generation's own (``share_generated``, :mod:`.generated_prefix`): the
row's slice of it, unpadded, is what encoding the prompt, image and answer again would give, so
only the tokens it lacks are fed (checked against re-encoding once per loaded model).

"The number ends" means the next token does not start with a digit. P(value) is the product of
the digit probabilities and that end probability; the mass over the scale is reported, nothing
is rescaled silently. When the model's text never reached the slot's anchor (common for small
base models), the anchor text (``forced_prefix``) is appended and the fact is recorded
(``anchor_forced``) — the distribution is still the model's own, at a stated position.

Vision-language models (LLaVA, Qwen2-VL, ... through ``AutoModelForImageTextToText``) receive
the images; text-only models refuse requests with images (the judge stage skips those modes and
reports why).

:class:`HFBackend` (this module: options, construction, generation) is put together from parts
with one job each: :mod:`.hf_state` (the loaded state every part reads), :mod:`.hf_loading`
(weights, tokenizer, linear kernels, memos), :mod:`.hf_prefix` (the context cache shared with
generation), :mod:`.hf_likelihood` (log-likelihoods of texts) and :mod:`.hf_digits` (the exact
score distributions and their reading).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from capjudge.backends.base import Backend, Capabilities, RerunIdentity, int_option
from capjudge.backends.compute_thread import computes
from capjudge.backends.generated_prefix import row_prefixes
from capjudge.backends.hf_digits import HFDigits
from capjudge.backends.hf_loading import HFLoading
from capjudge.backends.packing import buckets
from capjudge.protocol import (
    BackendError,
    BackendFacts,
    ChatMessage,
    ContentPart,
    ImagePart,
    JudgeRequest,
    JudgeResponse,
)

log = logging.getLogger(__name__)


def _hash_memos(root: Path) -> list[Path]:
    """Where a model directory's hash is remembered: beside it, else in the models cache.

    A read-only directory (a shared model store, a mounted volume) is hashed once too.
    """
    from capjudge.backends.model_store import models_dir

    key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32]
    return [root / ".capjudge-weights-sha256.json",
            models_dir() / "weight-hashes" / f"{key}.json"]


def weights_sha256(path: str | Path) -> str:
    """Hash of a model directory's weight and config files.

    Computed once per file identity (each file's name, size and modification time): the
    result is remembered beside the files, or in the models cache when the directory is
    read-only, and reused while that identity holds.
    """
    root = Path(path)
    files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix in
                   {".safetensors", ".bin", ".json", ".model", ".gguf"}
                   and not p.name.startswith(".capjudge"))
    stamp = json.dumps([(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files])
    memos = _hash_memos(root)
    for memo in memos:
        try:
            saved = json.loads(memo.read_text())
            if saved["stamp"] == stamp:
                return str(saved["sha256"])
        except (OSError, ValueError, KeyError):
            pass
    digest = hashlib.sha256()
    for p in files:
        digest.update(p.name.encode())
        with p.open("rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
    value = digest.hexdigest()
    for memo in memos:
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            memo.write_text(json.dumps({"stamp": stamp, "sha256": value}))
            break
        except OSError:
            continue  # read-only model directory: the models cache
    return value


def auto_dtype(device: str) -> Any:
    """``dtype: auto``: bfloat16, float16 or float32, by what the device computes in.

    bfloat16 on a GPU that supports it, else float16 on a GPU, else float32 (the CPU, where
    bfloat16 is slower and less exact).
    """
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        index = torch.device(device).index
        if torch.cuda.is_bf16_supported(including_emulation=False):
            return torch.bfloat16
        major, _ = torch.cuda.get_device_capability(index)
        return torch.float16 if major >= 6 else torch.float32
    return torch.float32


def numerics_of(model: Any, quantize: str | None = None) -> str:
    """The numerics a loaded model computes in.

    ``float32``, ``bfloat16``, ``float16`` or ``int8-dynamic``: read from its weights, never
    from the option that asked for them.
    """
    if quantize:
        return "int8-dynamic"
    dtype = getattr(model, "dtype", None)
    name = str(dtype).removeprefix("torch.") if dtype is not None else "float32"
    return name if name in ("bfloat16", "float16", "float32", "float64") else "float32"


def _torch_dtype(dtype: str, device: str, quantize: str | None) -> Any:
    """The torch dtype the weights load in, with the checks of ``dtype`` and ``quantize``.

    Raises:
        BackendError: an unknown dtype or quantisation, or int8 asked off float32 on the CPU.
    """
    import torch

    # ``quantize="int8"`` (dynamic int8 linear layers) is a constructor argument for the
    # benchmark only, not a backend option: it lost 5.7 tau-c points against float32 on
    # the first 60 Flickr8k-Expert candidates (bench/bench_local.py), beyond the 0.3 a
    # numerics option may cost.
    if quantize not in (None, "int8"):
        raise BackendError(f"quantize must be 'int8' or unset, not {quantize!r}",
                           transient=False)
    if dtype == "auto":
        torch_dtype = auto_dtype(device)
    elif dtype in ("float32", "bfloat16", "float16"):
        torch_dtype = getattr(torch, dtype)
    else:
        raise BackendError(f"dtype must be auto, float32, bfloat16 or float16, not {dtype!r}",
                           transient=False)
    if quantize and (torch_dtype != torch.float32 or not device.startswith("cpu")):
        raise BackendError("quantize: int8 is dynamic quantisation of float32 weights on "
                           "the CPU (dtype float32, device cpu)", transient=False)
    return torch_dtype


# What the ``attention`` option may ask transformers for (``attn_implementation``); unset
# keeps transformers' own choice (SDPA where the model supports it). Only kernels that take
# an arbitrary 4D mask: the digit tree and the packed likelihood candidates pass one, and the
# flash-attention kernels expect a 2D padding mask (flex attention builds its own block mask);
# a kernel that misread them would give wrong scores that look valid.
ATTENTION = ("sdpa", "eager")

# Requests per forward pass unless ``batch_size`` says (one default for __init__ and
# capabilities_for, which must agree).
DEFAULT_BATCH_SIZE = 8


class HFBackend(HFDigits, HFLoading):
    """A local transformers model (causal LM or image-text-to-text VLM)."""

    options = frozenset({"device", "dtype", "batch_size", "min_mass", "max_tree_rows",
                         "prune", "prefix_sharing", "prefix_cache_size",
                         "max_scored_positions", "threads", "tree_mask", "linear_kernel",
                         "device_map", "share_generated", "attention"})
    shared = True  # loading costs seconds and memory: once per process

    @classmethod
    def rerun_identity(cls, options: Mapping[str, object]) -> RerunIdentity:
        """``run``: batches are formed in a fixed order, but not batch-invariant.

        A score's last bits depend on what else is in its batch (the kernels' blocking follows
        the batch's shape; measured 1e-4 on a 0-1 scale) and on which likelihoods came from
        the request cache.
        """
        return "run"

    # transformers objects (untyped here); set by _load.
    _snapshot_given: str | None = None  # from_loaded: the caller's snapshot
    processor: Any
    tokenizer: Any
    model: Any

    @classmethod
    def create(cls, name: str, **options: Any) -> Backend:
        """``hf/<local path>``: the model directory."""
        return cls(name, backend_id=f"hf/{name}", **options)

    @classmethod
    def model_dir(cls, name: str) -> Path:
        """The model directory ``create(name)`` loads from (no weights are read)."""
        return Path(name)

    @classmethod
    def backend_id_for(cls, name: str) -> str:
        """The id ``create(name)`` gives its backend."""
        return f"hf/{name}"

    @classmethod
    def capabilities_for(cls, name: str, options: Mapping[str, object]) -> Capabilities:
        """The capabilities ``__init__`` declares, from the model's config alone.

        Raises:
            BackendError: the model directory does not exist.
        """
        from transformers import AutoConfig

        path = cls.model_dir(name)
        if not path.is_dir():
            raise BackendError(f"model directory not found: {path}", transient=False)
        is_vlm = hasattr(AutoConfig.from_pretrained(str(path)), "vision_config")
        return Capabilities(vision=is_vlm, distribution="exact",
                            max_batch=int_option(options.get("batch_size", DEFAULT_BATCH_SIZE)),
                            concurrency=1, likelihood=not is_vlm)

    @classmethod
    def describe_unloaded(cls, name: str, options: Mapping[str, object]) -> BackendFacts | None:
        """Id, snapshot, path and vision without loading the weights (hashed, memoised).

        The snapshot's numerics suffix follows from ``dtype`` and the device as
        :func:`_torch_dtype` resolves them (what the weights would load in); with a
        ``device_map`` the placement decides, so only a loaded model can say (None).
        """
        if options.get("device_map"):
            return None
        device = str(options.get("device") or default_device())
        dtype = _torch_dtype(str(options.get("dtype") or "auto"), device, None)
        numerics = str(dtype).removeprefix("torch.")
        suffix = "" if numerics == "float32" else f"+{numerics}"
        path = cls.model_dir(name)
        vision = cls.capabilities_for(name, options).vision
        return {"backend": cls.backend_id_for(name),
                "snapshot": f"sha256:{weights_sha256(path)}{suffix}", "path": str(path),
                "vision": vision, "device": device, "loaded": False}

    @computes
    def __init__(self, path: str | Path, *, backend_id: str | None = None,
                 device: str | None = None, dtype: str = "auto",
                 batch_size: int = DEFAULT_BATCH_SIZE,
                 min_mass: float = 0.5, max_tree_rows: int = 128, prune: float = 1e-6,
                 prefix_sharing: bool = True, prefix_cache_size: int = 64,
                 max_scored_positions: int = 256, quantize: str | None = None,
                 threads: int | None = None, tree_mask: bool = True,
                 linear_kernel: str = "auto", device_map: str | None = None,
                 share_generated: bool = True, attention: str | None = None) -> None:
        import torch
        from transformers import AutoConfig

        if attention is not None and attention not in ATTENTION:
            raise BackendError(f"attention must be one of {', '.join(ATTENTION)} (or unset: "
                               f"transformers' default), got {attention!r}: the digit tree "
                               "and packed likelihoods pass 4D masks that flash and flex "
                               "attention kernels do not take", transient=False)
        self._attention_asked = attention

        self.path = str(path)
        if not Path(self.path).is_dir():
            raise BackendError(f"model directory not found: {self.path}", transient=False)
        self.backend_id = backend_id or f"hf/{self.path}"
        self.device = device or default_device()
        self.min_mass = min_mass
        self.max_tree_rows = max_tree_rows
        # Digit-tree subtrees below this probability are not expanded (0: the full tree).
        self.prune = prune
        config = AutoConfig.from_pretrained(self.path)
        self.is_vlm = hasattr(config, "vision_config")
        torch_dtype = _torch_dtype(dtype, self.device, quantize)
        # The stage's share of the cores (torch's default is every core of the machine; a
        # stage that owns fewer, e.g. under taskset or a CPU quota, would oversubscribe).
        self.threads = int(threads) if threads else default_threads()
        if self.device.startswith("cpu") and torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        self.tree_mask = bool(tree_mask)
        self._tree_checked = False
        self.share_generated = bool(share_generated)
        self._sharing_checked = False
        self.dtype_option = dtype
        self.device_map = device_map
        self._load(torch_dtype)
        # Numerics other than float32 change the answers: named in the snapshot (so in every
        # row and in the cache key: a bfloat16 GPU run and a float32 CPU run never share
        # answers) and in describe(). Read from the loaded weights, whatever asked for them.
        self.numerics = numerics_of(self.model, quantize)
        if quantize:
            # Linear layers only (the attention and MLP projections, and the vocabulary head):
            # int8 weights, activations quantised on the fly per batch.
            from torch.ao.quantization import quantize_dynamic

            self.model = quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        self.linear_kernel = self._pack_linears(linear_kernel, torch_dtype, quantize)
        self._weights = weights_sha256(self.path)
        self.capabilities = Capabilities(vision=self.is_vlm, distribution="exact",
                                         max_batch=batch_size, concurrency=1,
                                         likelihood=not self.is_vlm)
        self._init_memos(prefix_sharing, prefix_cache_size, max_scored_positions)


    @classmethod
    def from_loaded(cls, model: Any, tokenizer: Any = None, processor: Any = None, *,
                    snapshot: str, backend_id: str = "hf/loaded", min_mass: float = 0.5,
                    batch_size: int = 8, **options: Any) -> HFBackend:
        """A backend around a model already in memory (a library user's, on any device).

        Nothing is loaded, copied or changed in the model (its linear layers are not packed).

        Args:
            model: a transformers causal LM or image-text-to-text model, on its device.
            tokenizer: its tokenizer (default: the processor's).
            processor: a VLM's processor.
            snapshot: what identifies these weights in the cache key and on every row (the
                caller knows: a content hash, a checkpoint name and step); the numerics
                suffix is added from the model's dtype.
            backend_id: the id rows carry.
            min_mass: below this captured mass a slot is ``low_mass``.
            batch_size: requests per generate() call.
            **options: ``max_tree_rows``, ``prune``, ``prefix_sharing``, ``prefix_cache_size``,
                ``max_scored_positions``, ``tree_mask``.
        """
        if tokenizer is None and processor is None:
            raise BackendError("from_loaded needs the model's tokenizer or processor",
                               transient=False)
        self = cls.__new__(cls)
        self.path = getattr(getattr(model, "config", None), "_name_or_path", "") or "loaded"
        self.backend_id = backend_id
        self.processor = processor
        self.tokenizer = tokenizer if tokenizer is not None else processor.tokenizer
        self.model = model.eval()
        self.is_vlm = hasattr(model.config, "vision_config")
        self.device = str(next(model.parameters()).device)
        self.device_map = None
        self.dtype_option = "loaded"
        self.min_mass = min_mass
        self.max_tree_rows = int(options.pop("max_tree_rows", 128))
        self.prune = float(options.pop("prune", 1e-6))
        self.tree_mask = bool(options.pop("tree_mask", True))
        self._tree_checked = False
        self.share_generated = bool(options.pop("share_generated", True))
        self._sharing_checked = False
        self.threads = default_threads()
        self.numerics = numerics_of(model)
        self.linear_kernel = "default"
        self._weights = snapshot.removeprefix("sha256:")
        self._snapshot_given = snapshot
        self._prepare_tokenizer()
        self.capabilities = Capabilities(vision=self.is_vlm, distribution="exact",
                                         max_batch=batch_size, concurrency=1,
                                         likelihood=not self.is_vlm)
        self._init_memos(bool(options.pop("prefix_sharing", True)),
                         int(options.pop("prefix_cache_size", 64)),
                         int(options.pop("max_scored_positions", 256)))
        if options:
            raise BackendError(f"unknown options for from_loaded: {sorted(options)}",
                               transient=False)
        return self


    # -- identity ---------------------------------------------------------------------------

    def snapshot(self) -> str:
        """The weights' content hash, as ``sha256:<hex>`` (``+<numerics>`` when not float32).

        bfloat16 or int8 numerics give different answers from the same weights: the suffix
        keeps their answers apart in the cache and names them on every row.
        """
        suffix = "" if self.numerics == "float32" else f"+{self.numerics}"
        if self._snapshot_given is not None:
            return f"{self._snapshot_given}{suffix}"
        return f"sha256:{self._weights}{suffix}"

    def describe(self) -> BackendFacts:
        """Lineage facts: id, snapshot, path, architecture, device, numerics, threads, kernel."""
        return {"backend": self.backend_id, "snapshot": self.snapshot(), "path": self.path,
                "architecture": type(self.model).__name__, "vision": self.is_vlm,
                "device": self.device, "numerics": self.numerics,
                "dtype_option": self.dtype_option, "device_map": self.device_map,
                "threads": self.threads, "linear_kernel": self.linear_kernel,
                "cpu_capability": self.cpu_capability,
                "share_generated": self.share_generated, "attention": self.attention}

    @property
    def cpu_capability(self) -> str | None:
        """PyTorch's CPU kernel path on this machine (``AVX2``, ``AVX512``; None on a GPU).

        Found by rerunning the bundled sample on another machine: the likelihood judge's
        scores moved by up to 1.8e-4 with every other recorded fact the same (the kernel paths
        differ in their last bits, ``bench/bench_kernels.py``); the lineage now says why.
        """
        if not str(self.device).startswith("cpu"):
            return None
        import torch

        return str(torch.backends.cpu.get_cpu_capability())

    @property
    def attention(self) -> str:
        """The attention implementation the loaded model runs (``sdpa``, ``eager``, ...).

        Not part of the snapshot: kernels change the last bits of a score as the batch's
        shape does (see :meth:`rerun_identity`), not what the judge is.
        """
        config = getattr(self.model, "config", None)
        return str(getattr(config, "_attn_implementation", None) or "default")

    # -- tokenizer facts -------------------------------------------------------------------


    # -- prompting -----------------------------------------------------------------------

    def _prompt(self, request: JudgeRequest) -> tuple[str, list[Any]]:
        """Render messages with the chat template when the model has one, else plain text."""
        import io

        from PIL import Image

        from capjudge.media_check import read_verified

        # The verified bytes, not the path: the model sees exactly what ingest hashed.
        images = [Image.open(io.BytesIO(read_verified(p))).convert("RGB")
                  for m in request.messages for p in m.parts if isinstance(p, ImagePart)]
        template_owner = self.processor if self.is_vlm else self.tokenizer
        if getattr(template_owner, "chat_template", None):
            messages: list[ChatMessage] = []
            for m in request.messages:
                if self.is_vlm:
                    content: list[ContentPart] = [
                        {"type": "image"} if isinstance(p, ImagePart)
                               else {"type": "text", "text": p} for p in m.parts]
                    messages.append({"role": m.role, "content": content})
                else:
                    messages.append({"role": m.role, "content": m.text()})
            text = template_owner.apply_chat_template(messages, add_generation_prompt=True,
                                                      tokenize=False)
            return str(text), images
        # A base model: plain text, ending where the answer should begin.
        chunks = [m.text().strip() for m in request.messages if m.role != "assistant"]
        return "\n\n".join(chunks) + "\n\nResponse:\n", images

    def _encode(self, prompts: list[str], images: list[list[Any]]) -> Any:
        if self.is_vlm and any(images):
            return self.processor(text=prompts, images=[i for i in images if i] or None,
                                  return_tensors="pt", padding=True).to(self.device)
        return self.tokenizer(prompts, return_tensors="pt", padding=True,
                              add_special_tokens=not self._template_adds_bos()
                              ).to(self.device)

    def _template_adds_bos(self) -> bool:
        owner = self.processor if self.is_vlm else self.tokenizer
        template = getattr(owner, "chat_template", None) or ""
        return "bos_token" in template

    # -- generation ----------------------------------------------------------------------

    @computes
    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        """Answer a batch on the local model; per request a response or the error it raised.

        Likelihood requests (with ``continuations``) are scored; the rest are generated
        greedily in one padded batch and their score slots read. A text-only model fails
        requests with images; a request whose scoring fails gets a non-transient error.
        """
        out: list[JudgeResponse | BackendError] = []
        runnable: list[int] = []
        scoring = [i for i, r in enumerate(requests) if r.continuations]
        if scoring:
            answered = self._likelihood_requests([requests[i] for i in scoring])
            rest = [i for i, r in enumerate(requests) if not r.continuations]
            generated = self.generate([requests[i] for i in rest]) if rest else []
            merged: list[JudgeResponse | BackendError] = [
                BackendError("pending", transient=False)] * len(requests)
            for i, a in zip(scoring, answered, strict=True):
                merged[i] = a
            for i, g in zip(rest, generated, strict=True):
                merged[i] = g
            return merged
        for i, r in enumerate(requests):
            if r.needs_vision and not self.is_vlm:
                out.append(BackendError(f"{self.backend_id} is text-only: it cannot see images",
                                        transient=False))
            else:
                out.append(BackendError("pending", transient=False))
                runnable.append(i)
        if not runnable:
            return out
        rendered = {i: self._prompt(requests[i]) for i in runnable}
        extras = {i: self._row_vision(*rendered[i]) for i in runnable}
        lengths = {i: self._prompt_tokens(rendered[i][0], extras[i]) for i in runnable}
        # Sorted by prompt length and cut where padding would waste compute or the batch's
        # tokens would pass the budget: a batch holds rows of similar length.
        order = sorted(runnable, key=lambda i: (lengths[i], i))
        widths = [lengths[i] for i in order]
        held = [lengths[i] + requests[i].decoding.max_tokens for i in order]
        for lo, hi in buckets(widths, self.max_generate_tokens, held):
            rows = order[lo:hi]
            self._generate_rows(requests, rows, rendered, extras, out)
        return out

    def _prompt_tokens(self, prompt: str, extras: dict[str, object]) -> int:
        """A rendered prompt's length in tokens (image tokens included, as its processor says)."""
        given = extras.get("_prompt_length")
        if isinstance(given, int):
            return given
        return len(self.tokenizer(prompt, add_special_tokens=not self._template_adds_bos()
                                  )["input_ids"])

    def _generate_rows(self, requests: Sequence[JudgeRequest], rows: list[int],
                       rendered: Mapping[int, tuple[str, list[Any]]],
                       extras: Mapping[int, dict[str, object]],
                       out: list[JudgeResponse | BackendError]) -> None:
        """Generate ``rows`` of ``requests`` as one padded batch and read their score slots."""
        import torch

        max_new = max(requests[i].decoding.max_tokens for i in rows)
        enc = self._encode([rendered[i][0] for i in rows], [rendered[i][1] for i in rows])
        with torch.inference_mode():
            answer = self.model.generate(**enc, max_new_tokens=max_new, do_sample=False,
                                         pad_token_id=self.tokenizer.pad_token_id,
                                         return_dict_in_generate=True)
        generated = answer.sequences
        width = enc["input_ids"].shape[1]
        # The slots' contexts are inside what generation fed: its cache is reused for them.
        prefixes = row_prefixes(answer.past_key_values, generated, enc["attention_mask"],
                                self._rope_deltas()) if self.share_generated else None
        for row, i in enumerate(rows):
            request = requests[i]
            mask = enc["attention_mask"][row].bool()
            prompt_ids = enc["input_ids"][row][mask].tolist()
            new_ids = generated[row, width:].tolist()
            new_ids = self._trim(new_ids)[: request.decoding.max_tokens]
            try:
                row_extras = dict(extras[i])
                if prefixes is not None and prefixes[row] is not None:
                    row_extras["_row_prefix"] = prefixes[row]
                out[i] = self._score(request, prompt_ids, new_ids, row_extras)
            except Exception as exc:  # noqa: BLE001 - one bad item must not sink the batch
                log.exception("scoring failed")
                out[i] = BackendError(f"scoring failed: {type(exc).__name__}: {exc}",
                                      transient=False)

    # -- likelihood scoring ----------------------------------------------------------------


    # -- exact distributions ---------------------------------------------------------------


def default_threads() -> int:
    """Threads for a local model: the cores this process may run on.

    ``CAPJUDGE_THREADS`` overrides; else the CPU affinity set (taskset, cgroup cpusets), which
    is what the stage owns, not every core of the machine.
    """
    if os.environ.get("CAPJUDGE_THREADS"):
        return max(1, int(os.environ["CAPJUDGE_THREADS"]))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def default_device() -> str:
    """``cuda`` when a GPU is visible, else ``cpu`` (``CAPJUDGE_DEVICE`` overrides)."""
    if os.environ.get("CAPJUDGE_DEVICE"):
        return os.environ["CAPJUDGE_DEVICE"]
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"

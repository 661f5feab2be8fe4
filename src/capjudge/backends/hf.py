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
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capjudge.backends.base import Backend, Capabilities, RerunIdentity, int_option
from capjudge.backends.compute_thread import computes
from capjudge.backends.generated_prefix import RowPrefix, row_prefixes
from capjudge.backends.packing import CONTEXT, Pack, buckets, pack_paths, plan_packs
from capjudge.protocol import (
    BackendError,
    BackendFacts,
    ChatMessage,
    ContentPart,
    ImagePart,
    JudgeRequest,
    JudgeResponse,
    ScoreSlot,
    SlotResult,
    Usage,
    worst_status,
)
from capjudge.reading import confirmed, contract_fields, find_printed, needs_confirmation
from capjudge.scoring import normalise

# Nodes per row of a context pass (contexts as one trie): fuller rows, fewer passes.
PREFIX_PACK_WIDTH = 256

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


@dataclass
class TreeStats:
    """How much work one distribution took (for the benchmark and the logs)."""

    forward_passes: int = 0
    rows: int = 0
    tokens: int = 0  # token positions fed to the model (padding included)
    # The masked tree's first distribution against the level walk's (largest relative
    # difference over the values that carry weight).
    tree_check_gap: float | None = None
    # The first score read on generation's cache against re-encoding (largest difference
    # of a non-negligible token's log-probability).
    sharing_check_gap: float | None = None


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


class HFBackend(Backend):
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

    def _load(self, torch_dtype: Any) -> None:
        """Load the processor (VLMs), tokenizer and model; left padding, digit token ids.

        On a GPU the weights go straight to it (``device_map``: the device, or ``auto``
        across the visible GPUs), never through a full copy in CPU memory.
        """
        placement: dict[str, Any] = {}
        if self.device_map or not self.device.startswith("cpu"):
            placement["device_map"] = self.device_map or self.device
        if self._attention_asked:
            placement["attn_implementation"] = self._attention_asked
        if self.is_vlm:
            from transformers import AutoModelForImageTextToText, AutoProcessor

            self.processor = AutoProcessor.from_pretrained(self.path)
            self.tokenizer = self.processor.tokenizer
            self.model = AutoModelForImageTextToText.from_pretrained(
                self.path, dtype=torch_dtype, **placement)
        else:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            self.processor = None
            self.tokenizer = AutoTokenizer.from_pretrained(self.path)
            self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=torch_dtype,
                                                              **placement)
        if "device_map" not in placement:
            self.model.to(self.device)
        self.model.eval()
        self._prepare_tokenizer()

    def _prepare_tokenizer(self) -> None:
        """Left padding, a pad token, the digit token ids and the digit-start mask."""
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.tokenizer.padding_side = "left"
        self._digit_ids = self._single_digit_ids()
        self._digit_start = self._digit_start_mask()
        self._digit_index = None
        if self._digit_ids is not None:
            import torch

            self._digit_index = torch.tensor([self._digit_ids[str(d)] for d in range(10)],
                                             device=self.device)

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

    def _pack_linears(self, kernel: str, torch_dtype: Any, quantize: str | None) -> str:
        """The decoder's linear layers packed for oneDNN when asked or by default; the kernel.

        ``auto`` packs them on the CPU in float32 (not quantised) when this PyTorch build has
        oneDNN (``cpu_linear``: 1.1-1.4x faster layers, the same results up to float32
        rounding); ``onednn`` insists (an error where it cannot apply); ``default`` keeps
        PyTorch's own kernel.

        Returns:
            ``"onednn-packed"`` or ``"default"`` (named in :meth:`describe`).

        Raises:
            BackendError: an unknown kernel, or ``onednn`` where it cannot apply.
        """
        import torch

        from capjudge.backends import cpu_linear

        if kernel not in ("auto", "onednn", "default"):
            raise BackendError(f"linear_kernel must be auto, onednn or default, not {kernel!r}",
                               transient=False)
        fits = self.device.startswith("cpu") and torch_dtype == torch.float32 and not quantize
        if kernel == "default" or (kernel == "auto" and not fits):
            return "default"
        if not fits:
            raise BackendError("linear_kernel: onednn packs float32 weights on the CPU "
                               "(device cpu, dtype float32, not quantised)", transient=False)
        head = self.model.get_output_embeddings()
        # The text decoder only (a VLM's vision tower runs once per picture); the head is
        # read whole by the likelihood path and tied to the input embeddings.
        if cpu_linear.pack_linears(self._decoder() or self.model, skip=head):
            return "onednn-packed"
        if kernel == "onednn":
            raise BackendError("linear_kernel: this PyTorch build cannot pack linear weights "
                               "for oneDNN", transient=False)
        return "default"

    def _init_memos(self, prefix_sharing: bool, prefix_cache_size: int,
                    max_scored_positions: int) -> None:
        """The per-process memos of likelihoods and tokens, and the pass size limits."""
        # (context, text) -> (log-likelihood, tokens): a pure function of the weights, so
        # shared pairs (a reference's unconditional likelihood, scored for every candidate of
        # its image) are computed once per process.
        self._loglik_memo: dict[tuple[str, str], tuple[float, int]] = {}
        self._loglik_lock = threading.Lock()
        self._token_memo: dict[str, list[int]] = {}
        # Likelihood pairs grouped by context, each context encoded once (see loglikelihoods).
        self.prefix_sharing = bool(prefix_sharing)
        self.prefix_cache_size = max(1, int(prefix_cache_size))
        # Scored positions per application of a head applied whole (a quantised one): each
        # costs a vocabulary-sized row of logits (1 MB in fp32 for a 262k vocabulary), so
        # this bounds the memory. A plain head is applied a vocabulary slice at a time
        # (vocab_head), its memory a small buffer whatever the number of rows.
        self.max_scored_positions = max(1, int(max_scored_positions))
        # False: the head applied whole, as before slicing (benchmarks compare both).
        self.sliced_head = True
        # Tokens of context held per batched pass (each row carries its context's cache).
        self.max_batch_tokens = 8192
        # Tokens (prompt + answer) held per generation batch: its cache's memory.
        self.max_generate_tokens = 131072
        self._prefix_lru: OrderedDict[tuple[int, ...], tuple[list[tuple[Any, Any]], Any]] = \
            OrderedDict()
        self.stats = TreeStats()

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
                "share_generated": self.share_generated, "attention": self.attention}

    @property
    def attention(self) -> str:
        """The attention implementation the loaded model runs (``sdpa``, ``eager``, ...).

        Not part of the snapshot: kernels change the last bits of a score as the batch's
        shape does (see :meth:`rerun_identity`), not what the judge is.
        """
        config = getattr(self.model, "config", None)
        return str(getattr(config, "_attn_implementation", None) or "default")

    # -- tokenizer facts -------------------------------------------------------------------

    def _single_digit_ids(self) -> dict[str, int] | None:
        """Digit -> token id when every digit is one token and numbers split into digits.

        SentencePiece tokenizers (Llama 2, LLaVA) write a word-start marker before a digit
        that opens the text: "8" alone encodes as "▁", "8". The digit's own token is what
        follows "$" in "$85" ("▁$", "8", "5"), so the ids are checked in that context.
        """
        ids: dict[str, int] = {}
        unk = self.tokenizer.unk_token_id
        for d in "0123456789":
            enc = self.tokenizer.encode(d, add_special_tokens=False)
            if len(enc) != 1:
                token_id = self.tokenizer.convert_tokens_to_ids(d)
                if not isinstance(token_id, int) or token_id == unk:
                    return None
                enc = [token_id]
            ids[d] = enc[0]
        if self.tokenizer.encode("$85", add_special_tokens=False)[-2:] != [ids["8"], ids["5"]]:
            return None
        return ids

    def _value_ids(self, value: int) -> list[int]:
        """The tokens a value is written with right after an anchor.

        For "$85": the digits, never a SentencePiece "▁" that only a text-initial number gets.
        """
        if self._digit_ids is not None and value >= 0:
            return [self._digit_ids[d] for d in str(value)]
        # transformers is untyped here (ignore_missing_imports); encode returns token ids.
        head: list[int] = self.tokenizer.encode("$", add_special_tokens=False)
        full: list[int] = self.tokenizer.encode(f"${value}", add_special_tokens=False)
        if full[:len(head)] == head:
            return full[len(head):]
        alone: list[int] = self.tokenizer.encode(str(value), add_special_tokens=False)
        return alone

    def _digit_start_mask(self) -> Any:
        """Boolean mask over the vocabulary: tokens whose text starts with a digit.

        Such tokens continue a number. A leading-space marker (SentencePiece ``▁``, byte-level
        ``Ġ``) does not count as a digit start.
        """
        import torch

        tokens = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        mask = torch.tensor([bool(t) and t[0].isdigit() for t in tokens], dtype=torch.bool)
        size = self.model.get_output_embeddings().weight.shape[0]
        if mask.shape[0] < size:  # embedding matrices are often padded past the tokenizer
            mask = torch.cat([mask, torch.zeros(size - mask.shape[0], dtype=torch.bool)])
        return mask[:size].to(self.device)

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

    def _likelihood_requests(self, requests: Sequence[JudgeRequest]
                             ) -> list[JudgeResponse | BackendError]:
        """Answer likelihood requests: per (context, text) pair, log p(text | context)."""
        if not self.capabilities.likelihood:
            return [BackendError(f"{self.backend_id} cannot score likelihoods (a VLM here)",
                                 transient=False) for _ in requests]
        pairs = sorted({pair for r in requests for pair in r.continuations})
        try:
            scores = dict(zip(pairs, self.loglikelihoods(pairs), strict=True))
        except Exception as exc:  # noqa: BLE001 - reported per request, never a crash
            log.exception("likelihood scoring failed")
            return [BackendError(f"likelihood scoring failed: {type(exc).__name__}: {exc}",
                                 transient=False) for _ in requests]
        out: list[JudgeResponse | BackendError] = []
        for r in requests:
            values = [scores[p] for p in r.continuations]
            tokens = sum(n for _, n in values)
            out.append(JudgeResponse(
                status="ok", logliks=[v for v, _ in values], lengths=[n for _, n in values],
                usage=Usage(prompt_tokens=tokens, completion_tokens=0),
                model=Path(self.path).name, system_fingerprint=self.snapshot()))
        return out

    @computes
    def loglikelihoods(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, int]]:
        """``(sum of log p(token), number of tokens)`` of each text after its context.

        The text's tokens are those the joint ``context + text`` encoding adds after the
        context's own tokens (so a leading space is scored as the tokenizer writes it). Every
        pair is computed once per process (memoised): a reference's unconditional likelihood
        is asked for every candidate of its picture, and the judge's modes share their pairs.

        With ``prefix_sharing`` (the default) the pairs are grouped by context: each distinct
        context is encoded once (the call's new contexts as one token trie, their shared
        opening words fed once) and its key/value cache kept (a small LRU across calls, so a
        picture's references and the neutral context are not re-encoded by the next batch);
        the group's texts are then packed as token tries over that cache (``packing``): a
        token several texts start with is fed and put through the head once, and a text's
        last token is scored without being fed.
        Without it every pair is encoded whole in a left-padded batch (the path before
        prefix sharing; same numbers within float noise).
        """
        with self._loglik_lock:
            todo = list(dict.fromkeys(p for p in pairs if p not in self._loglik_memo))
            if todo:
                encoded = [self._pair_ids(context, text) for context, text in todo]
                if self.prefix_sharing:
                    self._score_shared(todo, encoded)
                else:
                    self._score_padded(todo, encoded)
            return [self._loglik_memo[p] for p in pairs]

    def clear_memo(self) -> None:
        """Forget memoised likelihoods and cached contexts (benchmarks compare cold runs)."""
        with self._loglik_lock:
            self._loglik_memo.clear()
            self._prefix_lru.clear()
            self._token_memo.clear()

    def _pair_ids(self, context: str, text: str) -> tuple[list[int], int]:
        """The joint encoding of ``context + text`` and where the text's tokens start."""
        bos = [self.tokenizer.bos_token_id] if self.tokenizer.bos_token_id is not None else []
        ctx = bos + self._encode_text(context)
        full = bos + self._encode_text(context + text)
        keep = 0
        while keep < min(len(ctx), len(full)) and ctx[keep] == full[keep]:
            keep += 1
        return full, max(1, keep)  # the first scored token needs at least one token before it

    def _encode_text(self, text: str) -> list[int]:
        """Token ids of a text, memoised (the same contexts come back for every pair)."""
        ids = self._token_memo.get(text)
        if ids is None:
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(self._token_memo) > 50_000:
                self._token_memo.clear()
            self._token_memo[text] = ids
        return list(ids)

    def _score_padded(self, todo: list[tuple[str, str]],
                      encoded: list[tuple[list[int], int]]) -> None:
        """Every pair encoded whole, left-padded, ``max_batch`` rows per pass.

        Only the text positions go through the vocabulary head (a 262k-word vocabulary makes
        it the cost), with the shared path's head (``vocab_head``); a model without a
        separable head keeps only those positions' logits (``logits_to_keep``).
        """
        import torch

        order = sorted(range(len(todo)), key=lambda k: len(encoded[k][0]))
        batch = max(1, self.capabilities.max_batch)
        decoder = self._decoder() if self.sliced_head else None
        picks = _Picks()  # every pass's scored positions, for one application of the head
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(order), batch):
            rows = order[start:start + batch]
            width = max(len(encoded[k][0]) for k in rows)
            scored = max(len(encoded[k][0]) - encoded[k][1] for k in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for r, k in enumerate(rows):
                full = encoded[k][0]
                ids[r, width - len(full):] = torch.tensor(full)
                mask[r, width - len(full):] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            self.stats.forward_passes += 1
            self.stats.rows += len(rows)
            self.stats.tokens += len(rows) * width
            if decoder is not None:
                # Hidden states now; the head (the shared path's: one vocabulary slice at a
                # time, the target's logit an exact dot product) once after the last pass.
                with torch.inference_mode():
                    hidden = decoder(input_ids=ids.to(self.device),
                                     attention_mask=mask.to(self.device),
                                     position_ids=positions.to(self.device)).last_hidden_state
                for r, k in enumerate(rows):
                    full, keep = encoded[k]
                    # Left-padded: token t of the row sits at width - len(full) + t and is
                    # predicted one position before.
                    at = [width - len(full) + t - 1 for t in range(keep, len(full))]
                    picks.add(hidden[r, at], full[keep:], [k] * len(at))
                continue
            with torch.inference_mode():
                logits = self.model(input_ids=ids.to(self.device),
                                    attention_mask=mask.to(self.device),
                                    position_ids=positions.to(self.device),
                                    logits_to_keep=scored + 1).logits.float()
            logprobs = torch.log_softmax(logits[:, :-1], dim=-1)  # predicts the last `scored`
            for r, k in enumerate(rows):
                full, keep = encoded[k]
                n = len(full) - keep
                targets = torch.tensor(full[keep:], device=logprobs.device)
                picked = logprobs[r, scored - n:, :].gather(-1, targets[:, None])[:, 0]
                self._loglik_memo[todo[k]] = (float(picked.sum()), n)
        if decoder is not None:
            totals = self._apply_head(picks)
            for k in order:
                full, keep = encoded[k]
                self._loglik_memo[todo[k]] = (totals.get(k, 0.0), len(full) - keep)

    def _score_shared(self, todo: list[tuple[str, str]],
                      encoded: list[tuple[list[int], int]]) -> None:
        """Pairs grouped by context: each context encoded once, then every text over it.

        Two kinds of pass: the contexts not already cached (as a trie, ``_prefix_states``);
        then the texts, packed as token tries (``packing``): a row holds many
        texts of one context over that context's key/value cache, each node fed once and
        masked to see the context, its ancestors and itself only (rows with shorter contexts
        have the gap masked out, and every node its own position id).
        """
        decoder = self._decoder()
        window = getattr(self._text_config(), "sliding_window", None)
        groups: dict[str, list[int]] = {}
        for k, (context, _) in enumerate(todo):
            groups.setdefault(context, []).append(k)
        plans: list[tuple[tuple[int, ...], list[int]]] = []
        whole: list[int] = []  # pairs the shared path cannot take
        for members in groups.values():
            # The tokens every member shares with the context's own encoding (a text whose
            # first token merges with the context's last one re-reads that token itself).
            shared = max(1, min(encoded[k][1] for k in members))
            longest = max(len(encoded[k][0]) for k in members)
            # One mask serves every layer, so a sliding-window layer sees what a full one
            # does: exact only while no row reaches past the window (context, gap and pack).
            if decoder is None or (window and 2 * longest >= window - 1):
                whole += members
            else:
                plans.append((tuple(encoded[members[0]][0][:shared]), members))
        if whole:
            self._score_padded([todo[k] for k in whole], [encoded[k] for k in whole])
        if not plans:
            return
        texts = []
        for prefix, members in plans:
            mine = []
            for k in members:
                full, begin = encoded[k]
                if len(full) == begin:  # the text adds no token
                    self._loglik_memo[todo[k]] = (0.0, 0)
                else:
                    mine.append((k, full[len(prefix):], begin - len(prefix)))
            texts.append((prefix, mine))
        widest = None
        if window:
            widest = max(1, window - 2 - max(len(prefix) for prefix, _ in plans))
        packs, passes = plan_packs(texts, self.max_batch_tokens, widest)
        states = self._prefix_states([prefix for prefix, _ in plans])
        picks = _Picks()
        for pack in packs:  # first tokens: read at the context's last position
            for node, target, pair in pack.scored:
                if node == CONTEXT:
                    picks.add_prefix(pack.prefix, states[pack.prefix][1], target, pair)
        for lo, hi in passes:
            self._score_packs(packs[lo:hi], states, decoder, picks)
        # The vocabulary head once over every scored position of the call: hundreds of rows
        # at a time make it arithmetic-bound rather than bound by reading its weights.
        totals = self._apply_head(picks)
        for _, mine in texts:
            for k, _, _ in mine:
                self._loglik_memo[todo[k]] = (totals.get(k, 0.0),
                                              len(encoded[k][0]) - encoded[k][1])

    def _prefix_states(self, prefixes: list[tuple[int, ...]]
                       ) -> dict[tuple[int, ...], tuple[list[tuple[Any, Any]], Any]]:
        """Per prefix: its per-layer (keys, values) and its last position's hidden state.

        The hidden state predicts a text's first token; the head is applied to it with the
        rest of the call's scored positions (``_apply_head``).

        Prefixes seen before come from a small LRU (the neutral context is the same for every
        text of the run; a picture's references are the context of all its candidates); the
        others are encoded as one token trie (``packing.pack_paths``; the prompt's opening
        words, the same in every context, fed once), each keeping the keys and values of its
        own path.
        """
        import torch

        out: dict[tuple[int, ...], tuple[list[tuple[Any, Any]], Any]] = {}
        missing = []
        for prefix in prefixes:
            hit = self._prefix_lru.get(prefix)
            if hit is not None:
                self._prefix_lru.move_to_end(prefix)
                out[prefix] = hit
            elif prefix not in missing:
                missing.append(prefix)
        if not missing:
            return out
        # As one trie: the prompt's opening words (the same for every context) fed once.
        window = getattr(self._text_config(), "sliding_window", None)
        # A pass's cache stays inside the window (the caller checked the prefixes' lengths).
        cap = min(PREFIX_PACK_WIDTH, window - 2) if window else PREFIX_PACK_WIDTH
        width = max(cap, max(len(p) for p in missing))
        packed = sorted(pack_paths(missing, width), key=lambda x: len(x[0]))
        sizes = [len(pack) for pack, _ in packed]
        for lo, hi in buckets(sizes, self.max_batch_tokens, sizes):
            chunk = packed[lo:hi]
            ids, positions, mask = self._tree_inputs([pack for pack, _ in chunk])
            with torch.inference_mode():
                result = self._decoder()(input_ids=ids, attention_mask=mask,
                                         position_ids=positions, use_cache=True)
                hidden = result.last_hidden_state
                layers = [(k, v) for k, v, *_ in result.past_key_values]
            self.stats.forward_passes += 1
            self.stats.rows += len(chunk)
            self.stats.tokens += ids.numel()
            for r, (pack, ends) in enumerate(chunk):
                for k, node in ends:
                    # The keys and values of the context's own path, in order: each node was
                    # fed at its depth, so these are what encoding it alone gives.
                    at = torch.tensor(pack.path(node), device=self.device)
                    state = ([(key[r:r + 1, :, at].clone(), value[r:r + 1, :, at].clone())
                              for key, value in layers], hidden[r, node].clone())
                    out[missing[k]] = state
                    self._prefix_lru[missing[k]] = state
                    while len(self._prefix_lru) > self.prefix_cache_size:
                        self._prefix_lru.popitem(last=False)
        return out

    def _tree_inputs(self, packs: list[Pack]) -> tuple[Any, Any, Any]:
        """Input ids, position ids and the 4D attention mask of one pass over ``packs``.

        Row r holds pack r's nodes after a past of the longest prefix of the pass: its own
        prefix in ``[0, c_r)``, then a masked gap. A node sees the prefix, its ancestors and
        itself (what the sequence it ends would see alone) at position ``c_r + depth``.
        """
        import torch

        context = max(len(p.prefix) for p in packs)
        width = max(len(p) for p in packs)
        pad = self.tokenizer.pad_token_id
        ids = torch.full((len(packs), width), pad, dtype=torch.long)
        positions = torch.zeros((len(packs), width), dtype=torch.long)
        allowed = torch.zeros((len(packs), width, context + width), dtype=torch.bool)
        for r, pack in enumerate(packs):
            n, c = len(pack), len(pack.prefix)
            ids[r, :n] = torch.tensor(pack.tokens)
            positions[r, :n] = c + torch.tensor(pack.depths)
            positions[r, n:] = c
            allowed[r, :, :c] = True
            tree = allowed[r, :, context:]
            for i, parent in enumerate(pack.parents):
                if parent != CONTEXT:
                    tree[i] = tree[parent]
                tree[i, i] = True
            if c == 0:  # a padding row that sees nothing would be NaN
                tree[n:, 0] = True
        dtype = self.model.dtype if self.model.dtype.is_floating_point else torch.float32
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(
            ~allowed, torch.finfo(dtype).min)[:, None]
        return ids.to(self.device), positions.to(self.device), mask.to(self.device)

    def _head_logprobs(self, head: Any, hidden: Any) -> Any:
        """Log-softmax of the vocabulary head over hidden states (soft-capped if the model is)."""
        import torch

        logits = head(hidden).float()
        cap = getattr(self._text_config(), "final_logit_softcapping", None)
        if cap:  # Gemma 2 style soft-capping, as the model's own forward applies it
            logits = torch.tanh(logits / cap) * cap
        return torch.log_softmax(logits, dim=-1)

    def _score_packs(self, packs: list[Pack],
                     states: dict[tuple[int, ...], tuple[list[tuple[Any, Any]], Any]],
                     decoder: Any, picks: _Picks) -> None:
        """One pass: every pack (a trie of texts) over its own context's cache.

        The hidden states of the nodes that predict a scored token go to ``picks`` (once per
        node, however many texts share it), with their targets.
        """
        import torch
        from transformers import DynamicCache

        context = max(len(p.prefix) for p in packs)
        n_rows = len(packs)
        ids, positions, mask = self._tree_inputs(packs)
        layers = []
        first = states[packs[0].prefix][0]
        for layer in range(len(first)):
            k0, v0 = first[layer]
            keys = k0.new_zeros((n_rows, k0.shape[1], context, k0.shape[3]))
            values = v0.new_zeros((n_rows, v0.shape[1], context, v0.shape[3]))
            for r, pack in enumerate(packs):
                k, v = states[pack.prefix][0][layer]
                keys[r, :, :k.shape[2]] = k[0]
                values[r, :, :v.shape[2]] = v[0]
            layers.append((keys, values))
        past = DynamicCache(ddp_cache_data=layers, config=self.model.config)
        # The nodes whose hidden state predicts a scored token, each once.
        at: dict[tuple[int, int], int] = {}
        rows, targets, pairs = [], [], []
        for r, pack in enumerate(packs):
            for node, target, pair in pack.scored:
                if node != CONTEXT:
                    rows.append(at.setdefault((r, node), len(at)))
                    targets.append(target)
                    pairs.append(pair)
        with torch.inference_mode():
            hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=positions,
                             past_key_values=past, use_cache=True).last_hidden_state
            if at:
                index = torch.tensor(list(at), device=self.device)
                picks.add(hidden[index[:, 0], index[:, 1]], targets, pairs, rows)
        self.stats.forward_passes += 1
        self.stats.rows += n_rows
        self.stats.tokens += ids.numel()

    def _apply_head(self, picks: _Picks) -> dict[int, float]:
        """Sum of log p(token) per pair over every collected position."""
        import torch

        from capjudge.backends.vocab_head import target_logprobs

        if not picks.targets:
            return {}
        with torch.inference_mode():
            logp = target_logprobs(
                self.model.get_output_embeddings(), torch.cat(picks.hidden),
                torch.tensor(picks.targets, device=self.device),
                torch.tensor(picks.rows, device=self.device),
                softcap=getattr(self._text_config(), "final_logit_softcapping", None),
                block=self.max_scored_positions, sliced=self.sliced_head).tolist()
        totals: dict[int, float] = {}
        for k, v in zip(picks.pairs, logp, strict=True):
            totals[k] = totals.get(k, 0.0) + v
        return totals

    def _decoder(self) -> Any:
        """The model without its vocabulary head (None when it has no separable one)."""
        try:
            decoder = self.model.get_decoder()
        except (AttributeError, NotImplementedError):
            return None
        if decoder is None or decoder is self.model or \
                self.model.get_output_embeddings() is None:
            return None
        return decoder

    def _text_config(self) -> Any:
        config = self.model.config
        return getattr(config, "text_config", None) or config

    def _trim(self, ids: list[int]) -> list[int]:
        """The generated ids up to the first special token.

        End of turn, padding, an image placeholder: nothing an answer's text holds (and a VLM
        re-fed an image token it wrote counts one image too many).
        """
        stop = {self.tokenizer.eos_token_id, self.tokenizer.pad_token_id,
                *getattr(self.tokenizer, "all_special_ids", ())}
        for k, t in enumerate(ids):
            if t in stop:
                return ids[:k]
        return ids

    def _row_vision(self, prompt: str, images: list[Any]) -> dict[str, object]:
        """The model's non-text inputs for one row, as its processor makes them.

        A VLM needs them again when the row's context is re-encoded for the score
        distribution. Families lay their images out differently (LLaVA: one ``pixel_values``
        entry per image; Qwen2-VL: every patch concatenated, with ``image_grid_thw``;
        Idefics3: a ``pixel_attention_mask``; Gemma 3: ``token_type_ids`` per token), so the
        processor is asked for this row alone rather than the batch's tensors being sliced.
        """
        if not images or self.processor is None:
            return {}
        enc = self.processor(text=[prompt], images=images, return_tensors="pt")
        length = int(enc["input_ids"].shape[1])
        extras: dict[str, object] = {"_prompt_length": length}
        for key, value in enc.items():
            if key in ("input_ids", "attention_mask") or value is None:
                continue
            extras[key] = value.to(self.device) if hasattr(value, "to") else value
        return extras

    def _score(self, request: JudgeRequest, prompt_ids: list[int], new_ids: list[int],
               extras: dict[str, object]) -> JudgeResponse:
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        slots = []
        for slot in request.slots:
            context, forced, printed = self._slot_context(slot, prompt_ids, new_ids, text)
            result = self._teacher_forced(slot, context, extras, printed, forced)
            found = find_printed(text, slot)
            if forced:
                result.confirmation = "forced-anchor" if result.status != "parse_failure" \
                    else None
            elif found is not None:
                fields = contract_fields(found)
                result.confirmation, result.read_by = fields["confirmation"], fields["read_by"]
                if needs_confirmation(result):
                    # Off-contract: the distribution at the forced anchor after the whole
                    # answer must put the printed value first (capjudge.reading.confirm).
                    anchor = self._forced_context(slot, prompt_ids, new_ids)
                    second = self._teacher_forced(slot, anchor, extras, None, True)
                    result = confirmed(result, second, "forced-anchor")
            slots.append(result)
        status = worst_status([s.status for s in slots])
        reason = "; ".join(f"{s.name}: {s.reason}" for s in slots if s.reason) or None
        return JudgeResponse(status=status, text=text, slots=slots,
                             usage=Usage(len(prompt_ids), len(new_ids)),
                             model=Path(self.path).name, system_fingerprint=self.snapshot(),
                             reason=reason)

    def _teacher_forced(self, slot: ScoreSlot, context: list[int], extras: dict[str, object],
                        printed: int | float | None, forced: bool) -> SlotResult:
        """The slot's exact distribution after ``context``, with its status."""
        raw = self.distribution(context, slot.values, extras)
        probs, mass = normalise(raw, slot.values)
        result = SlotResult(slot.name, slot.values, probs, mass, "teacher_forcing", "ok",
                            None, printed, forced)
        if mass <= 0:
            result.probs, result.status = None, "parse_failure"
            result.reason = "no probability on the scale at the score position"
        elif mass < self.min_mass:
            result.status = "low_mass"
            result.reason = f"captured mass {mass:.3f} < {self.min_mass}"
        return result

    def _forced_context(self, slot: ScoreSlot, prompt_ids: list[int], new_ids: list[int]
                        ) -> list[int]:
        """Token ids up to the slot's forced anchor (after the answer, or at its start)."""
        forced = self.tokenizer.encode(slot.forced_prefix, add_special_tokens=False) \
            if slot.forced_prefix else []
        if slot.position == "first":
            return prompt_ids + forced
        return prompt_ids + new_ids + forced

    def _slot_context(self, slot: ScoreSlot, prompt_ids: list[int], new_ids: list[int],
                      text: str) -> tuple[list[int], bool, int | float | None]:
        """Token ids up to the score position, whether it was forced, and the number printed.

        The number is the one the model printed, if any.

        The position is where the model's own text wrote the number (read by the same rules as
        the API path) when its digits start at a token boundary. Otherwise it is forced and
        the row says so (``anchor_forced``): for ``"last"`` slots after the whole text and the
        slot's ``forced_prefix``, for ``"first"`` slots at the start of the answer (which is
        *not* where the model wrote its number when it wrote one later, e.g. "Rating: 4").
        """
        found = find_printed(text, slot)
        printed = found.printed if found is not None else None
        if found is not None:
            k = self._token_at(new_ids, found.start)
            if k is not None:
                return prompt_ids + new_ids[:k], False, printed
        # "first" slots: the score was asked for first, so it is read at the answer's start.
        return self._forced_context(slot, prompt_ids, new_ids), True, printed

    def _token_at(self, new_ids: list[int], cut: int) -> int | None:
        """How many generated tokens precede the digits starting at character ``cut``.

        ``cut`` is a character offset in the decoded text. The count is given when the digits
        start a token (else None).

        Tokens that add no text at that point are included: a SentencePiece "▁" that opens the
        answer before "8" decodes to nothing, yet the model wrote it, and the digit
        distribution is the one after it.
        """
        def decoded(n: int) -> int:
            return len(self.tokenizer.decode(new_ids[:n], skip_special_tokens=True))

        lo, hi = 0, len(new_ids)
        while lo < hi:  # the shortest prefix whose text reaches the digits
            mid = (lo + hi) // 2
            if decoded(mid) >= cut:
                hi = mid
            else:
                lo = mid + 1
        if decoded(lo) != cut:
            return None  # the digits start inside a token ("is85")
        while lo < len(new_ids) and decoded(lo + 1) == cut:
            lo += 1
        if lo >= len(new_ids) or not bool(self._digit_start[new_ids[lo]]):
            return None
        return lo

    # -- exact distributions ---------------------------------------------------------------

    @computes
    def distribution(self, context: list[int], values: Sequence[int],
                     extras: dict[str, object] | None = None) -> dict[int, float]:
        """Exact P(value) for each value at the end of ``context`` (not renormalised)."""
        if self._digit_ids is not None and all(v >= 0 for v in values):
            if self.tree_mask:
                try:
                    masked = self._digit_tree_masked(context, values, extras or {})
                    if self._tree_checked:
                        return masked
                    return self._check_masked_tree(masked, context, values, extras or {})
                except (RuntimeError, ValueError) as exc:
                    # A family whose forward builds its own masks (Gemma 3's sliding window
                    # and bidirectional image attention) refuses the tree's 4D mask: the
                    # level-by-level tree gives the same distribution without one.
                    log.info("%s: the masked digit tree is not supported (%s); using the "
                             "level-by-level tree", type(self.model).__name__, exc)
                    self.tree_mask = False
            return self._digit_tree(context, values, extras or {})
        return self._candidates(context, values, extras or {})

    def _check_masked_tree(self, masked: dict[int, float], context: list[int],
                           values: Sequence[int], extras: dict[str, object]
                           ) -> dict[int, float]:
        """The first masked tree of this model, checked against the level-by-level tree.

        The masked tree gives each node explicit position ids; a family whose positions are
        not token indices in a way this backend does not know (a new multimodal RoPE) would
        get a wrong distribution that looks valid. The level walk lets the model place every
        token itself, so once per loaded model the two are compared: where they differ by
        more than the numerics explain, the level walk is used from then on (and logged).
        """
        level = self._digit_tree(context, values, extras)
        self._tree_checked = True
        # The largest relative difference over the values that carry weight (a random or
        # unsure model puts little mass on the scale: an absolute gap would hide the error).
        # In half precision only the likelier values keep enough digits to compare; a
        # misplaced position moves the whole distribution, far beyond the tolerance.
        total = sum(level.values())
        floor = (1e-4 if self.numerics == "float32" else 1e-2) * total
        weighty = [v for v in values if total > 0 and level[v] >= floor]
        gap = max((abs(masked[v] - level[v]) / level[v] for v in weighty), default=0.0)
        self.stats.tree_check_gap = gap
        if self._disagrees(gap, "the masked digit tree differs from the level-by-level tree",
                           "relative", "using the level-by-level tree"):
            self.tree_mask = False
            return level
        return masked

    def _disagrees(self, gap: float, what: str, measure: str, instead: str) -> bool:
        """Whether a first-use check's ``gap`` is beyond what the numerics explain (logged).

        float32 paths agree to ~1e-6 here; half precision keeps ~3 significant digits of a
        logit, so two orders of the same sums differ by several percent.
        """
        tolerance = 1e-4 if self.numerics == "float32" else 0.25
        if gap <= tolerance:
            return False
        log.warning("%s: %s by %.3g (%s, over %.3g): %s", type(self.model).__name__, what,
                    gap, measure, tolerance, instead)
        return True

    def _rope_offset(self) -> int:
        """How far the model's text positions are from token indices after the last prefill.

        Multimodal RoPE families (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) give an image's tokens fewer
        positions than tokens and keep the difference as ``rope_deltas``; a token after the
        context sits at its index plus that offset, which the tree's explicit positions must
        carry. Other families: 0.
        """
        deltas = self._rope_deltas()
        return 0 if deltas is None else int(deltas.reshape(-1)[0])

    def _rope_holder(self) -> Any:
        """The module that keeps the multimodal RoPE offsets (Qwen-VL), or None."""
        for module in (self.model, getattr(self.model, "model", None)):
            if hasattr(getattr(module, "rope_deltas", None), "reshape"):
                return module
        return None

    def _rope_deltas(self) -> Any:
        """The model's multimodal RoPE offsets after its last prefill, or None."""
        holder = self._rope_holder()
        return None if holder is None else holder.rope_deltas

    def _set_rope_delta(self, delta: int) -> None:
        """Make the model place the next tokens at index + ``delta`` (one row's offset)."""
        import torch

        holder = self._rope_holder()
        if holder is not None:
            holder.rope_deltas = torch.tensor([[delta]], device=self.device)

    def _shared_base(self, prefix: RowPrefix, context: list[int]) -> tuple[Any, Any] | None:
        """``_base`` on generation's cache: only the tokens it lacks are fed (None: none held)."""
        import torch

        n = prefix.shared_length(context)
        if n == 0:
            return None
        past = prefix.cache(n, self.model.config)
        offset = prefix.rope_delta or 0
        positions = torch.arange(n, len(context), device=self.device)[None] + offset
        out = self.model(input_ids=torch.tensor([context[n:]], device=self.device),
                         past_key_values=past, position_ids=positions, use_cache=True,
                         logits_to_keep=1)
        if prefix.rope_delta is not None:
            # The level walk after this lets the model place its tokens: from this row's offset.
            self._set_rope_delta(prefix.rope_delta)
        self.stats.forward_passes += 1
        self.stats.rows += 1
        self.stats.tokens += len(context) - n
        return torch.log_softmax(out.logits[0, -1].float(), dim=-1), out.past_key_values

    def _base(self, context: list[int], extras: dict[str, object]) -> tuple[Any, Any]:
        import torch

        prefix = extras.get("_row_prefix")
        if isinstance(prefix, RowPrefix) and self.share_generated:
            shared = self._shared_base(prefix, context)
            if shared is not None:
                if self._sharing_checked:
                    return shared
                return self._check_sharing(shared, context, extras)
        ids = torch.tensor([context], device=self.device)
        # Only the last position's logits are needed: projecting every position onto a 262k
        # vocabulary would cost more than the transformer itself.
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1,
                         **self._fit_extras(extras, len(context)))
        self.stats.forward_passes += 1
        self.stats.rows += 1
        self.stats.tokens += len(context)
        return torch.log_softmax(out.logits[0, -1].float(), dim=-1), out.past_key_values

    def _check_sharing(self, shared: tuple[Any, Any], context: list[int],
                       extras: dict[str, object]) -> tuple[Any, Any]:
        """The first distribution read on generation's cache, checked against re-encoding.

        Once per loaded model: a family whose cache or positions do not continue the way
        assumed here (a new position scheme, a cache that is not what encoding the row alone
        gives) would read wrong distributions that look valid; where the two differ by more
        than the numerics explain, the context is re-encoded from then on (and logged).
        """
        self._sharing_checked = True
        alone = {k: v for k, v in extras.items() if k != "_row_prefix"}
        root, cache = self._base(context, alone)
        # Log-probabilities of every token that is not negligible: a small shift there moves
        # the digit distribution built on it (a probability gap would hide it). In half
        # precision only the likelier tokens keep enough digits to compare.
        weighty = root > math.log(1e-6 if self.numerics == "float32" else 1e-3)
        gap = float((shared[0][weighty] - root[weighty]).abs().max())
        self.stats.sharing_check_gap = gap
        if self._disagrees(gap, "reading a score on generation's cache differs from "
                           "re-encoding the context", "largest log-probability difference",
                           "contexts are re-encoded"):
            self.share_generated = False
            return root, cache
        return shared

    @staticmethod
    def _fit_extras(extras: dict[str, object], length: int) -> dict[str, object]:
        """The row's vision inputs for a context of ``length`` tokens.

        Per-token inputs (``token_type_ids``, ``mm_token_type_ids``: one entry per prompt
        token) are extended with zeros ("text") over the tokens after the prompt.
        """
        import torch

        given = extras.get("_prompt_length")
        prompt = given if isinstance(given, int) else -1
        out: dict[str, object] = {}
        for key, value in extras.items():
            if key in ("_prompt_length", "_row_prefix"):
                continue
            if isinstance(value, torch.Tensor) and value.dim() == 2 and \
                    value.shape[0] == 1 and value.shape[1] == prompt and length > prompt:
                value = torch.cat([value, value.new_zeros((1, length - prompt))], dim=1)
            out[key] = value
        return out

    def _summaries(self, logp: Any) -> list[tuple[list[float], float]]:
        """Per row of next-token log-probs: the ten digits' log-probs and P(the number ends).

        Computed on the model's device and brought back in one transfer: the tree reads a few
        numbers per node, and reading them one by one costs a device sync each (hundreds per
        0-100 distribution on a GPU).
        """
        import torch

        rows = logp if logp.dim() == 2 else logp[None]
        merged = torch.cat([rows[:, self._digit_index], self._end_probs(rows)[:, None]],
                           dim=1).tolist()
        return [(row[:10], row[10]) for row in merged]

    def _end_probs(self, rows: Any) -> Any:
        """Per row of log-probs: P(the number ends) = 1 - P(next token starts with a digit)."""
        return (1.0 - rows.exp()[:, self._digit_start].sum(dim=-1)).clamp(min=0.0)

    def _end_prob(self, logp: Any) -> float:
        """P(the number ends here), for one row of next-token log-probs."""
        return float(self._end_probs(logp[None])[0])

    def _digit_tree(self, context: list[int], values: Sequence[int], extras: dict[str, object]
                    ) -> dict[int, float]:
        """Score the values' digits level by level, reusing cached rows.

        Each digit prefix is one row fed *one* token on top of its parent's cached row, so the
        context is encoded once and every level is a single small pass.
        """
        import torch

        assert self._digit_ids is not None
        digit = self._digit_ids
        strings = [str(v) for v in values]
        longest = max(len(s) for s in strings)
        prefixes = {s[:k] for s in strings for k in range(1, len(s) + 1)}
        # After each digit prefix: the next digit's log-probs and P(the number ends there).
        after: dict[str, tuple[list[float], float]] = {}

        def path_logp(prefix: str) -> float:
            return sum(after[prefix[:k]][0][int(prefix[k])] for k in range(len(prefix)))

        threshold = math.log(self.prune) if self.prune > 0 else -math.inf
        with torch.inference_mode():
            root, cache = self._base(context, extras)
            after[""] = self._summaries(root)[0]
            frontier: dict[str, tuple[Any, int]] = {"": (cache, 0)}  # prefix -> (cache, row)
            for length in range(1, longest + 1):
                # A subtree already below the threshold is not expanded: its values count as
                # lost mass (at most `prune` each), never as a guess.
                level = sorted(p for p in prefixes if len(p) == length
                               and p[:-1] in frontier and path_logp(p) >= threshold)
                parents_next = {q[:-1] for q in prefixes if len(q) == length + 1}
                next_frontier: dict[str, tuple[Any, int]] = {}
                groups: dict[int, list[str]] = {}
                for p in level:
                    groups.setdefault(id(frontier[p[:-1]][0]), []).append(p)
                for group in groups.values():
                    for start in range(0, len(group), self.max_tree_rows):
                        chunk = group[start:start + self.max_tree_rows]
                        parent_cache = frontier[chunk[0][:-1]][0]
                        past = copy.deepcopy(parent_cache)
                        rows = torch.tensor([frontier[p[:-1]][1] for p in chunk],
                                            device=self.device)
                        past.batch_select_indices(rows)
                        ids = torch.tensor([[digit[p[-1]]] for p in chunk], device=self.device)
                        out = self.model(input_ids=ids, past_key_values=past, use_cache=True,
                                         logits_to_keep=1)
                        self.stats.forward_passes += 1
                        self.stats.rows += len(chunk)
                        logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
                        keep = [i for i, p in enumerate(chunk) if p in parents_next]
                        for p, summary in zip(chunk, self._summaries(logp), strict=True):
                            after[p] = summary
                        if keep:  # only rows that have children stay in memory
                            past.batch_select_indices(torch.tensor(keep, device=self.device))
                            for j, i in enumerate(keep):
                                next_frontier[chunk[i]] = (past, j)
                frontier = next_frontier
        out_probs: dict[int, float] = {}
        for s, v in zip(strings, values, strict=True):
            out_probs[v] = (math.exp(path_logp(s)) * after[s][1]) if s in after else 0.0
        return out_probs

    def _digit_tree_masked(self, context: list[int], values: Sequence[int],
                           extras: dict[str, object]) -> dict[int, float]:
        """The digit tree in two passes: the context, then every digit prefix at once.

        The prefixes of the scale's values ("0".."9", "10".."99", "100" for 0-100) are one
        sequence over the context's cache; a 4D attention mask lets each see the context, its
        ancestors and itself only, and its position id is its depth after the context, so each
        node's next-token distribution is the one a separate row would get. Subtrees below
        ``prune`` are cut exactly as the level-by-level walk cuts them.
        """
        import torch

        assert self._digit_ids is not None
        digit = self._digit_ids
        strings = [str(v) for v in values]
        nodes = sorted({s[:k] for s in strings for k in range(1, len(s) + 1)},
                       key=lambda p: (len(p), p))
        index = {p: i for i, p in enumerate(nodes)}
        # One pack: each prefix adds one node (its parent prefix came before it in this
        # order), so node i is nodes[i].
        pack = Pack(tuple(context))
        for p in nodes:
            pack.add_path([digit[c] for c in p])
        with torch.inference_mode():
            root, cache = self._base(context, extras)
            n = len(nodes)
            ids, positions, mask = self._tree_inputs([pack])
            positions = positions + self._rope_offset()
            decoder = self._decoder()
            if decoder is None:  # no separable head: every node's logits from the model
                out = self.model(input_ids=ids, past_key_values=cache, use_cache=True,
                                 attention_mask=mask, position_ids=positions)
                logp = torch.log_softmax(out.logits[0].float(), dim=-1)
                hidden = None
            else:
                hidden = decoder(input_ids=ids, past_key_values=cache, use_cache=True,
                                 attention_mask=mask,
                                 position_ids=positions).last_hidden_state[0]
                head = self.model.get_output_embeddings()
            self.stats.forward_passes += 1
            self.stats.rows += 1
            self.stats.tokens += n
            # After each digit prefix: the next digit's log-probs and P(the number ends).
            after: dict[str, tuple[list[float], float]] = {"": self._summaries(root)[0]}

            def path_logp(prefix: str) -> float:
                return sum(after[prefix[:k]][0][int(prefix[k])] for k in range(len(prefix)))

            threshold = math.log(self.prune) if self.prune > 0 else -math.inf
            # Level by level over the pass's hidden states: the vocabulary head (the costly
            # part) is applied only to nodes whose whole path stays above the cut, exactly the
            # nodes the level walk expands.
            for length in range(1, max(len(p) for p in nodes) + 1):
                level = [p for p in nodes if len(p) == length
                         and (length == 1 or p[:-1] in after)
                         and path_logp(p) >= threshold]
                if not level:
                    break
                rows = torch.tensor([index[p] for p in level], device=self.device)
                if hidden is None:
                    chosen = logp[rows]
                else:
                    chosen = self._head_logprobs(head, hidden[rows])
                for p, summary in zip(level, self._summaries(chosen), strict=True):
                    after[p] = summary
        out_probs: dict[int, float] = {}
        for s, v in zip(strings, values, strict=True):
            out_probs[v] = math.exp(path_logp(s)) * after[s][1] if s in after else 0.0
        return out_probs

    def _candidates(self, context: list[int], values: Sequence[int], extras: dict[str, object]
                    ) -> dict[int, float]:
        """Fallback for tokenizers with multi-digit tokens: score each value's tokens."""
        import torch

        encoded = [self._value_ids(v) for v in values]
        with torch.inference_mode():
            root, cache = self._base(context, extras)
            out: dict[int, float] = {}
            # Read the distribution after every token of every candidate (one batched pass).
            for start in range(0, len(encoded), self.max_tree_rows):
                chunk = encoded[start:start + self.max_tree_rows]
                width = max(len(e) for e in chunk)
                pad = self.tokenizer.pad_token_id
                ids = torch.tensor([e + [pad] * (width - len(e)) for e in chunk],
                                   device=self.device)
                past = copy.deepcopy(cache)
                past.batch_repeat_interleave(len(chunk))
                logits = self.model(input_ids=ids, past_key_values=past).logits
                self.stats.forward_passes += 1
                logp = torch.log_softmax(logits.float(), dim=-1)
                for row, e in enumerate(chunk):
                    total = float(root[e[0]])
                    for k in range(1, len(e)):
                        total += float(logp[row, k - 1, e[k]])
                    out[values[start + row]] = math.exp(total) * self._end_prob(
                        logp[row, len(e) - 1])
        return out

    @computes
    def naive_distribution(self, context: list[int], values: Sequence[int]) -> dict[int, float]:
        """The baseline the digit tree is measured against: one full forward per value."""
        import torch

        out: dict[int, float] = {}
        with torch.inference_mode():
            for v in values:
                tail = self._value_ids(v)
                ids = torch.tensor([context + tail], device=self.device)
                logp = torch.log_softmax(self.model(input_ids=ids).logits[0].float(), dim=-1)
                self.stats.forward_passes += 1
                n = len(context)
                total = sum(float(logp[n - 1 + k, t]) for k, t in enumerate(tail))
                out[v] = math.exp(total) * self._end_prob(logp[-1])
        return out


class _Picks:
    """The scored positions of one likelihood call, gathered for one application of the head.

    ``hidden`` holds the distinct hidden states (a context's last position once, however many
    texts follow it); each target names its hidden row and the pair it counts toward.
    """

    def __init__(self) -> None:
        self.hidden: list[Any] = []  # [n, dim] tensors
        self.size = 0  # hidden rows so far
        self.rows: list[int] = []
        self.targets: list[int] = []
        self.pairs: list[int] = []
        self._prefix_row: dict[tuple[int, ...], int] = {}

    def add(self, hidden: Any, targets: list[int], pairs: list[int],
            rows: list[int] | None = None) -> None:
        """Positions of a pass: hidden row ``rows[i]`` (default i) predicts ``targets[i]``."""
        self.hidden.append(hidden)
        self.rows += [self.size + r for r in (rows if rows is not None
                                              else range(len(targets)))]
        self.size += hidden.shape[0]
        self.targets += targets
        self.pairs += pairs

    def add_prefix(self, prefix: tuple[int, ...], hidden: Any, target: int, pair: int) -> None:
        """A text's first token, predicted by its context's last position."""
        row = self._prefix_row.get(prefix)
        if row is None:
            row = self._prefix_row[prefix] = self.size
            self.hidden.append(hidden[None])
            self.size += 1
        self.rows.append(row)
        self.targets.append(target)
        self.pairs.append(pair)


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

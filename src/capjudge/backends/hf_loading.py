"""Loading a transformers judge: weights, tokenizer, linear kernels and memos."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

from capjudge.backends.hf_state import HFState, TreeStats
from capjudge.protocol import (
    BackendError,
)

log = logging.getLogger(__name__)


class HFLoading(HFState):
    """How :class:`~capjudge.backends.hf.HFBackend` loads its model and prepares its state."""

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

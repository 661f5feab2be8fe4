"""What every part of the transformers judge shares: its loaded state and small helpers.

:class:`HFState` declares the state :class:`capjudge.backends.hf.HFBackend` loads (model,
tokenizer, processor, options, memos) and the helpers every part uses: the decoder and its text
config, the digit tokens' ids, a generated row's trimming and its vision inputs. The parts,
each a mixin with one job: :mod:`.hf_loading` (weights, tokenizer, kernels, memos),
:mod:`.hf_prefix` (a context's key/value cache, shared with generation), :mod:`.hf_likelihood`
(log-likelihoods of texts, packed), :mod:`.hf_digits` (exact score distributions: the digit
tree).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from capjudge.backends.base import Backend

log = logging.getLogger(__name__)



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



class HFState(Backend):
    """The loaded model and options every part of :class:`~capjudge.backends.hf.HFBackend` reads.

    Set by ``HFBackend.__init__`` (or ``from_loaded``) and the loading part; declared here so
    that each part is checked against the same names.
    """

    path: str
    backend_id: str
    device: str
    device_map: str | None
    dtype_option: str
    min_mass: float
    max_tree_rows: int
    prune: float
    threads: int
    tree_mask: bool
    share_generated: bool
    is_vlm: bool
    numerics: str
    linear_kernel: str
    prefix_sharing: bool
    prefix_cache_size: int
    max_scored_positions: int
    max_batch_tokens: int
    max_generate_tokens: int
    sliced_head: bool
    # transformers objects (untyped library)
    model: Any
    tokenizer: Any
    processor: Any
    stats: TreeStats
    _attention_asked: str | None
    _tree_checked: bool
    _sharing_checked: bool
    _weights: str
    _snapshot_given: str | None
    _digit_ids: dict[str, int] | None
    _digit_start: Any
    _digit_index: Any
    _loglik_lock: threading.Lock
    _loglik_memo: Any
    _token_memo: Any
    _prefix_lru: Any
    _prefix_row: Any

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

"""A context's key/value cache for the transformers judge, shared with generation's own.

The RoPE offset of families whose images take fewer positions than tokens (Qwen's
``rope_deltas``), and the check, once per loaded model, that generation's cache continues as
re-encoding would.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from capjudge.backends.generated_prefix import RowPrefix
from capjudge.backends.hf_state import HFState

log = logging.getLogger(__name__)


class HFPrefix(HFState):
    """The context cache a distribution is computed on (see the module doc)."""

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

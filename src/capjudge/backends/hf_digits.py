"""Exact score distributions with the transformers judge: the digit tree (see :mod:`.hf`)."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capjudge.backends.compute_thread import computes
from capjudge.backends.hf_likelihood import HFLikelihood
from capjudge.backends.hf_prefix import HFPrefix
from capjudge.backends.packing import Pack
from capjudge.protocol import JudgeRequest, JudgeResponse, ScoreSlot, Usage
from capjudge.reading import FOLLOW_UP_MIN_P, Answer, ResponseBase, read

log = logging.getLogger(__name__)


class HFDigits(HFPrefix, HFLikelihood):
    """Each score slot's distribution by teacher forcing, and its reading."""

    # The reading settings (capjudge.reading.read): teacher forcing gives the exact
    # distribution anywhere, so an off-contract verdict is always confirmed at its forced
    # anchor and a slot with no number written is read there; nothing is ever asked again.
    confirm = "auto"
    continue_digits = False
    follow_up_min_p = FOLLOW_UP_MIN_P
    continue_off_reason: str | None = None
    force_anchor = True
    confirm_at_anchor = True

    def confirmable(self, request: JudgeRequest) -> bool:
        """Off-contract readings are always confirmed (at the forced anchor, exactly)."""
        return True

    def _score(self, request: JudgeRequest, prompt_ids: list[int], new_ids: list[int],
               extras: dict[str, object]) -> JudgeResponse:
        """One generated answer read by :func:`capjudge.reading.read` with exact distributions."""
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        base: ResponseBase = {"usage": Usage(len(prompt_ids), len(new_ids)),
                              "model": Path(self.path).name,
                              "system_fingerprint": self.snapshot(), "latency_s": 0.0,
                              "timings": None}
        teacher = _Forcing(self, prompt_ids, new_ids, extras)
        return read(self, request, Answer(text, base), teacher).response

    def _forced_context(self, slot: ScoreSlot, prompt_ids: list[int], new_ids: list[int], *,
                        confirming: bool = False) -> list[int]:
        """Token ids up to the slot's forced anchor (:meth:`ScoreSlot.anchor_at`)."""
        after, prefix = slot.anchor_at(confirming=confirming)
        forced = self.tokenizer.encode(prefix, add_special_tokens=False) if prefix else []
        return prompt_ids + (new_ids if after else []) + forced

    def _slot_context(self, slot: ScoreSlot, prompt_ids: list[int], new_ids: list[int],
                      start: int | None) -> tuple[list[int], bool]:
        """Token ids up to the score position, and whether it was forced.

        ``start``: where the reader found the number the model printed (a character offset
        of the decoded answer; None: it found none). The position is there when its digits
        start at a token boundary. Otherwise it is forced and the row says so
        (``anchor_forced``): for ``"last"`` slots after the whole text and the slot's
        ``forced_prefix``, for ``"first"`` slots at the start of the answer (which is *not*
        where the model wrote its number when it wrote one later, e.g. "Rating: 4").
        """
        if start is not None:
            k = self._token_at(new_ids, start)
            if k is not None:
                return prompt_ids + new_ids[:k], False
        return self._forced_context(slot, prompt_ids, new_ids), True

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


class _Forcing:
    """The teacher of one generated answer (:class:`capjudge.reading.Teacher`)."""

    def __init__(self, backend: HFDigits, prompt_ids: list[int], new_ids: list[int],
                 extras: dict[str, object]) -> None:
        self.backend, self.prompt_ids, self.new_ids = backend, prompt_ids, new_ids
        self.extras = extras

    def at_printed(self, slot: ScoreSlot, start: int) -> dict[int, float] | None:
        """The exact distribution where the answer's digits start, if they start a token."""
        context, forced = self.backend._slot_context(slot, self.prompt_ids, self.new_ids, start)
        return None if forced else self.backend.distribution(context, slot.values, self.extras)

    def at_anchor(self, slot: ScoreSlot, *, confirming: bool = False) -> dict[int, float]:
        """The exact distribution at the slot's forced anchor."""
        context = self.backend._forced_context(slot, self.prompt_ids, self.new_ids,
                                               confirming=confirming)
        return self.backend.distribution(context, slot.values, self.extras)

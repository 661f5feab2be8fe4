"""Log-likelihoods of texts with the transformers judge (the likelihood method), packed."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from capjudge.backends.compute_thread import computes
from capjudge.backends.hf_state import HFState
from capjudge.backends.packing import CONTEXT, Pack, buckets, pack_paths, plan_packs
from capjudge.protocol import (
    BackendError,
    JudgeRequest,
    JudgeResponse,
    Usage,
)

log = logging.getLogger(__name__)

# Nodes per row of a context pass (contexts as one trie): fuller rows, fewer passes.
PREFIX_PACK_WIDTH = 256



class HFLikelihood(HFState):
    """``loglikelihoods``: every (context, text) pair scored, padded or as a shared trie."""

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

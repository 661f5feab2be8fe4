"""Texts that follow one context, packed as token tries: a batch row holds many texts.

A likelihood call scores many texts after few contexts (a picture's references before each
of its candidates, a candidate before each of its references, the neutral context before
every text). Fed one text per row, the rows are padded to the longest text of their pass,
and the padding costs whole tokens of compute (a third of the tokens on Flickr8k-Expert).
Texts after the same context often share their first tokens too ("A dog ...", "A man
..."), and a shared token has the same hidden state in every text that has it.

So the texts of one context go into a trie of token paths, split into packs of at most
``width`` nodes. A pack is one row of a pass: every node is fed once, at the position its
depth gives it after the context, and a 4D attention mask lets it see the context, its
ancestors and itself only (what the text alone would see), as the digit tree does for a
score scale. Each scored token is read at the node of its path's previous token (the
context's own last position for a text's first token), and a node shared by several texts
goes through the vocabulary head once. A text's last token is scored but never fed (its
hidden state would predict nothing), so a one-token text needs no node at all.

Pure bookkeeping: the backend (``hf.py``) builds the tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

# The last position of the context, which predicts a text's first token.
CONTEXT = -1


@dataclass
class Pack:
    """One row of a pass: a trie of texts after ``prefix``.

    Attributes:
        prefix: the context's token ids (its key/value cache is the row's past).
        tokens: each node's token id; a node's parent comes before it.
        parents: each node's parent node (``CONTEXT`` for a first token after the context).
        depths: each node's depth after the context (0 for the first), so its position id
            is ``len(prefix) + depth``.
        scored: ``(node, target, pair)`` per scored token: the node whose hidden state
            predicts ``target`` (``CONTEXT``: the context's last position), and the pair it
            counts toward.
    """

    prefix: tuple[int, ...]
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    depths: list[int] = field(default_factory=list)
    scored: list[tuple[int, int, int]] = field(default_factory=list)
    _nodes: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)  # (parent, token)

    def new_nodes(self, tokens: Sequence[int]) -> int:
        """How many nodes feeding ``tokens`` as a path would add."""
        node = CONTEXT
        for known, token in enumerate(tokens):
            child = self._nodes.get((node, token))
            if child is None:
                return len(tokens) - known
            node = child
        return 0

    def add_path(self, tokens: Sequence[int]) -> int:
        """Feed every token of ``tokens`` (sharing the nodes already there); its last node."""
        node = CONTEXT
        for token in tokens:
            node = self._child(node, token)
        return node

    def path(self, node: int) -> list[int]:
        """The nodes from the first one down to ``node``, in order."""
        out = []
        while node != CONTEXT:
            out.append(node)
            node = self.parents[node]
        return out[::-1]

    def add(self, pair: int, suffix: Sequence[int], first: int) -> None:
        """Add a text: ``suffix`` (its tokens after the prefix), scored from index ``first``.

        Tokens before ``first`` are fed but not scored (a context token the text's encoding
        re-reads because the text's first token merged with it). A text's last token is
        scored but never fed: its hidden state would predict nothing.
        """
        node = CONTEXT
        for depth, token in enumerate(suffix):
            if depth >= first:
                self.scored.append((node, token, pair))
            if depth + 1 < len(suffix):
                node = self._child(node, token)

    def _child(self, parent: int, token: int) -> int:
        node = self._nodes.get((parent, token))
        if node is None:
            node = self._nodes[(parent, token)] = len(self.tokens)
            self.tokens.append(token)
            self.parents.append(parent)
            self.depths.append(self.depths[parent] + 1 if parent != CONTEXT else 0)
        return node

    def __len__(self) -> int:
        return len(self.tokens)


def pack_texts(prefix: tuple[int, ...], texts: Sequence[tuple[int, Sequence[int], int]],
               width: int) -> list[Pack]:
    """The texts after one context, in packs of at most ``width`` nodes.

    Args:
        prefix: the context's token ids.
        texts: ``(pair, suffix, first)`` per text (see :meth:`Pack.add`); no suffix may need
            more than ``width`` nodes (its length less one).
        width: the most nodes a pack holds.

    Texts are taken in token order, so those sharing first tokens land in the same pack.
    """
    packs: list[Pack] = []
    current = Pack(prefix)
    for pair, suffix, first in sorted(texts, key=lambda t: (list(t[1]), t[0])):
        if len(suffix) - 1 > width:
            raise ValueError(f"a text of {len(suffix)} tokens does not fit a pack of {width}")
        if len(current) and len(current) + current.new_nodes(suffix[:-1]) > width:
            packs.append(current)
            current = Pack(prefix)
        current.add(pair, suffix, first)
    if current.scored:
        packs.append(current)
    return packs


def pack_paths(paths: Sequence[Sequence[int]], width: int
               ) -> list[tuple[Pack, list[tuple[int, int]]]]:
    """Whole sequences (contexts to encode) as tries, in packs of at most ``width`` nodes.

    Every token is fed (a context's keys and values are all kept, and its last position
    predicts its texts' first tokens); sequences sharing first tokens (a prompt's opening
    words) share those nodes.

    Returns:
        Per pack, the pack (its ``prefix`` empty) and the last node of each of its paths,
        as ``(path index, node)`` in ``paths`` order within the pack.
    """
    out: list[tuple[Pack, list[tuple[int, int]]]] = []
    current: tuple[Pack, list[tuple[int, int]]] = (Pack(()), [])
    for k in sorted(range(len(paths)), key=lambda k: list(paths[k])):
        tokens = paths[k]
        if not tokens or len(tokens) > width:
            raise ValueError(f"a sequence of {len(tokens)} tokens does not fit a pack of {width}")
        pack = current[0]
        if len(pack) and len(pack) + pack.new_nodes(tokens) > width:
            out.append(current)
            current = (Pack(()), [])
        current[1].append((k, current[0].add_path(tokens)))
    if current[1]:
        out.append(current)
    return out


def buckets(widths: Sequence[int], budget: int, held: Sequence[int],
            waste: float = 0.5) -> list[tuple[int, int]]:
    """Consecutive ranges of rows (sorted by ``widths``) to run as one padded pass each.

    A range grows while its padded size (rows x widest) stays within ``1 + waste`` of its real
    tokens (padding costs whole tokens of compute) and its rows' ``held`` tokens (a row's
    context and text) within ``budget`` (the memory of a pass).
    """
    out: list[tuple[int, int]] = []
    lo = 0
    while lo < len(widths):
        hi, real, kept = lo + 1, widths[lo], held[lo]
        while hi < len(widths):
            rows = hi + 1 - lo
            if rows * widths[hi] > (1 + waste) * (real + widths[hi]) or \
                    rows * max(kept, held[hi]) > budget:
                break
            real += widths[hi]
            kept = max(kept, held[hi])
            hi += 1
        out.append((lo, hi))
        lo = hi
    return out


# Pack widths tried (besides the longest text): wider packs mean fewer, fuller rows; each
# node's attention also spans its pack, so the cap keeps that a small share of the pass.
WIDTHS = (16, 24, 32, 48, 64, 96, 128)


def plan_packs(groups: Sequence[tuple[tuple[int, ...], Sequence[tuple[int, Sequence[int], int]]]],
               budget: int, widest: int | None = None, waste: float = 0.25
               ) -> tuple[list[Pack], list[tuple[int, int]]]:
    """Every group's texts packed at the width that feeds the fewest tokens, and the passes.

    Args:
        groups: ``(prefix, texts)`` per context (texts as in :func:`pack_texts`).
        budget: context and text tokens held per pass (rows x the widest row's).
        widest: the most nodes a pack may have (e.g. what a sliding attention window
            allows); never below what the longest text needs.
        waste: padding a pass may add, as a share of its real tokens.

    Returns:
        The packs, sorted by size (packs without nodes first: texts of one token, read at
        their context's last position alone), and the ``[lo, hi)`` ranges of the packs with
        nodes that form one pass each.
    """
    longest = max((len(s) - 1 for _, texts in groups for _, s, _ in texts), default=0)
    cap = max(longest, widest if widest is not None else max(WIDTHS))
    best: tuple[int, list[Pack], list[tuple[int, int]]] | None = None
    for width in sorted({max(1, longest), *(w for w in WIDTHS if longest < w <= cap)}):
        packs = [p for prefix, texts in groups for p in pack_texts(prefix, texts, width)]
        packs.sort(key=lambda p: (len(p), len(p.prefix)))
        start = sum(1 for p in packs if not len(p))
        sizes = [len(p) for p in packs[start:]]
        ranges = [(start + lo, start + hi) for lo, hi in
                  buckets(sizes, budget, [len(p.prefix) + len(p) for p in packs[start:]],
                          waste)]
        fed = sum((hi - lo) * len(packs[hi - 1]) for lo, hi in ranges)
        if best is None or fed < best[0]:
            best = (fed, packs, ranges)
    assert best is not None
    return best[1], best[2]

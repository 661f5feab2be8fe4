"""The local digit tree under the Llama / SentencePiece convention ("8" encodes as "▁", "8"),
and ``anchor_forced`` recorded truthfully for first-position slots."""

from __future__ import annotations

from pathlib import Path

import pytest
from tiny_llama import build_tiny_llama

from capjudge.backends import create_backend
from capjudge.backends.hf import HFBackend
from capjudge.protocol import JudgeResponse, ScoreSlot
from capjudge.reading import find_printed

FIRST = ScoreSlot("score", 1, 5, anchor="", position="first", forced_prefix="")
GVEVAL = ScoreSlot("score", 0, 100, label="final score")


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> HFBackend:
    path = build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))
    backend = create_backend(f"hf/{path}", dtype="float32")  # float32 tolerances, on a GPU too
    assert isinstance(backend, HFBackend)
    return backend


def test_the_tokenizer_follows_the_sentencepiece_convention(llama: HFBackend) -> None:
    tok = llama.tokenizer
    assert tok.convert_ids_to_tokens(tok.encode("8", add_special_tokens=False)) == ["▁", "8"]
    assert tok.convert_ids_to_tokens(tok.encode("$85", add_special_tokens=False)) == [
        "▁$", "8", "5"]
    # The digit ids are the digits' own tokens (what follows "$"), not "▁" + digit: the digit
    # tree is used, not the slow per-value fallback.
    assert llama._digit_ids == {d: tok.convert_tokens_to_ids(d) for d in "0123456789"}
    assert llama._value_ids(85) == [tok.convert_tokens_to_ids("8"), tok.convert_tokens_to_ids("5")]


def test_digit_tree_equals_naive_scoring_with_sentencepiece(llama: HFBackend) -> None:
    context = llama.tokenizer.encode("The final score is $", add_special_tokens=False)
    values = list(range(0, 21)) + [55, 85, 99, 100]
    llama.prune = 0.0
    llama.distribution(context, values)  # the first one is also checked against the level walk
    passes = llama.stats.forward_passes
    tree = llama.distribution(context, values)
    assert llama.stats.forward_passes - passes <= 4  # context + one pass per digit level
    naive = llama.naive_distribution(context, values)
    for v in values:
        assert tree[v] == pytest.approx(naive[v], rel=1e-4, abs=1e-9)
    assert 0 < sum(tree.values()) <= 1 + 1e-6


def _ids(llama: HFBackend, text: str) -> list[int]:
    return list(llama.tokenizer.encode(text, add_special_tokens=False))


def _context(llama: HFBackend, slot: ScoreSlot, prompt: list[int], answer: list[int],
             text: str) -> tuple[list[int], bool, int | float | None]:
    """Where the reader finds the verdict, then the backend's context there (or forced)."""
    found = find_printed(text, slot)
    context, forced = llama._slot_context(slot, prompt, answer,
                                          found.start if found is not None else None)
    return context, forced, found.printed if found is not None else None


def test_first_position_slot_read_after_the_word_start_marker(llama: HFBackend) -> None:
    prompt = _ids(llama, "Rate it.")
    answer = _ids(llama, "4 out of 5. The caption is clear.")
    assert llama.tokenizer.convert_ids_to_tokens(answer[:2]) == ["▁", "4"]
    text = llama.tokenizer.decode(answer, skip_special_tokens=True)
    context, forced, printed = _context(llama, FIRST, prompt, answer, text)
    # The model wrote "▁" then "4": the distribution is the one after its own "▁".
    assert context == prompt + answer[:1] and forced is False and printed == 4


def test_first_position_slot_read_where_a_labelled_score_was_written(llama: HFBackend) -> None:
    prompt = _ids(llama, "Rate it.")
    answer = _ids(llama, "The caption is clear. Rating: 4")
    text = llama.tokenizer.decode(answer, skip_special_tokens=True)
    context, forced, printed = _context(llama, FIRST, prompt, answer, text)
    assert printed == 4 and forced is False
    assert llama.tokenizer.convert_ids_to_tokens(context[-1:]) == ["▁"]
    assert llama.tokenizer.convert_ids_to_tokens(answer[len(context) - len(prompt)]) == "4"


def test_first_position_slot_forced_when_not_read_where_written(llama: HFBackend,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    prompt = _ids(llama, "Rate it.")
    answer = _ids(llama, "The caption is clear. Rating: 4")
    text = llama.tokenizer.decode(answer, skip_special_tokens=True)
    # Digits that do not start a token (a merged "is85"-style token): the distribution is read
    # at the answer's start, which is not where the model wrote its 4, so it is forced.
    monkeypatch.setattr(llama, "_token_at", lambda ids, cut: None)
    context, forced, printed = _context(llama, FIRST, prompt, answer, text)
    assert context == prompt and forced is True and printed == 4
    monkeypatch.undo()
    nothing = _ids(llama, "The caption is clear.")
    context, forced, printed = _context(
        llama, FIRST, prompt, nothing, llama.tokenizer.decode(nothing, skip_special_tokens=True))
    assert context == prompt and forced is True and printed is None


def test_anchored_slot_read_at_the_digits_after_the_anchor(llama: HFBackend) -> None:
    prompt = _ids(llama, "Rate it.")
    answer = _ids(llama, "The final score is $85$. Note the scale runs from $0$ to $100$.")
    text = llama.tokenizer.decode(answer, skip_special_tokens=True)
    context, forced, printed = _context(llama, GVEVAL, prompt, answer, text)
    assert printed == 85 and forced is False
    assert llama.tokenizer.convert_ids_to_tokens(context[-1:]) == ["▁$"]


def test_generate_records_the_forced_anchor(llama: HFBackend, tmp_path: Path) -> None:
    from capjudge.protocol import Decoding, JudgeRequest, Message

    request = JudgeRequest(messages=(Message("user", ("Rate the caption from 0 to 100.",)),),
                           slots=(GVEVAL,), decoding=Decoding(max_tokens=4), template="t@1")
    response = llama.generate([request])[0]
    assert not isinstance(response, Exception), response
    slot = response.slots[0]
    assert slot.source == "teacher_forcing" and slot.probs is not None
    # Random weights do not write "final score ... $N": the anchor is forced, and said so.
    assert slot.anchor_forced is (slot.printed is None)


def test_a_batch_of_mixed_lengths_is_generated_in_length_sorted_batches(
        llama: HFBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of very different prompt lengths are not padded to the longest (issue 31).

    The batch is cut into length-sorted batches (two here: the short prompts, the long ones),
    and every answer still goes back to its own request, equal to that request alone.
    """
    from capjudge.protocol import Decoding, JudgeRequest, Message

    words = "a red circle and a blue square on a grey background " * 12
    texts = ["Rate it.", f"Rate it. {words}", "Score this.", f"Score this. {words}"]
    requests = [JudgeRequest(messages=(Message("user", (text,)),), slots=(GVEVAL,),
                             decoding=Decoding(max_tokens=4)) for text in texts]
    calls: list[int] = []
    real = llama.model.generate

    def counted(**kwargs):  # noqa: ANN003, ANN202 - wraps the model's own
        calls.append(int(kwargs["input_ids"].shape[0]))
        return real(**kwargs)

    monkeypatch.setattr(llama.model, "generate", counted)
    batch = llama.generate(requests)
    assert sorted(calls) == [2, 2]  # short with short, long with long
    for request, answer in zip(requests, batch, strict=True):
        alone = llama.generate([request])[0]
        assert isinstance(answer, JudgeResponse) and isinstance(alone, JudgeResponse)
        assert answer.text == alone.text
        assert answer.usage.prompt_tokens == alone.usage.prompt_tokens
        assert answer.slots[0].probs == pytest.approx(alone.slots[0].probs, abs=1e-5)


def test_an_off_contract_verdict_is_confirmed_at_the_forced_anchor(
        llama: HFBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 40 on transformers: the verdict in the method's format is read where it was
    # written; one off it (a labelled line, not "The final score is $N$") also asks the exact
    # distribution after the whole answer and the slot's forced prefix, which must agree.
    from capjudge.protocol import JudgeRequest, Message

    request = JudgeRequest(messages=(Message("user", ("Rate it.",)),), slots=(GVEVAL,))
    prompt = _ids(llama, "Rate it.")
    contexts: list[list[int]] = []
    real = llama.distribution

    def spy(context: list[int], values: list[int], extras: object = None) -> dict[int, float]:
        contexts.append(list(context))
        return real(context, values, extras)  # type: ignore[arg-type]

    monkeypatch.setattr(llama, "distribution", spy)
    on = llama._score(request, prompt, _ids(llama, "Good. The final score is $85$."), {})
    assert on.slots[0].confirmation == "on-contract" and len(contexts) == 1
    contexts.clear()
    answer = _ids(llama, "The final score: 85")
    off = llama._score(request, prompt, answer, {})
    slot = off.slots[0]
    assert len(contexts) == 2  # where it was written, then the forced anchor
    forced = llama.tokenizer.encode(GVEVAL.forced_prefix, add_special_tokens=False)
    assert contexts[1] == prompt + answer + forced
    assert slot.confirmation in ("forced-anchor", "contradicted")
    assert (slot.status == "parse_failure") == (slot.confirmation == "contradicted")
    assert "off-contract" in (slot.read_by or "")

"""Verdict shapes of reading rules 30 (issue 40, corpus AC): how the number is written, qualified.

A number can carry the verdict in an unusual writing (HTML entities, escapes of content encoded
twice, footnote markers glued to it, words or another script's numerals in the format's own
place) or be qualified so that the judge does not commit to it (a bound, a decade, a value
marked provisional). Each class with its near misses.
"""

from __future__ import annotations

import re

import pytest
from reading_probe import off_contract as _off_contract
from reading_probe import value as _value
from reading_probe import why as _why

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import score_slot
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.numbers import value_at
from capjudge.reading.view import answer_view

VC = visce2_slot()
GV = score_slot()
HE = he_slot("correctness")
_LAMP = "A black metal desk lamp."


@pytest.mark.parametrize(("answer", "slot"), [
    ("Decent caption. The final score is at least $70$.", GV),
    ("The final score is $70$ or more.", GV),
    ("The final score is $80$ at most.", GV),
    ("\u2265 4. Correct objects; I can't verify the material.", HE),
    (">= 4. Correct objects.", HE),
    ("No more than 60 \u2014 the species is wrong.", VC),
])
def test_a_bound_is_no_verdict(answer: str, slot: object) -> None:
    # (Some bounds are masked before a number is read: the reader abstains either way.)
    assert _value(answer, slot) is None  # type: ignore[arg-type]


def test_a_bound_says_so() -> None:
    assert "bound" in _why("The final score is $70$ or more.")
    assert "bound" in _why("\u2265 4. Correct objects.", HE)


@pytest.mark.parametrize(("answer", "slot"), [
    ("The final score is $72$, pending the image.", GV),
    ("Score: 60 (tentative \u2014 pending the full-resolution frame)", GV),
    ("4, provisionally; I could not zoom in.", HE),
    ("72 for now. The dog is right.", VC),
])
def test_a_value_marked_provisional_is_no_verdict(answer: str, slot: object) -> None:
    assert "provisional" in _why(answer, slot)  # type: ignore[arg-type]


def test_a_decade_is_no_verdict() -> None:
    assert "decade" in _why("Accurate but incomplete.\n\nThe final score is in the high $70$s.")
    assert _value("Score: mid-80s. Good caption.") is None


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # near misses: the qualifier is elsewhere, or is no qualifier of the value
    ("The final score is $72$.\n\nPreliminary notes: the kitchen is right.", GV, 72),
    ("It deserves no more than 60. The final score is $60$.", GV, 60),
    ("70, or so I would say: the swans are right.", VC, 70),
    ("The final score is $70$ seconds after I looked: no, $70$.", GV, 70),
    ("4. More than three objects are right.", HE, 4),
    # a spread is read at its centre (eight corpora's writers read it so; AC's abstains)
    ("The final score is $80 \\pm 10$.", GV, 80),
])
def test_near_misses_of_the_qualifiers(answer: str, slot: object, want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("answer", "slot", "want"), [
    ("Good.\n\nThe final score is &#36;&#56;&#50;&#36;.", GV, 82),
    ("&#55;&#48; &#8212; the caption is right about the market.", VC, 70),
    ("Good.\\n\\nThe final score is $\\u0037\\u0034$.", GV, 74),
])
def test_entities_and_escapes_are_their_characters(answer: str, slot: object,
                                                   want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


def test_a_run_of_entities_keeps_its_characters_together() -> None:
    text = "a &#36;&#56;&#50;&#36; b &amp;&foo; c"
    view = answer_view(text).text
    assert len(view) == len(text)
    assert "$82$" in view and "&foo;" in view
    # an escape that is no text (a lone surrogate) stays as written
    assert "\\ud83d" in answer_view("x \\ud83d y").text


@pytest.mark.parametrize(("answer", "slot", "want"), [
    ("The husky is right.\n\nThe final score is $83$\u00b9.\n\n\u00b9 Reference 4 says wolf.",
     GV, 83),
    ("76\u00b9\n\n\u00b9 The harbour is right.", VC, 76),
    ("Final score: \u2078\u2075\u2044\u2081\u2080\u2080", GV, 85),  # a numerator, not a marker
])
def test_a_superscript_glued_to_the_number_is_a_footnote_marker(answer: str, slot: object,
                                                                want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("answer", "want"), [
    ("\u63cf\u8ff0\u51c6\u786e\u3002\n\n\u6700\u7ec8\u5f97\u5206\u4e3a $\u516b\u5341\u4e94$ "
     "\u5206\u3002", 85),
    ("Bien.\n\nLe score final est de $quatre-vingt-cinq$.", 85),
    ("\uc88b\uc2b5\ub2c8\ub2e4.\n\n\ucd5c\uc885 \uc810\uc218\ub294 $\uce60\uc2ed\uc624$\uc810"
     "\uc785\ub2c8\ub2e4.", 75),
])
def test_words_in_the_formats_place_are_read_off_contract(answer: str, want: float) -> None:
    assert _value(answer, GV) == want
    assert _off_contract(answer, GV) is not None


@pytest.mark.parametrize(("text", "want"), [
    ("\uce60\uc2ed\uc624$\uc810", 75),  # 칠십오
    ("\ud314\uc2ed \uc810", 80),  # 팔십 점
    ("\uad6c\uc2ed\uad6c", 99),  # 구십구
    ("\uc2ed\uc790\uac00", None),  # 십자가: a cross, no number
    ("\uc0ac\uacfc", None),  # 사과: an apple
])
def test_sino_korean_numerals_where_a_value_is_due(text: str, want: float | None) -> None:
    n = value_at(text, 0)
    assert (n.value if n is not None else None) == want


@pytest.mark.parametrize("correctness", ["4+", "\u2265 3", "three (maybe four)",
                                         "3 (+1 partial)", "at least 3"])
def test_cap3d_a_bounded_or_open_count_abstains(correctness: str) -> None:
    answer = (f"Correctness Score (C. Score): {correctness}\nHallucination Score (H. Score): 1\n"
              "Precision Score: 75%")
    c, h = (read_points_slot(answer, s) for s in points_slots(_LAMP))
    assert c.status == "parse_failure" and h.printed == 1


@pytest.mark.parametrize(("c_text", "h_text", "want"), [
    ("3 (+1 indeterminable, not counted)", "1", [3, 1]),
    ("drei", "eins", [3, 1]),
    ("cuatro", "ninguno", [4, 0]),
    ("quatre", "aucun", [4, 0]),
])
def test_cap3d_counts_in_words_and_asides_that_keep_the_count(c_text: str, h_text: str,
                                                             want: list[float]) -> None:
    answer = (f"Correctness Score (C. Score): {c_text}\nHallucination Score (H. Score): "
              f"{h_text}\nPrecision Score: 75%")
    assert [read_points_slot(answer, s).printed for s in points_slots(_LAMP)] == want


def test_escaped_digits_carry_no_token_distribution() -> None:
    # The view reads "&#55;&#48;" as 70, but the answer's tokens there write the entity: no
    # digit token is the number's, so the value stands without a distribution (the tokens'
    # "36" of "&#36;" was once read as the score).
    from capjudge.reading.tokens import TokenLogprob, read_tree

    text = "Accurate.\n\nThe final score is &#36;&#55;&#48;&#36;."
    pieces = re.findall(r"&#|\d|;|[^&#\d;]+", text)
    tokens = [TokenLogprob(p, 0.0, ((p, 0.0),)) for p in pieces]
    reading = read_tree(tokens, GV)
    assert reading.failure is not None
    assert reading.failure.printed == 70 and reading.failure.probs is None
    assert "escapes" in (reading.failure.reason or "")


# -- the review of the first cut (179 probes; 31 worse than rules 29, 9 of them wrong) ----------


@pytest.mark.parametrize(("answer", "slot"), [
    # bounds and provisional marks in other languages, beside words in the format
    ("\u6700\u7ec8\u5f97\u5206\u4e3a $\u516b\u5341$ \u5206\u4ee5\u4e0a\u3002", GV),  # 分以上
    ("\u6700\u7ec8\u5f97\u5206\u81f3\u5c11\u4e3a $\u516b\u5341$ \u5206\u3002", GV),  # 至少为
    ("La note finale est $quatre-vingts$ au moins.", GV),
    ("La puntuaci\u00f3n final es $ochenta$ o m\u00e1s.", GV),
    ("\ucd5c\uc885 \uc810\uc218\ub294 $\ud314\uc2ed$\uc810 \uc774\uc0c1\uc785\ub2c8\ub2e4.", GV),
    ("Score: mindestens 80", VC),
    ("\u30b9\u30b3\u30a2\uff1a80\u70b9\uff08\u66ab\u5b9a\uff09", VC),  # （暫定）
    # English siblings
    ("The final score is $70$ at a minimum.", GV),
    ("The final score is $85$ or so.", GV),
    ("Correctness: 4 at best.", HE),
    ("Correctness: > 3", HE),
    ("The final score is in the high $70$ range.", GV),
    ("The final score is $72$ (temporary).", GV),
])
def test_siblings_of_the_qualifiers_abstain(answer: str, slot: object) -> None:
    assert _value(answer, slot) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("answer", "slot", "want"), [
    # the qualifier opens a clause about something else
    ("The final score is $85$, at least the dog and the beach are right.", GV, 85),
    ("Correctness: 4, at most one minor error (the sand colour).", HE, 4),
    ("The final score is $85$; preliminary observations are below.", GV, 85),
    ("The final score is $85$; pending questions about the breed do not change it.", GV, 85),
    ("The final score is $80$ for now-obvious reasons: the dog is right.", GV, 80),
    ("The final score is $85$ (tentatively 80 before I zoomed in on the sand).", GV, 85),
    ("Final: 80's fair for this caption.", VC, 80),
    # a superscript run that is the value itself
    ("The final score is $\u2078\u2075$.", GV, 85),
    ("Correctness: **\u2074**", HE, 4),
    # 백 as the scale, not the value
    ("\uc810\uc218: \ubc31\uc810 \ub9cc\uc810\uc5d0 85\uc810", VC, 85),
])
def test_near_misses_found_by_the_review(answer: str, slot: object, want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("c_text", "want"), [
    ("3 or more", None), ("3 (tentative)", None), ("3, pending a closer look", None),
    ("3 (plus one partial)", None), ("3-ish", None),
    ("3 (dog, beach, running \u2014 clear even if one zooms out)", 3),
    ("3 (+1 partial, which I left out)", 3),
])
def test_cap3d_bounds_and_asides_found_by_the_review(c_text: str, want: float | None) -> None:
    answer = (f"Correctness Score (C. Score): {c_text}\nHallucination Score (H. Score): 1\n"
              "Precision Score: 75%")
    c = read_points_slot(answer, points_slots(_LAMP)[0])
    assert c.printed == want and (c.status == "parse_failure") == (want is None)


@pytest.mark.parametrize("none", ["ning\u00fan", "keiner", "rien"])
def test_cap3d_none_in_other_languages(none: str) -> None:
    answer = (f"Correctness Score (C. Score): 3\nHallucination Score (H. Score): {none}\n"
              "Precision Score: 100%")
    assert [read_points_slot(answer, s).printed for s in points_slots(_LAMP)] == [3, 0]


def test_a_footnote_marker_in_its_own_token_is_no_digit() -> None:
    # Tokens are normalised after what precedes them: "7" then "¹" is 7 and a marker, as in
    # the text, never 71.
    from capjudge.reading.tokens import TokenLogprob, plain_tokens, read_tree

    pieces = ["Score", ":", " ", "7", "\u00b9", "\u00b2", " ", "\u2078", "\u2075", "\u2044", "1"]
    assert "".join(t.token for t in plain_tokens(
        [TokenLogprob(p, 0.0, ()) for p in pieces])) == "Score: 7   85/1"
    tokens = [TokenLogprob(p, 0.0, ((p, 0.0),)) for p in ["4", "\u00b9", " The", " dog", "."]]
    reading = read_tree(tokens, HE)
    assert reading.failure is None and reading.located is not None
    assert reading.located.printed == 4


# -- the second review (131 probes of ordinary answers: 38 worse than rules 29) ------------------


@pytest.mark.parametrize(("answer", "slot", "want"), [
    ("The final score is $85$, and up close the collar is red too.", GV, 85),
    ("Correctness: 4, or more to the point, the caption is accurate.", HE, 4),
    ("Correctness: 5, max. Every detail is right.", HE, 5),
    ("Final score => 85", VC, 85),
    ("Score: <85>", VC, 85),
    ("Score: &lt;85&gt;", VC, 85),
    ("Correctness: 4; tentatively, I'd say the dog is a retriever.", HE, 4),
    ("Correctness: 4 \u2014 subject to the same ambiguity as the reference.", HE, 4),
    ("The final score is $90$ for the moment it describes.", GV, 90),
    ("Puntuaci\u00f3n: 85, o m\u00e1s bien, una descripci\u00f3n muy buena.", VC, 85),
    ("Note : 85, ou plus simplement \u00ab bonne l\u00e9gende \u00bb.", VC, 85),
    ("\u6700\u7ec8\u5f97\u5206\u4e3a $85$ \u5206, \u4ee5\u4e0a\u662f\u6211\u7684\u8bc4\u5206"
     "\u7406\u7531\u3002", GV, 85),  # 以上是: "the above is"
    ("\uc810\uc218: 85\uc810, \uc774\ud558 \uadfc\uac70\ub97c \uc124\uba85\ud569\ub2c8\ub2e4.",
     VC, 85),  # 이하 근거: "the reasons below"
    ("\uc810\uc218: \ubc31\uc810 \uae30\uc900\uc73c\ub85c 85\uc810", VC, 85),  # 백점 기준으로
    ("Correctness: 4 (tentatively identified breed aside, everything is right).", HE, 4),
])
def test_ordinary_answers_found_by_the_second_review(answer: str, slot: object,
                                                     want: float) -> None:
    assert _value(answer, slot) == want  # type: ignore[arg-type]


@pytest.mark.parametrize(("answer", "slot"), [
    ("Score: 80 (at least)", VC),
    ("Score: 80 (TBD after zoom)", VC),
    ("Score: 85 (pending)", VC),
    ("Score: 80 (subject to revision)", VC),
    ("Score: 80&#43;", VC),
    ("4 for now; I need a sharper image to check the breed.", HE),
])
def test_bracketed_and_escaped_qualifiers_abstain(answer: str, slot: object) -> None:
    assert _value(answer, slot) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("c_text", "want"), [
    ("3 (chair, wooden, one or two armrests visible \u2014 counted once)", 3),
    ("3; tentatively, the material looks like wood (not scored)", 3),
])
def test_cap3d_explanations_after_the_count_keep_it(c_text: str, want: float) -> None:
    answer = (f"Correctness Score (C. Score): {c_text}\nHallucination Score (H. Score): 1\n"
              "Precision Score: 75%")
    assert read_points_slot(answer, points_slots(_LAMP)[0]).printed == want

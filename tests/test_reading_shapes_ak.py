"""Verdict shapes of reading rules 37 (issue 40, corpus AK): a deployment's own style.

A judge behind a server preset, an app persona or a company's house style wraps its verdict in a
genre the prompt never asked for: a memo with a summary line, a TL;DR, a receipt, a report
card, verse, code, schema.org JSON-LD, a "never print numerals" policy. Each class with the near
misses that must still read.
"""

from __future__ import annotations

import pytest
from reading_probe import value, why

from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading.masking import mask_rubric
from capjudge.reading.points import read_ch

VC = visce2_slot()
CLARITY = he_slot("clarity")
FLUENCY = he_slot("fluency")


def _counts(text: str) -> tuple[float | None, float | None]:
    read = read_ch(text)
    return read["correctness"][0], read["hallucination"][0]


@pytest.mark.parametrize(("text", "slot"), [
    # A house style's summary line states the verdict, and the body states another.
    ("Summary: strong caption, 85/100.\n\nDetails: the caption omits the man.\n\n"
     "The final score is $70$.", None),
    ("TL;DR: 70/100.\n\nThe caption names the giraffe but not the second one. Rating: 60.", VC),
    # A verse commits one value, the label line another.
    ("A caption came knocking my door,\nIt flowed, by the way —\nI'd happily give it a four."
     "\n\nScore: 3", FLUENCY),
    ("It skipped every brolly,\nSo my final score's sixty-eight, thus.\n\n"
     "The final score is $62$.", None),
    ("The caption misses the ball. The final score is $70$.\nIn short: a good caption at 85 "
     "out of 100.", None),
    ("4\nThe caption omits the ball.\nVerdict: mostly accurate, 3/5.", he_slot("correctness")),
    ("The dog is right, the ball is missing. So I'd give this 3/5.\n\nScore: 4",
     he_slot("correctness")),
    ("The dog and beach are right. So I'd give this 85/100.\nOverall score: 80", None),
    # A bare verdict label before or after the asked sentence, nothing between marking either.
    ("Verdict: 70\nThe caption misses the ball. The final score is $75$.", None),
    ("The caption misses the ball. The final score is $70$.\nScore ....... 85", None),
    # A structure that states only the scale's bounds.
    ('{"@type": "Rating", "bestRating": 100, "worstRating": 0}', VC),
    ('{"ratingValue": 80, "score": 70}', VC),
    # Code that changes the value after assigning it.
    ("```python\nscore = 80\nscore += 5  # the frisbee is there\n```", None),
    ("```python\nfluency = 5\nfluency -= 1  # missing article\n```", FLUENCY),
    # A program's numbers are not VisCE²'s first number.
    ("```python\nfor r in range(0, 101, 10):\n    print(r)\n```", VC),
    # A lookup table from scale points to words chooses none of them.
    ('```python\nCLARITY = {1: "Ambiguous", 2: "Somewhat ambiguous", 3: "Neutral", '
     '4: "Clear", 5: "Very Clear"}\n```', CLARITY),
])
def test_a_genre_that_states_two_values_or_none_abstains(text: str, slot: object) -> None:
    assert (why(text) if slot is None else why(text, slot))  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "slot", "expected"), [
    # A summary line that agrees, or one the body revises in words.
    ("Summary: strong caption, 70/100.\n\nThe final score is $70$.", None, 70.0),
    ("TL;DR: 70/100.\n\nOn reflection the second giraffe matters. Rating: 60.", VC, 60.0),
    # A rating committed in a sentence that is not the judge's plain verdict stays aside.
    ("As a photograph I'd give it 40 — but the caption is what I rate. "
     "The final score is $85$.", None, 85.0),
    ("I'd happily give it a four.\n\nScore: 4", FLUENCY, 4.0),
    ("```python\nrating = 72\nprint(rating)\n```", VC, 72.0),
    # Code whose value is only printed, or compared, is what it says.
    ("```python\nfluency = 4\nprint(fluency)\n```", FLUENCY, 4.0),
    # One word that is the number; an article before it.
    ("Seventy-four.", None, 74.0),
    ("A four. The sentence is easy to follow.", CLARITY, 4.0),
    ("A solid four — clear and direct.", CLARITY, 4.0),
    ("A 4. The sentence is easy to follow.", CLARITY, 4.0),
    # A cheerful persona's correction, and a bound it rejects.
    ("A solid 5 out of 5 — no, wait: the bicycle is blue, not red. Let me fix that: 4. "
     "Everything else is spot on!", he_slot("correctness"), 4.0),
    ("I wouldn't go as low as 2 — it reads naturally, there's one comma splice. 4!",
     FLUENCY, 4.0),
    # schema.org's Rating: ratingValue beside the scale's bounds.
    ('{"@type": "Rating", "ratingValue": 68, "bestRating": 100, "worstRating": 0}', None, 68.0),
    ('{"@type": "Rating", "ratingValue": 4, "bestRating": 5, "worstRating": 1}',
     he_slot("correctness"), 4.0),
    # A possessive "score's" before the scale is no label.
    ("The score's 0-100 range leaves room here. The caption misses the ball. "
     "The final score is $70$.", None, 70.0),
    # A column's gap or dot leaders for the colon.
    ("CAPTION STOP\nQty objects matched: 3\n------\nRATING           77\n------", VC, 77.0),
    ("The caption is fine.\nScore ...... 85", None, 85.0),
])
def test_a_genre_wrapping_one_verdict_reads(text: str, slot: object, expected: float) -> None:
    assert (value(text) if slot is None else value(text, slot)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("text", [
    "A four-legged chair is named. The final score is $70$.",
    "A two-dog scene. The final score is $70$.",
])
def test_an_article_before_a_count_is_no_rating(text: str) -> None:
    assert value(text) == 70.0


@pytest.mark.parametrize(("text", "want"), [
    ("Puntuación de corrección (C): 5\nPuntuación de alucinación (H): 1", (5.0, 1.0)),
    ("正确性得分（C）：３\n幻觉得分（H）：２", (3.0, 2.0)),
    ("Correctness (C. Score) ..... 5 pts\nHallucination (H. Score) ... 1 pt", (5.0, 1.0)),
    ("C-SCORE: 6. H-SCORE: 0. PRECISION: 100 PCT. ALL ATTRIBUTES CONFIRMED.", (6.0, 0.0)),
    ("The teapot sat there. Correctness: 2. Hallucinations: 3, and one was a sugar bowl.",
     (2.0, 3.0)),
])
def test_cap3d_labels_in_a_house_style(text: str, want: tuple[float, float]) -> None:
    assert _counts(text) == want


def test_a_plural_label_before_prose_is_no_count() -> None:
    assert _counts("Correctness Score (C. Score): 5\n\nThere are no hallucinations: all "
                   "match.") == (5.0, 0.0)
    assert _counts("Correctness Score (C. Score): 4\nThere are no hallucinations: 2 details are "
                   "just not visible.\nPrecision Score: 100%")[1] != 2.0


@pytest.mark.parametrize(("text", "masked"), [
    ('{1: "Ambiguous", 2: "Neutral", 3: "Clear"}', True),
    ("{0: 'unrelated', 50: 'partly right', 100: 'perfect'}", True),
    ('{"score": 4, 1: "a", 2: "b", 3: "c"}', False),  # a verdict's key beside them
    ('{1: "a", 2: "b"}', False),  # two points are no table of the scale
    ('{3: "x", 1: "y", 5: "z"}', False),  # not in the scale's order
])
def test_a_mapping_of_scale_points_is_blanked(text: str, masked: bool) -> None:
    assert (not any(ch.isdigit() for ch in mask_rubric(text))) == masked

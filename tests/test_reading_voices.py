"""Numbers another voice gives are not the judge's verdict (rules 35, corpus AI).

:func:`capjudge.reading.voices.mask_voices` blanks what samples, reviewers, personas, agents,
other judges and the user say; the voice that decides for the judge (a chair, a consensus, a
majority, a final line) stays. Each class with near misses that must keep reading.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value

from capjudge.methods.cap3d import points_slots
from capjudge.methods.gveval import accr_slots
from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading import read_points_slot
from capjudge.reading.voices import mask_voices

VC = visce2_slot()
CLARITY = he_slot("clarity")


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


@pytest.mark.parametrize(("text", "kept"), [
    # Lines and segments opened by another voice: the voice and what it says go.
    ("Sample 1: 70 | Sample 2: 75 | Sample 3: 70 -> majority: 70", "70"),
    ("Annotator 1: 4, Annotator 2: 5. Consensus: 4", "4"),
    ("Reviewer A (strict): 2\nReviewer B: 4\nChair: 3", "3"),
    ("critic (to chat_manager): 2\narbiter (to chat_manager): 3", "3"),
    ("GPT-4: 85\nMy own score: 70", "70"),
    ("评委一：3\n评委二：5\n最终评分：4", "4"),
    ("Samples: 4, 5, 5. Rounded mean: 5", "5"),
    # Prose in which another voice rates, and a block under another voice's heading.
    ("Another evaluator rated this text 5. I have no further comment.", ""),
    ("GPT-4 rated this 85; I disagree: 70.", "70"),
    ("The user suggested 90, but the caption misses the dog. 60.", "60"),
    ("GPT-4's earlier evaluation:\nC. Score: 5\nH. Score: 0\n\nI find 4 correct.", "4"),
    ("GPT-4's evaluation of this caption:\nAccuracy: $90$\n\nI disagree.", ""),
    ('A previous evaluation by GPT-4V concluded: "Accurate. The final score is $85$."', ""),
    ("[vision_agent] 80\n[text_agent] 62", ""),
    ("[llava-v1.6-34b] 78", "78"),  # a server's tag for the judge itself
    ("Original caption score: 60\nRewritten caption score: 85", "6085"),  # the candidate's
    ("Five samples: 60, 72, 75, 77, 95. Median = 75.", "75"),
    ("Two raters: 70 and 80. Tie - no decision.", ""),
    # The judge's own earlier voice, superseded.
    ("Previous round: The final score is $74$.\n\nOn re-check, it was too generous.", ""),
    ("Previous rating: 5. Changed to 4.", "4"),
    ("Initial automated score: 88. After review: 70.", "70"),
    ("The first pass of the caption names 2 dogs. The final score is $60$.", "260"),
    # Blocks a voice's heading or bold lead opens, to the blank line; the decider's stays.
    ("Persona A (strict):\nAccuracy: $80$\n\nPersona B:\nAccuracy: $70$\n\n"
     "Reconciled (my final answer):\nAccuracy: $75$", "75"),
    ("**Strict reviewer.** The bus is blue. The final score is $60$.\n\n"
     "**Chair's decision.** The final score is $70$.", "70"),
    ("# Agent: Reader\n## Final Answer: 4\n\n# Agent: Editor\n## Final Answer: 2\n\n"
     "# Agent: Crew Manager\n## Final Answer: 3", "3"),
    ("**Reviewer 2** 4", ""),  # the bold lead's own value is the reviewer's
    # Near misses: the judge's own lines, criteria split between personas, no voice at all.
    ("Persona 1: Accuracy $80$, Completeness $70$", "8070"),
    ("Judge: 72", "72"),
    ("Final (chair): 70", "70"),
    ("Editor's decision: 78", "78"),
    ("Frame 1: a dog. Score: 80", "180"),
    ("The model describes 2 dogs; the final score is $60$.", "260"),
    ("Accuracy: $90$\nCompleteness: $70$", "9070"),
])
def test_other_voices_are_blanked(text: str, kept: str) -> None:
    assert _digits(mask_voices(text)) == kept


@pytest.mark.parametrize(("answer", "slot", "want"), [
    ("Another evaluator rated this text 5. I have no further comment.", CLARITY, None),
    # Adopting a voice by name reads nothing: the name's digits are no rating.
    ("Reviewer 1: 4\nReviewer 2: 2\nI side with Reviewer 2.", CLARITY, None),
    ("Claude gave 5. I agree with GPT-4.", CLARITY, None),
    ("Three raters gave 60, 70 and 80.", VC, None),
    # Rounds: the last stands, also under a heading of its own.
    ("Round 1: 5\nRound 2:\n3", CLARITY, 3),
    ("Round 1: 66 -> Round 2 (after rebuttal): 74", VC, 74),
    # The judge itself in a role, and another voice after the judge's own verdict.
    ("As the judge, I give 4.", CLARITY, 4),
    ("As a reviewer, I give 4.", CLARITY, 4),
    ("As the judge, the final score is $65$.\nPersona 2 (a lenient fan) would say: The final "
     "score is $90$.", None, 65),
    ("The final score is $60$, although the user suggested $95$.", None, 60),
    ("Reviewer 1: 4\nReviewer 2:", CLARITY, None),
    ("Sample 1: 70 | Sample 2: 75 | Sample 3: 70 -> majority: 70", VC, 70),
    ("GPT-4 gave this caption 90. I disagree: the dog is a fox. The final score is $40$.",
     None, 40),
    ("GPT-4 gave this caption 90.", None, None),
])
def test_a_verdict_is_the_judges_own(answer: str, slot: object, want: float | None) -> None:
    if slot is None:
        assert _value(answer) == want
    else:
        assert _value(answer, slot) == want  # type: ignore[arg-type]


def test_rounds_of_counts_the_last_stands() -> None:
    answer = ("Round 1: C. Score: 4, H. Score: 0\nRound 2:\nCorrectness Score (C. Score): 3\n"
              "Hallucination Score (H. Score): 1")
    correctness, hallucination = points_slots("A brown leather bag.")[:2]
    assert read_points_slot(answer, correctness).printed == 3
    assert read_points_slot(answer, hallucination).printed == 1


def test_another_judges_counts_are_not_the_judges() -> None:
    answer = ("GPT-4's earlier evaluation:\nCorrectness Score (C. Score): 5\n"
              "Hallucination Score (H. Score): 0\nPrecision Score: 100%\n\n"
              "This is too generous: the bag is canvas, not leather.")
    correctness, hallucination = points_slots("A brown leather bag.")[:2]
    assert read_points_slot(answer, correctness).printed is None
    assert read_points_slot(answer, hallucination).printed is None


def test_personas_splitting_the_criteria_are_read() -> None:
    answer = ("Persona 1 (fact-checker): Accuracy: $80$; Completeness: $70$\n"
              "Persona 2 (editor): Conciseness: $90$; Relevance: $85$")
    accuracy, completeness, conciseness, relevance = accr_slots()
    assert [_value(answer, s) for s in (accuracy, completeness, conciseness, relevance)] == \
        [80, 70, 90, 85]

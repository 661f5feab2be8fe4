"""Numbers of the picture, not the judge's rating (:mod:`capjudge.reading.pictured`).

Cases from corpus AG and from a review's probes of rules 33, each class with its near misses.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value

from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading.numbers import number_at
from capjudge.reading.pictured import compares_owners, owned_elsewhere, owner, picture_value

VC = visce2_slot()
CORRECTNESS = he_slot("correctness")


def _picture(text: str, written: str) -> bool:
    n = number_at(text, text.index(written))
    assert n is not None
    return picture_value(text, n)


@pytest.mark.parametrize(("text", "written"), [
    ("the match clock 87:12", "87"), ("the match clock 87:12", "12"),
    ("比分为87比72", "87"), ("costs $4.20 here", "4"), ("¥450 on the tag", "450"),
    ("$12,400 is the total", "12,400"), ("80,100,90 are the bars", "80"), ("[85,100]", "85"),
    ("jersey number 23", "23"), ("Player #23", "23"), ("player No. 7", "7"),
    ("The chart shows 45% growth", "45"), ("the caption says 42%", "42"),
    ("87/100 is what the app shows", "87"), ("the 85 shown on the board", "85"),
    ("The app's score is 87, fine.", "87"), ("the 2020 value", "2020"),
    ('The scoreboard reads "FINAL SCORE 85", as the caption says.', "85"),
    ("キャプションは3と書いています", "3"),
    ("The screenshot's rating is 4/5, but the caption's rating is 2/5.", "2"),
])
def test_numbers_of_the_picture(text: str, written: str) -> None:
    assert _picture(text, written)


@pytest.mark.parametrize(("text", "written"), [
    ("The final score is $85$", "85"), ("$82.50$", "82"), ("Rating: 4", "4"),
    ("My assessment gives 85", "85"), ("the sum gives 85", "85"),
    ("No. 15 - the caption describes a kitchen", "15"),  # "No." may answer the prompt
    ("The caption's rating is 2/5.", "2"),  # no other owner: the judge's own
    ("85, 100 being perfect", "85"), ("Accuracy:80", "80"),
])
def test_the_judges_numbers(text: str, written: str) -> None:
    assert not _picture(text, written)


@pytest.mark.parametrize(("text", "label", "want"), [
    ("The app's score is 87", "score", "other"),
    ("the player's overall rating", "rating", "other"),
    ("Here's the score: 85", "score", None),
    ("It's score time", "score", None),
    ("The caption's rating is 2", "rating", "caption"),
    ("Alice's caption score is 4", "score", "caption"),
    ("Alice's caption earns a score of 4", "score", None),  # too far: no owner
    ("比赛的最终得分为87", "得分", "other"),
    ("경기의 최종 점수는 87점", "점수", "other"),
    ("我的评分为90", "评分", None),
    ("全体の評価は4", "評価", None),
    ("候选标题的得分为80分", "得分", "caption"),
])
def test_who_owns_a_label(text: str, label: str, want: str | None) -> None:
    assert owner(text, text.index(label)) == want


def test_the_captions_label_is_its_stated_value_beside_another_owners() -> None:
    text = "The screenshot's rating is 4/5, but the caption's rating is 2/5."
    assert compares_owners(text)
    assert owned_elsewhere(text, text.rindex("rating"))
    assert not owned_elsewhere("The caption's rating is 2/5.", 16)


@pytest.mark.parametrize(("answer", "slot"), [
    ("The screenshot's rating is 4/5, but the caption's rating is 2/5, so the caption "
     "misreports it.", CORRECTNESS),
    ("The app's score is 87, but the caption's score is 78.", VC),
    ("图片中的记分牌显示比赛的最终得分为87比72，标题正确地描述了这一比分。", None),
    ("スコアボードによると、試合の最終スコアは87対72です。キャプションはこれを正しく伝えています。",
     None),
    ("스코어보드에 따르면 경기의 최종 점수는 87점입니다. 캡션은 이를 정확히 언급합니다.", None),
    ("アプリの評価は4です。キャプションは3と書いています。", CORRECTNESS),
    ("80,100,90 are the three bar values, and the caption reads them correctly.", VC),
    ("$12,400 is the total on the invoice, and the caption reports it correctly.", VC),
    ("4 of 5 items on the receipt are named correctly.", CORRECTNESS),
    ("4 out of 5 labels on the chart are read correctly.", CORRECTNESS),
    ("The app's score is 87, and the caption repeats it.", VC),
])
def test_the_pictures_numbers_alone_are_no_verdict(answer: str, slot) -> None:
    assert (_value(answer, slot) if slot is not None else _value(answer)) is None


@pytest.mark.parametrize(("answer", "want", "slot"), [
    ("最終スコアは60点ではなく、72点です。", None, None),  # denied: not read as 60
    ("87:12 is the score on the board, and the caption reports it correctly. 92", 92, VC),
    ("应用显示的评分为87，标题说的也是87分，描述准确。我的评分为90分。", 90, VC),
    ("앱의 평점은 4점입니다. 캡션은 이를 정확히 전달합니다. 5", 5, CORRECTNESS),
    ("¥4,500 is on the tag, as the caption says. 5", 5, CORRECTNESS),
    ("1,250,000 is the 2020 value in the chart, and the caption reads it correctly. 88", 88,
     VC),
    ('The sign says "Rating: 3", and the caption says 3. Score: 5', 5, CORRECTNESS),
    ('The scoreboard reads "FINAL SCORE 85", and the caption repeats it. The final score is '
     "$90$.", 90, None),
    ("4 out of 5 - the caption is clear.", 4, CORRECTNESS),
    ("全体の評価は4です。", 4, CORRECTNESS),
])
def test_the_judges_verdict_among_the_pictures_numbers(answer: str, want: float | None,
                                                      slot) -> None:
    assert (_value(answer, slot) if slot is not None else _value(answer)) == want

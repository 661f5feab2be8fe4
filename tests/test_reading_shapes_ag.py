"""Verdict shapes of reading rules 33 (issue 40, corpus AG): number-dense pictures.

Charts, receipts, scoreboards, clocks and app screenshots fill a judge's critique with numbers
that are not its verdict: a clock time, a jersey number, the app's own star rating, a share of
the prices checked, a receipt's total, a game show's "FINAL SCORE $12,400". Each class with
the near misses that must still read.
"""

from __future__ import annotations

import pytest
from reading_probe import value as _value

from capjudge.methods.harmoniceval import rating_slot as he_slot
from capjudge.methods.visce2 import rating_slot as visce2_slot
from capjudge.reading.numbers import number_at

VC = visce2_slot()
CORRECTNESS = he_slot("correctness")


@pytest.mark.parametrize(("answer", "want"), [
    ("综上，最终得分为七十二分。", 72),
    ("综上，最终得分为72分。", 72),
    ("最终得分是 72 分", 72),
    ("最終スコアは72点です。", 72),
    ("최종 점수는 72점입니다.", 72),
    ("总里程为 56,780 公里，描述基本正确。最终得分为72分。", 72),
])
def test_a_cjk_copula_joins_the_label_to_its_value(answer: str, want: float) -> None:
    assert _value(answer) == want


@pytest.mark.parametrize(("text", "pos", "value", "written"), [
    ("$12,400 and", 1, 12400, "12,400"),
    ("56,780 km", 0, 56780, "56,780"),
    ("1,250.50 total", 0, 1250.5, "1,250.50"),
    ("[85,100]", 1, 85, "85"),  # an array
    ("80,100,90", 0, 80, "80"),  # a list: a group of two
    ("82,5", 0, 82, "82"),  # a decimal comma is read elsewhere
    ("70, 80", 0, 70, "70"),
])
def test_digits_grouped_by_thousands_are_one_number(text: str, pos: int, value: float,
                                                    written: str) -> None:
    n = number_at(text, pos)
    assert n is not None and (n.value, n.written) == (value, written)


def test_a_later_group_is_no_number_of_its_own() -> None:
    assert number_at("$12,400 and", 4) is None
    assert number_at("80,100,90", 3) is not None


@pytest.mark.parametrize("answer", [
    "The scoreboard reads 3-1 and the match clock 87:12; the caption matches both.",
    "I'm sorry, I can't read the numbers in the image clearly enough to judge whether the "
    "caption's 14:35 departure time is right.",
    "The departure board shows 14:35 for the Leeds train; the caption gives 14:53.",
])
def test_picture_numbers_alone_are_no_rating(answer: str) -> None:
    assert _value(answer, VC) is None


@pytest.mark.parametrize(("answer", "want", "slot"), [
    ("I would not rate it 90, since the clock reads 4:50 and not 4:15; I give it 70.", 70, VC),
    ("87/100 is what the app shows, and the caption gets it right, along with the 4.7 "
     "stars.\n90", 90, VC),
    ("The 85 shown on the board matches the caption.\n80", 80, VC),
    ("I would not rate it 5, since the jersey number is 23 and not 32 as the caption says; "
     "I give it 3.", 3, CORRECTNESS),
    ("Player #23 is named correctly. Rating: 4", 4, CORRECTNESS),
    ("3 of the 4 prices on the menu board are correct; the caption gives the latte as $4.20 "
     "but the board says $4.70. Score: 4", 4, CORRECTNESS),
    ("The screenshot's rating is 4/5 and the caption says 3/5. The review count (87) is also "
     "wrong in the caption (78). Rating: 2", 2, CORRECTNESS),
    ("The receipt lists 3 items (9.90, 4.50, 2.60) and a total of 17.00, as the caption "
     "says; the store name is missing.\nRating: 83", 83, VC),
])
def test_the_pictures_numbers_leave_the_judges_rating(answer: str, want: float, slot) -> None:
    assert _value(answer, slot) == want


@pytest.mark.parametrize(("answer", "want", "slot"), [
    # Near misses: the judge's own ratings, which still read.
    ("4 out of 5: the caption is clear.", 4, CORRECTNESS),
    ("4 of 5 - the caption is clear.", 4, CORRECTNESS),
    ("The caption's rating is 4.", 4, CORRECTNESS),
    ("Total: 4", 4, CORRECTNESS),
    ("85\nThe clock in the picture reads 4:50.", 85, VC),
])
def test_the_judges_own_numbers_still_read(answer: str, want: float, slot) -> None:
    assert _value(answer, slot) == want


def test_an_off_scale_value_quoted_from_the_picture_does_not_compete() -> None:
    answer = ('The screen shows the display "FINAL SCORE $12,400"; the caption gets the winner '
              "right but calls it a quiz in a classroom.\n\nThe final score is $68$.")
    assert _value(answer) == 68
    # On the scale, the quoted value still competes: nothing says it is the picture's.
    assert _value('The screen shows "FINAL SCORE $85$". The final score is $68$.') is None

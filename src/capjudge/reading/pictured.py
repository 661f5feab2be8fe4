"""Numbers of the picture, not the judge's rating (corpus AG: number-dense pictures).

Charts, receipts, scoreboards, clocks and app screenshots fill a critique with numbers: the
values read off the picture, the caption's versions of them, and their corrections. None of
them is the judge's verdict, though many sit on its scale (an app's "4/5" beside HarmonicEval's
1-5, a pictured exam's "85/100" beside G-VEval's 0-100). A careful reader knows them by how
they are written and by what the answer says of them:

- joined to another number: a clock time or a match clock ("4:50", "87:12"), a game's score
  in CJK ("87比72"), a list or an array ("80,100,90", "[85,100]");
- written as money or a quantity: "$4.20", "¥4,500", "12,400" (grouped by thousands);
- an identifier: "jersey number 23", "#23", "player No. 7";
- said to be the picture's: "87/100 is what the app shows", "the 85 shown on the board",
  "the chart shows 45%";
- under a label another thing owns: "the app's score is 87", "比赛的最终得分为87"; and, where
  the answer sets the caption's value against such a one ("The screenshot's rating is 4/5,
  but the caption's rating is 2/5"), under the caption's too: that is the value the caption
  states, not the judge's.
"""

from __future__ import annotations

import re

from capjudge.reading.numbers import Number
from capjudge.reading.view import start_of_line

# -- owners of a label --------------------------------------------------------------------------

# Possessives whose label is the judge's or the caption's; any other owner's is the picture's.
# ("Here's the score", "what's the rating", "it's 85": contractions, no owner.)
_NOT_OWNERS = frozenset({"it", "that", "this", "here", "there", "what", "who", "where", "let",
                         "he", "she", "everything", "nothing", "something", "which", "how",
                         "one", "today", "judge", "evaluator", "reviewer"})
_CAPTION_OWNERS = frozenset({"caption", "candidate", "description", "text", "output",
                             "response", "answer", "captioner", "sentence", "summary"})
_CJK_JUDGE = ("我", "我们", "我們", "私", "僕", "나", "저", "본", "全体", "総合", "综合", "整体",
              "總體", "总体", "最终", "最終", "전체", "종합", "최종")
_CJK_CAPTION = ("标题", "標題", "描述", "字幕", "候选", "候選", "文本", "文字", "说明", "說明",
                "キャプション", "説明", "テキスト", "캡션", "설명", "문장", "텍스트")
# "the app's score", "the player's overall rating"; "比赛的最终得分", "試合の最終スコア",
# "경기의 최종 점수" (the particle right before the label: CJK runs have no spaces).
_POSSESSIVE = re.compile(r"\b(?P<en>[^\W\d_]+)['\u2019]s[ \t]+(?P<between>(?:[^\W\d_]+[ \t]+)"
                         r"{0,2})$|(?P<cjk>[^\W\d_]{1,12}?)[的の의][ \t]*[^\W\d_ \t]{0,4}[ \t]*$")
_RATING_NOUN = re.compile(r"\b(?:score|rating|grade|result|total|verdict|points|stars|mark)s?\b|"
                          r"得分|评分|評分|分数|分數|スコア|評価|点数|점수|평점|평가", re.I)


def owner(text: str, start: int) -> str | None:
    """Who owns the label starting at ``start``: "caption", "other", or None.

    None where no possessive stands before it, or the judge does ("Score:", "Here's the
    score", "我的评分").
    """
    m = _POSSESSIVE.search(text, max(0, start - 40), start)
    if m is None:
        return None
    if m.group("en") is not None:
        word = m.group("en").lower()
        if word in _NOT_OWNERS:
            return None
        # ("Alice's caption earns a score": the caption's.)
        words = {word, *(w.lower() for w in m.group("between").split())}
        return "caption" if words & _CAPTION_OWNERS else "other"
    word = m.group("cjk")
    return None if word.endswith(_CJK_JUDGE) else (
        "caption" if word.endswith(_CJK_CAPTION) else "other")


def compares_owners(text: str) -> bool:
    """Whether the answer names a rating another thing owns ("the app's rating")."""
    return any(owner(text, m.start()) == "other" for m in _RATING_NOUN.finditer(text))


def owned_elsewhere(text: str, start: int) -> bool:
    """Whether the label at ``start`` is not the judge's.

    Another thing's ("the app's rating"), or the caption's where the answer sets it against
    another thing's: then it is the value the caption states.
    """
    who = owner(text, start)
    return who == "other" or (who == "caption" and compares_owners(text))


# -- the number itself ------------------------------------------------------------------------

_JOINED_AFTER = re.compile(r":\d|[ \t]*[比対对대][ \t]*\d")
# (Before it, the digit of "4:15", or the blank a masked rejected value left: "not  :15";
# not French spacing, "Note :85".)
_JOINED_BEFORE = re.compile(r"(?:\d:|[ \t]{2}:|\d[ \t]*[比対对대][ \t]*)$")
_CURRENCY = re.compile(r"[\u00a5\u20ac\u00a3\u20b9\u20a9][ \t]*$")
_IDENTIFIER_BEFORE = re.compile(r"(?:\bnumber[ \t]+(?:is[ \t]+|was[ \t]+)?|#[ \t]*|"
                                r"(?<=[^\W\d_] )No\.[ \t]*)$", re.I)
_SCALE_AFTER = r"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*\d+|[ \t]*%)?"
_SHOWN_AFTER = re.compile(_SCALE_AFTER + r"[ \t]+(?:(?:is|was)[ \t]+what[ \t]+(?:the|this|that|"
                          r"its)[ \t]+(?:[^\W\d_]+[ \t]+){1,2}(?:shows?|says|reads|displays|lists|"
                          r"gives|states|indicates|prints)|(?:shown|displayed|printed|written|"
                          r"posted)[ \t]+(?:on|in)[ \t]+(?:the|this|that|its)\b)"
                          # "キャプションは3と書いています": the caption writes (says, shows) 3.
                          r"|[ \t]*[点分]?[ \t]*と(?:書|言|記|述|表示)", re.I)
# "the chart shows 45%", "the gauge reads 37", "the caption says 42%": a thing of the picture or
# the caption says it (not the judge's own working: "my assessment gives 85", "the sum gives").
_SHOWN_BEFORE = re.compile(r"\b(?:the|its|a|an)[ \t]+(?P<noun>(?:[^\W\d_]+[ \t]+){0,2}?"
                           r"[^\W\d_]+)[ \t]+(?:shows?|displays?|reads|indicates?|lists?|says|"
                           r"states|claims|reports|gives)[ \t]+(?:(?:a|an|the|only|just|about)"
                           r"[ \t]+)?[$\u00a5\u20ac\u00a3]?$", re.I)
_JUDGES_WORKING = frozenset({"evaluation", "analysis", "assessment", "review", "rating", "score",
                             "judgement", "judgment", "sum", "total", "calculation", "average",
                             "mean", "formula", "weighting", "math", "arithmetic", "rubric",
                             "verdict", "grade"})
_OWNED_BEFORE = re.compile(r"(?:[ \t]*(?:[:=]|\b(?:is|was|of)\b|[为為是]|は|[는은]))?[ \t*_$]*$")


def _money(text: str, n: Number) -> bool:
    """Whether ``n`` is written as money or a quantity ("¥450", "$4.20", "12,400")."""
    if "," in n.written or _CURRENCY.search(text, max(0, n.start - 3), n.start):
        return True
    # "$4.20": a dollar sign before two decimals that no closing "$" follows (G-VEval's "$85$"
    # and "$82.5$" are its format).
    return (text[max(0, n.start - 1): n.start] == "$" and re.fullmatch(r"\d+\.\d\d", n.written)
            is not None and not text.startswith("$", n.end))


_RUN = re.compile(r"\d+(?:\.\d+)?(?:,\d+(?:\.\d+)?)+")


def _listed(text: str, n: Number) -> bool:
    """Whether ``n`` is a member of a list or an array of numbers ("80,100,90", "[85,100]")."""
    for m in _RUN.finditer(text, max(0, n.start - 40), min(len(text), n.end + 40)):
        if m.start() <= n.start and n.end <= m.end():
            members = m.group(0).count(",") + 1
            bracketed = text[m.start() - 1: m.start()] == "[" and text.startswith("]", m.end())
            return members >= 3 or bracketed
    return False


def _under_owned_label(text: str, n: Number, line: int) -> bool:
    """Whether ``n`` is the value of a rating label another thing owns ("the app's score is")."""
    sep = _OWNED_BEFORE.search(text, line, n.start)
    head_end = sep.start() if sep is not None else n.start
    nouns = [m for m in _RATING_NOUN.finditer(text, line, head_end)
             if not text[m.end(): head_end].strip()]
    return bool(nouns) and owned_elsewhere(text, nouns[-1].start())


# A year: "the 2020 value", "in 1998" (off every scale here, it would only veto the verdict).
_YEAR = re.compile(r"(?:18|19|20)\d\d")


def _quoted_from_picture(text: str, n: Number, line: int) -> bool:
    """Whether ``n`` stands in a quotation of what the picture or the caption says.

    'The scoreboard reads "FINAL SCORE 85"', 'The sign says "Rating: 3"'.
    """
    for q in re.finditer(r"\"[^\"\n]{1,120}\"|\u201c[^\u201d\n]{1,120}\u201d", text[line:]):
        if line + q.start() < n.start and n.end < line + q.end():
            shown = _SHOWN_BEFORE.search(text, line, line + q.start())
            return shown is not None and _said_by_picture(shown)
    return False


def _said_by_picture(shown: re.Match[str]) -> bool:
    """Whether a match of :data:`_SHOWN_BEFORE` is said by the picture, not the judge."""
    return shown.group("noun").split()[-1].lower() not in _JUDGES_WORKING


def picture_value(text: str, n: Number) -> bool:
    """Whether ``n`` is a number of the picture, or of the caption, not a rating (module doc)."""
    if n.kind != "digits":
        return False
    line = start_of_line(text, n.start)
    shown = _SHOWN_BEFORE.search(text, line, n.start)
    return (_JOINED_AFTER.match(text, n.end) is not None
            or _JOINED_BEFORE.search(text, max(line, n.start - 5), n.start) is not None
            or _money(text, n) or _listed(text, n)
            or _IDENTIFIER_BEFORE.search(text, line, n.start) is not None
            or _SHOWN_AFTER.match(text, n.end) is not None
            or (shown is not None and _said_by_picture(shown))
            or (len(n.written) == 4 and _YEAR.fullmatch(n.written) is not None)
            or _quoted_from_picture(text, n, line) or _under_owned_label(text, n, line))


__all__ = ["compares_owners", "owned_elsewhere", "owner", "picture_value"]

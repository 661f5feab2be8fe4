"""Numbers said figuratively or in irony, blanked before any reading (corpus AH).

Judges talk like people. A number inside a fixed phrase is no rating ("Deserves a high five!",
"more characters than Ocean's 11", "one in a hundred captions", "it does a 180 from what's
shown", "it goes up to 11"), and a value said in irony is not the judge's ("Sure, let's give it
a 100 — it only missed the second half 🙄", "Oh, a flawless $100$, obviously"). Both are
blanked like the other things a careful reader skips (:mod:`capjudge.reading.masking`); where
the answer then states its value plainly, that is read, else the reader abstains.
"""

from __future__ import annotations

import re

from capjudge.reading.view import blank

# Fixed phrases holding a number that counts or rates nothing.
_IDIOMS = re.compile(
    r"\bhigh[\s-]+(?:five|5)s?\b|\btake\s+five\b|\bcloud\s+nine\b|\bcatch[\s-]+22\b|\b24/7\b|"
    r"\bnine[\s-]+to[\s-]+five\b|\bsixes\s+and\s+sevens\b|\b(?:my|his|her|our|their)\s+two\s+"
    r"cents\b|\bthe\s+whole\s+nine\s+yards\b|\bto\s+the\s+nines\b|\bseventh\s+heaven\b|"
    r"\bsecond\s+to\s+none\b|\b(?:a|one)\s+(?:million|thousand|hundred)\s+times\b|"
    r"\b(?:one|1)\s+in\s+(?:a|an?\s+)?(?:hundred|thousand|million|\d+)\b|"
    r"\b(?:a|full|complete)\s+(?:180|360)\b|\b(?:goes|go|turned|turn|up)\s+(?:up\s+)?to\s+11\b",
    re.I)
# A title or a name with its number: "Ocean's 11" ("Apollo 13", without a possessive, is left;
# so are contractions: "It's 4", "That's 85", "Here's 3").
_TITLE = re.compile(r"\b(?!(?:It|That|This|Here|There|What|Who|Where|He|She|Let|Everything|"
                    r"Nothing|Something|One|Which|How)['\u2019]s)[A-Z][a-z]+['\u2019]s\s+\d+\b"
                    r"(?!\s*(?:/|out\s+of|%))")
# A sentence marked as irony: an eye-roll, "/s", "yeah, right", "Sure, let's give it": every
# number of it is the irony's.
_IRONY = re.compile(r"[\U0001f644\U0001f612\U0001f643]|(?<!\w)/s\b|\byeah,?\s+right\b|"
                    r"\bsure,\s+let['\u2019]s\s+give\b", re.I)
# A weaker mark ("Oh, ...", ", obviously") makes only praise and its number ironic: "Oh, a
# flawless $100$, obviously" (not "Oh, perfect, it invents a frisbee: 20", nor "The final score
# is $90$, obviously").
_WEAK_IRONY = re.compile(r"\b(?:oh|ah),?\s+(?:sure|great|wonderful|brilliant|fantastic|perfect|"
                         r"yes|right|absolutely|a|an)\b|,\s*obviously\b", re.I)
_PRAISED_NUMBER = re.compile(r"\b(?:flawless|perfect|impeccable|immaculate|stellar|glorious|"
                             r"masterful|spotless)[\s*_]+(?:score\s+(?:of\s+)?)?\$?(?P<n>\d+)"
                             # "Oh, sure, 100.", "Oh, wonderful, a 100 for ...": the mark's own
                             r"|\b(?:oh|ah),?\s+(?:sure|great|wonderful|brilliant|fantastic|"
                             r"perfect|yes|right|absolutely)[,!]?\s+(?:an?\s+)?\$?(?P<m>\d+)",
                             re.I)
# A value denied right after it: "72 it is not", "80 it isn't".
_DENIED_AFTER = re.compile(r"(?<![\d.])\d+(?=[$*_`]*\s+it\s+(?:is\s+not|isn['\u2019]t)\b)", re.I)
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def mask_figurative(text: str) -> str:
    """Numbers in fixed phrases, denied ("72 it is not") or said in irony, blanked."""
    for m in [*_IDIOMS.finditer(text), *_TITLE.finditer(text), *_DENIED_AFTER.finditer(text)]:
        text = blank(text, m.start(), m.end())
    if _IRONY.search(text) is None and _WEAK_IRONY.search(text) is None:
        return text
    for s in _SENTENCE.finditer(text):
        sentence = s.group(0)
        if not sentence.strip():
            continue
        if _IRONY.search(sentence) is not None:
            for n in list(_NUMBER.finditer(text, s.start(), s.end())):
                text = blank(text, n.start(), n.end())
        elif _WEAK_IRONY.search(sentence) is not None:
            for m in _PRAISED_NUMBER.finditer(sentence):
                group = "n" if m.group("n") is not None else "m"
                text = blank(text, s.start() + m.start(group), s.start() + m.end(group))
    return text


__all__ = ["mask_figurative"]

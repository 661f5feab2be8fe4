"""A verdict the judge says belongs to another item of its session (corpus AL).

Teams run a judge in one long chat, behind an agent with memory, or through a server that
reuses a conversation: its context holds other items, and its answer may say that the verdict
it gives is not a judgement of this request's candidate at all:

- **this item's media never reached it** and it fell back on another's: "the image for this
  item did not load, so based on the previous image: 2", "No new image arrived ... the only
  picture is still the previous one", "The attached image is blank";
- **it carries another item's verdict over**: "I'll keep my rating for the previous image: 3",
  "reusing the previous object's scores", "This object was already evaluated (object 9)";
- **it judged the caption against another picture**: "I compared the caption with the
  previous picture (the lighthouse)", "going by the previous image";
- **it picked one of several candidates** and scored the pick: "Best of the 4 candidates:
  Caption 3", "The final score is $90$ for the best caption (#1)".

Such a number is another item's (or this caption set against another item's picture), however
well it is written: the answer has no reading of this candidate, and a follow-up question
would only repeat the carried-over number. Comparisons with another item ("better than the
previous caption, which I gave 70: 82") are judgements of this one, and are left to the other
rules (:func:`capjudge.reading.masking.mask_other_items` blanks the other item's number).
"""

from __future__ import annotations

import re

from capjudge.reading.contract import sentence_start
from capjudge.reading.masking import sentence_quoted

_MEDIA = (r"(?:images?|pictures?|photos?|photographs?|renders?|renderings?|frames?|videos?|"
          r"clips?|views?|tiles?|visuals?)")
_PREVIOUS = r"(?:previous|prior|preceding|earlier|last|old|former)"
_ITEM = rf"(?:{_MEDIA}|items?|objects?|ones?|samples?|captions?|requests?|turns?|messages?)"
_VERDICT = (r"(?:scores?|ratings?|assessments?|evaluations?|verdicts?|grades?|marks?|"
            r"judge?ments?|counts?|numbers?)")
_NOT = re.compile(r"(?:\bnot|n't|n\u2019t|\bnever|\brather\s+than|\binstead\s+of|\bwithout|\bif|"
                  r"\bwould|\bhad|\bunless|\bwhether)\b[^.;\n]{0,40}$", re.I)

# This item's media is missing: "the image for this item did not load", "No new image arrived",
# "Image not visible for this object", "The attached image is blank". Only with another item
# named as what the judge went by instead (a judge that says so and works from the references
# is the decline rules' concern, :func:`capjudge.reading.masking.find_decline`).
_MISSING = re.compile(
    rf"\b(?:this|the|your)\s+(?:new\s+|attached\s+|current\s+|provided\s+)?{_MEDIA}"
    r"(?:\s+(?:for|of|in)\s+(?:this|the\s+current)\s+(?:item|object|message|request|turn|"
    r"caption|sample))?\s+(?:did\s*n[o'\u2019]t|didn't|has\s*n[o'\u2019]t|hasn't|failed\s+to|"
    r"does\s*n[o'\u2019]t|doesn't|won't|would\s*n[o'\u2019]t|could\s*n[o'\u2019]t)\s+"
    r"(?:load|render|come\s+through|arrive|attach|display|open|show\s+up)"
    rf"|(?:this|the\s+(?:new|attached|current|provided))\s+{_MEDIA}\s+(?:is|was)\s+"
    r"(?:blank|empty|missing|not\s+visible|not\s+attached|unavailable|corrupt(?:ed)?)"
    rf"|{_MEDIA}\s+not\s+(?:visible|loaded|attached|available)\s+for\s+this\b"
    rf"|\bno\s+new\s+{_MEDIA}\b"
    rf"|\b(?:can(?:no|'|\u2019)?t|cannot|do\s*n[o'\u2019]t|don't|not\s+able\s+to|unable\s+to)\s+"
    rf"see\s+(?:an?\s+|any\s+|the\s+)?(?:new\s+)?{_MEDIA}\s+(?:in|with|attached\s+to|for)\s+"
    r"(?:this|your|the\s+current)\s+(?:message|turn|request|item|prompt)", re.I)
_PREVIOUS_ITEM = re.compile(rf"\b(?:{_PREVIOUS}\s+(?:{_ITEM}|ones?)|same\s+(?:{_MEDIA}|item|"
                            r"object)\s+as\s+before)\b", re.I)

_CARRIED = re.compile(
    # Another item's verdict carried over: "using my rating for the previous image",
    # "reusing the previous object's scores" (not "I'll keep my previous score": a second
    # request about the same item may say so).
    rf"\b(?:reus(?:e|ed|es|ing)|keep(?:s|ing)?|kept|carr(?:y|ies|ying|ied)\s+over|"
    r"repeat(?:s|ed|ing)?|us(?:e|es|ed|ing)|cop(?:y|ies|ied|ying)|apply|applying|stick\s+with|"
    r"stay\s+with)\s+(?:(?:my|the|its|their|that|same)\s+){0,2}"
    rf"(?:{_VERDICT}\s+(?:for|of|from|on|(?:I\s+)?(?:gave|assigned|awarded)(?:\s+to)?)\s+"
    rf"(?:the\s+|my\s+|that\s+)?{_PREVIOUS}\s+{_ITEM}"
    rf"|{_PREVIOUS}\s+{_ITEM}(?:'s|\u2019s)\s+{_VERDICT})\b"
    r"|\b(?:this|the\s+same)\s+(?:object|image|picture|item|caption|render|photo|one)\s+"
    r"(?:was|has\s+been|had\s+been|is)\s+already\s+(?:been\s+)?(?:evaluated|scored|rated|"
    r"judged|assessed|graded)"
    # A pick among several candidates, named by its number: "Best of the 4 candidates: Caption
    # 3 - ...", "Caption B is the best": the verdict is the pick's, and nothing says which
    # number this request's candidate had.
    r"|\bbest\s+(?:of|among)\s+(?:the|these|all)\s+(?:\d+\s+|two\s+|three\s+|four\s+|five\s+|"
    r"several\s+)?(?:candidates|captions|descriptions|options)\b[^.\n]{0,40}?\b(?:caption|"
    r"candidate|option)\s+(?:#\s*)?(?:\d+|[A-E])\b"
    r"|\b(?:caption|candidate|option)\s+(?:#\s*)?(?:\d+|[A-E])\s+is\s+(?:the\s+)?best\b"
    # "The final score is $90$ for the best caption (#1)."
    r"|\bfor\s+the\s+best\s+(?:caption|candidate|option|description)\b"
    # This caption judged against another item's picture: "going by the previous image",
    # "based on the previous image", "I compared the caption with the previous picture".
    r"|\b(?:going\s+by|based\s+on|relying\s+on|judg(?:e|ed|ing)\s+(?:it\s+|the\s+caption\s+|"
    r"this\s+caption\s+)?(?:by|against|on)|compar(?:e|ed|ing)\s+(?:it|the\s+caption|this\s+"
    r"caption)\s+(?:with|to|against))\s+(?:the|that|my)\s+(?:same\s+)?"
    rf"{_PREVIOUS}\s+{_MEDIA}", re.I)


def find_elsewhere(text: str, original: str | None = None) -> str | None:
    """The sentence saying the verdict is another item's, or None.

    Run on the masked text (a candidate that says "the previous image failed to load" is the
    candidate speaking); the sentence is quoted from ``original`` when given. Not where the
    sentence denies or supposes it ("I did not reuse my previous score", "if the image had
    not loaded, I would ...").
    """
    found = [*_CARRIED.finditer(text)]
    if _PREVIOUS_ITEM.search(text):
        found += [*_MISSING.finditer(text)]
    for m in sorted(found, key=lambda m: m.start()):
        if not _NOT.search(text, sentence_start(text, m.start(), ".\n"), m.start()):
            return sentence_quoted(text, m.start(), m.end(), original)
    return None

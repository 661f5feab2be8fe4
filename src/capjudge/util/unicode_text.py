"""Text that looks the same: one canonical form for comparing what people read as equal.

Used where two strings must be told apart or matched as a reader would: item ids at ingest
(NFC vs NFD "café", a trailing space, a zero-width space, NBSP, full-width letters), file
names, and a judge's answer (:mod:`capjudge.reading.view`).
"""

from __future__ import annotations

import unicodedata

INVISIBLE = frozenset("\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e\u2061\u2062\u2063\u2064"
                      "\ufe0e\ufe0f\u20e3\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                      "\u2066\u2067\u2068\u2069")
"""Format characters that are never content: zero-width spaces and joiners, the word joiner,
the byte order mark, the soft hyphen, variation selectors, the keycap mark, bidi controls."""


def look_alike_key(text: str) -> str:
    """What a reader sees: NFKC, invisible characters removed, outer whitespace stripped.

    "café" (NFC or NFD), "café " and "ｃａｆé" have the same key.
    """
    visible = "".join(c for c in text if c not in INVISIBLE)
    return unicodedata.normalize("NFKC", visible).strip()

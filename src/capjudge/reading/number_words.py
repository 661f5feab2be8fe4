"""Numbers 0-100 spelled out in Spanish, French, German, Italian and Portuguese.

"setenta y ocho", "soixante-dix-huit", "fünfundsiebzig", "settantotto", "setenta e oito":
each language's forms are generated from its rules (tens and units, the teens, French's
vigesimal seventies and nineties, German's unit-first compounds, Italian's elided vowels),
with and without accents and with spaces or hyphens, and matched whole.

The reader looks for them only where a value is expected (after a label, at the answer's
opening: :func:`spelled_at`); a sentence's words are never scanned for them, so a homograph
in prose ("neuf", "due", "sei") is not a number. The forms of "one" that are also articles
("un", "une", "uno", "una", "ein", "eine", "um", "uma") are left out; inside a compound
("veintiuno", "vingt et un", "einundzwanzig") they count.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

_ES_UNITS = ["cero", "", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve",
             "diez", "once", "doce", "trece", "catorce", "quince", "dieciséis", "diecisiete",
             "dieciocho", "diecinueve", "veinte", "veintiuno", "veintidós", "veintitrés",
             "veinticuatro", "veinticinco", "veintiséis", "veintisiete", "veintiocho",
             "veintinueve"]
_ES_TENS = {30: "treinta", 40: "cuarenta", 50: "cincuenta", 60: "sesenta", 70: "setenta",
            80: "ochenta", 90: "noventa"}
_FR_UNITS = ["zéro", "", "deux", "trois", "quatre", "cinq", "six", "sept", "huit", "neuf",
             "dix", "onze", "douze", "treize", "quatorze", "quinze", "seize", "dix-sept",
             "dix-huit", "dix-neuf"]
_FR_TENS = {20: "vingt", 30: "trente", 40: "quarante", 50: "cinquante", 60: "soixante"}
_DE_UNITS = ["null", "", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun",
             "zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn",
             "achtzehn", "neunzehn"]
_DE_TENS = {20: "zwanzig", 30: "dreißig", 40: "vierzig", 50: "fünfzig", 60: "sechzig",
            70: "siebzig", 80: "achtzig", 90: "neunzig"}
_IT_UNITS = ["zero", "", "due", "tre", "quattro", "cinque", "sei", "sette", "otto", "nove",
             "dieci", "undici", "dodici", "tredici", "quattordici", "quindici", "sedici",
             "diciassette", "diciotto", "diciannove"]
_IT_TENS = {20: "venti", 30: "trenta", 40: "quaranta", 50: "cinquanta", 60: "sessanta",
            70: "settanta", 80: "ottanta", 90: "novanta"}
_PT_UNITS = ["zero", "", "dois", "três", "quatro", "cinco", "seis", "sete", "oito", "nove",
             "dez", "onze", "doze", "treze", "catorze", "quinze", "dezesseis", "dezessete",
             "dezoito", "dezenove"]
_PT_TENS = {20: "vinte", 30: "trinta", 40: "quarenta", 50: "cinquenta", 60: "sessenta",
            70: "setenta", 80: "oitenta", 90: "noventa"}
# Portuguese spellings besides the tables' (European and Brazilian ones, the feminine "duas").
_PT_VARIANTS = {"quatorze": 14, "dezasseis": 16, "dezassete": 17, "dezanove": 19, "duas": 2}


def _compounds(units: list[str], tens: dict[int, str], one: str,
               write: Callable[[str, int, str], str]) -> dict[str, int]:
    """The units alone (but the article-like one), each tens word alone and with each unit.

    ``write(tens_word, unit, unit_word)`` spells a compound the language's way ("setenta y
    ocho", "soixante-huit", "achtundsechzig", "settantotto"); ``one`` is the unit's word for 1
    inside a compound ("uno", "un", "ein").
    """
    forms = {word: value for value, word in enumerate(units) if word}
    for value, word in tens.items():
        forms[word] = value
        for unit in range(1, 10):
            forms[write(word, unit, units[unit] or one)] = value + unit
    return forms


def _spanish() -> dict[str, int]:
    forms = _compounds(_ES_UNITS, _ES_TENS, "uno", lambda t, u, w: f"{t} y {w}")
    forms.update({"cien": 100, "ciento": 100, "veintiún": 21})
    return forms


def _french() -> dict[str, int]:
    def write(tens: str, unit: int, word: str) -> str:
        return f"{tens} et un" if unit == 1 else f"{tens}-{word}"

    # Belgian and Swiss French count on in tens: "septante", "huitante", "nonante".
    forms = _compounds(_FR_UNITS, {**_FR_TENS, 70: "septante", 80: "huitante", 90: "nonante"},
                       "un", write)
    forms["soixante et onze"] = 71
    for teen in range(10, 20):
        if teen != 11:
            forms[f"soixante-{_FR_UNITS[teen]}"] = 60 + teen
    forms["quatre-vingts"] = forms["quatre-vingt"] = 80
    forms["quatre-vingt-un"] = 81
    for unit in range(2, 20):
        forms[f"quatre-vingt-{_FR_UNITS[unit]}"] = 80 + unit
    forms.update({"cent": 100, "octante": 80})
    return forms


def _german() -> dict[str, int]:
    forms = _compounds(_DE_UNITS, _DE_TENS, "ein", lambda t, u, w: f"{w}und{t}")
    forms.update({"hundert": 100, "einhundert": 100, "eins": 1})
    return forms


def _italian() -> dict[str, int]:
    def write(tens: str, unit: int, word: str) -> str:
        stem = tens[:-1] if unit in (1, 8) else tens  # "ventuno", "settantotto"
        return stem + ("tré" if unit == 3 else word)

    forms = _compounds(_IT_UNITS, _IT_TENS, "uno", write)
    forms["cento"] = 100
    return forms


def _portuguese() -> dict[str, int]:
    forms = _compounds(_PT_UNITS, _PT_TENS, "um", lambda t, u, w: f"{t} e {w}")
    forms.update(_PT_VARIANTS)
    forms["cem"] = 100
    return forms


def _plain(word: str) -> str:
    """``word`` without its accents ("dieciséis" -> "dieciseis", "dreißig" stays)."""
    return "".join(c for c in unicodedata.normalize("NFD", word)
                   if unicodedata.category(c) != "Mn")


@functools.cache
def spelled_forms() -> dict[str, int]:
    """Every spelling known, lower-case, with its value (accents optional; "ß" or "ss")."""
    forms: dict[str, int] = {}
    for table in (_spanish(), _french(), _german(), _italian(), _portuguese()):
        for word, value in table.items():
            for variant in {word, _plain(word), word.replace("ß", "ss"),
                            word.replace("-", " ")}:
                # A spelling two languages share means the same number in both.
                forms.setdefault(variant, value)
    return forms


@functools.cache
def spelled_pattern() -> re.Pattern[str]:
    """All spellings as one pattern, longest first, each a whole word."""
    words = sorted(spelled_forms(), key=len, reverse=True)
    parts = [re.escape(w).replace(r"\ ", r"[\s-]+").replace(r"\-", r"[\s-]+") for w in words]
    return re.compile(r"(?<![^\W\d_])(?:" + "|".join(parts) + r")(?![^\W\d_])", re.I)


def spelled_at(text: str, pos: int) -> tuple[int, int] | None:
    """``(end, value)`` of the spelled-out number that starts at ``pos``, or None."""
    m = spelled_pattern().match(text, pos)
    if m is None:
        return None
    key = re.sub(r"[\s-]+", " ", m.group(0).lower())
    forms = spelled_forms()
    value = forms.get(key, forms.get(key.replace(" ", "-")))
    if value is None:
        return None
    return m.end(), value

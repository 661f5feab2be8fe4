"""The words that name a verdict, in the languages judges answer in.

A slot is found under its own names (its ``name`` and ``label``: "accuracy", "final score")
and their translations; a slot that is its request's only one is also found under the generic
names of a verdict ("score", "rating", "overall", "评分", "Puntuación" ...). Names are compared
in :func:`key` form: case-folded, NFKC, letters and digits only ("Final Score" and
``final_score`` are both ``finalscore``).

What the methods' prompts call their criteria is theirs (the slot's name and label); this
module only knows how other languages say the same words.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

from capjudge.protocol import ScoreSlot

# English criterion name -> how judges write it in other languages (and English variants).
TRANSLATIONS: dict[str, tuple[str, ...]] = {
    "accuracy": ("accurate", "准确性", "準確性", "准确度", "準確度", "正確性", "正确性", "精度",
                 "정확성", "정확도", "precisión", "exactitud", "genauigkeit", "exactitude",
                 "précision", "accuratezza", "precisione", "precisão", "exatidão", "точность",
        # Other European, Middle Eastern and Asian languages.
        "độ chính xác",
        "nauwkeurigheid", "dokładność", "přesnost", "presnosť", "točnost", "tačnost", "preciznost",
        "natančnost", "pontosság", "acuratețe", "exactitate", "kesinlik", "noggrannhet",
        "nøjagtighed", "nøyaktighet", "tarkkuus", "ακρίβεια", "точність", "akurasi", "ketepatan",
        "ความแม่นยำ", "सटीकता", "الدقة", "דיוק", "دقت",
        # Bulgarian, Serbian (Cyrillic), Catalan, Afrikaans, Icelandic, Baltic, Georgian, Urdu,
        # Gujarati.
        "точност", "тачност", "прецизност", "precisió", "akkuraatheid", "nákvæmni",
        "tikslumas", "precizitāte", "სიზუსტე", "درستگی", "ચોકસાઈ"),
    "completeness": ("complete", "coverage", "完整性", "完整度", "完全性", "網羅性", "网罗性",
                     "완전성", "완결성", "completitud", "integridad", "exhaustividad",
                     "vollständigkeit", "complétude", "exhaustivité", "completezza", "completude",
                     "полнота",
        # Other European, Middle Eastern and Asian languages.
        "độ đầy đủ", "tính đầy đủ", "độ hoàn chỉnh",
        "volledigheid", "kompletność", "zupełność", "úplnost", "úplnosť", "potpunost", "popolnost",
        "teljesség", "completitudine", "bütünlük", "eksiksizlik", "fullständighet",
        "fuldstændighed", "fullstendighet", "kattavuus", "täydellisyys", "πληρότητα", "повнота",
        "kelengkapan", "ความครบถ้วน", "पूर्णता", "الاكتمال", "الشمولية", "שלמות", "جامعیت",
        "пълнота", "потпуност", "completitude", "completesa", "fullkomleiki", "heildstæði",
        "išsamumas", "pilnīgums", "სისრულე", "مکملیت", "સંપૂર્ણતા"),
    "conciseness": ("concise", "简洁性", "簡潔性", "简洁度", "簡潔度", "간결성", "concisión",
                    "prägnanz", "kürze", "concision", "concisione", "concisão", "краткость",
                    "лаконичность",
        # Other European, Middle Eastern and Asian languages.
        "độ súc tích", "tính súc tích", "tính ngắn gọn",
        "beknoptheid", "zwięzłość", "stručnost", "stručnosť", "sažetost", "jezgrovitost",
        "jedrnatost", "tömörség", "concizie", "özlülük", "kısalık", "koncishet", "kortfattethed",
        "konsishet", "tiiviys", "ytimekkyys", "συντομία", "стислість", "лаконічність",
        "keringkasan", "ความกระชับ", "संक्षिप्तता", "الإيجاز", "תמציתיות", "ایجاز",
        "краткост", "сбитост", "лаконичност", "сажетост", "концизност", "concisió", "bondigheid",
        "hnitmiðun", "glaustumas", "kodolīgums", "ლაკონურობა", "اختصار", "સંક્ષિપ્તતા"),
    "relevance": ("relevant", "相关性", "相關性", "関連性", "関係性", "관련성", "relevancia",
                  "pertinencia", "relevanz", "pertinence", "pertinenza", "rilevanza",
                  "relevância", "релевантность",
        # Other European, Middle Eastern and Asian languages.
        "độ liên quan", "mức độ liên quan", "tính liên quan",
        "relevantie", "trafność", "istotność", "relevantnost", "relevantnosť", "ustreznost",
        "relevancia", "relevanță", "alakalılık", "ilgililik", "relevans", "relevanssi", "osuvuus",
        "συνάφεια", "релевантність", "доречність", "relevansi", "ความเกี่ยวข้อง", "प्रासंगिकता",
        "الصلة", "الملاءمة", "רלוונטיות",
        "уместност", "релевантност", "rellevància", "relevansie", "mikilvægi", "aktualumas",
        "atbilstība", "შესაბამისობა", "مطابقت", "સુસંગતતા"),
    "correctness": ("correct", "正确性", "正確性", "正确度", "正確度", "정확성", "corrección",
                    "correccion", "exactitud", "korrektheit", "richtigkeit", "exactitude",
                    "correction", "correttezza", "correção", "правильность",
        # Other European, Middle Eastern and Asian languages.
        "correctheid", "juistheid", "poprawność", "správnost", "správnosť", "ispravnost",
        "pravilnost", "helyesség", "corectitudine", "doğruluk", "korrekthet", "korrekthed",
        "oikeellisuus", "ορθότητα", "правильність", "kebenaran", "ความถูกต้อง", "शुद्धता", "الصحة",
        "נכונות", "صحت",
        "правилност", "коректност", "исправност", "correcció", "korrektheid", "réttmæti",
        "teisingumas", "pareizība", "სისწორე", "શુદ્ધતા"),
    "clarity": ("clear", "清晰度", "清晰性", "明确性", "明確性", "明瞭性", "명확성",
                "claridad", "klarheit", "clarté", "chiarezza", "clareza", "ясность"),
    "fluency": ("fluent", "流畅性", "流暢性", "流畅度", "流暢さ", "유창성",
                "fluidez",
                "flüssigkeit", "fluidité", "fluidità", "беглость"),
    "hallucination": ("hallucinations", "幻觉", "幻覺", "ハルシネーション", "환각", "alucinación",
                      "alucinaciones", "halluzination", "halluzinationen", "allucinazione",
        # Other European, Middle Eastern and Asian languages.
        "hallucinatie", "halucynacja", "halucinace", "halucinacija", "hallucináció",
        "halüsinasyon", "hallucinationer", "hallusinasjon", "hallusinaatio", "ψευδαίσθηση",
        "галюцинація", "halusinasi", "ภาพหลอน", "مهلوسة", "הזיה"),
    "final score": ("final", "最终得分", "最終得分", "最终分数", "最終分數", "最终评分", "最終評分",
                    "最終スコア", "最終点数", "最終評価", "최종점수", "최종 점수",
                    "puntuación final",
                    "puntuacion final", "calificación final", "note finale", "score final",
                    "endgültige punktzahl", "endpunktzahl", "gesamtpunktzahl", "endnote",
                    "punteggio finale", "pontuação final", "nota final", "итоговая оценка",
                    "итоговый балл",
        # Other European, Middle Eastern and Asian languages.
        "eindscore", "eindcijfer", "wynik końcowy", "ocena końcowa", "konečné skóre",
        "celkové skóre", "výsledné skóre", "konačna ocjena", "konačni rezultat", "končna ocena",
        "végső pontszám", "scor final", "nihai puan", "son puan", "slutpoäng", "slutbetyg",
        "endelig score", "slutscore", "endelig poengsum", "lopullinen pistemäärä", "loppupisteet",
        "τελική βαθμολογία", "підсумкова оцінка", "điểm cuối cùng", "skor akhir", "nilai akhir",
        "คะแนนสุดท้าย", "अंतिम स्कोर", "الدرجة النهائية", "ציון סופי", "امتیاز نهایی",
        "крайна оценка", "краен резултат", "коначна оцена", "puntuació final", "eindtelling",
        "finale telling", "lokaeinkunn", "galutinis balas", "gala vērtējums", "საბოლოო ქულა",
        "حتمی اسکور", "અંતિમ સ્કોર"),
}

# Aspects other evaluation schemes rate that no method here asks for (G-Eval's coherence and
# consistency, reward models' helpfulness ...; not appropriateness, VisCE²'s own): a value under
# one of their names rates that aspect, not the slot (corpus AF: "- Coherence: 4" answering
# HarmonicEval's clarity prompt). Their English names only: "consistent" is everyday prose.
OTHER_ASPECTS = ("coherence", "consistency", "informativeness",
                 "faithfulness", "groundedness", "helpfulness", "harmlessness", "naturalness",
                 "engagingness", "specificity", "creativity", "aesthetics", "descriptiveness")

# The criteria the vocabulary knows by name (a verdict under another's name rates that one).
CRITERIA = (*(w for w in TRANSLATIONS if w != "final score"), *OTHER_ASPECTS)

# Any criterion's name, in every language the vocabulary knows ("Completeness", "完整性",
# "Vollständigkeit"): a value after one belongs to that criterion.
ANY_CRITERION = re.compile("|".join(
    rf"\b{re.escape(w)}" if w.isascii() else re.escape(w)
    for w in sorted({w for c in CRITERIA for w in (c, *TRANSLATIONS.get(c, ()))}, key=len,
                    reverse=True)), re.I)

# The names of a verdict as such (for a slot that is its request's only one).
GENERIC = ("score", "final", "final score", "rating", "final rating", "overall", "overall score",
           "overall rating", "grade", "final grade", "verdict", "final verdict", "final answer",
           "answer",
           "result", "evaluation", "evaluation score", "total", "total score",
           "评分", "得分", "分数", "分數", "总分", "總分", "评价", "評価", "评估", "点数", "スコア",
           "점수", "평가", "puntuación", "puntaje", "calificación", "nota", "note",
           "punktzahl", "bewertung", "punteggio", "voto", "valutazione", "pontuação",
           "avaliação", "оценка", "балл",
           # Other European, Middle Eastern and Asian languages.
           "skóre", "hodnocení", "hodnotenie", "ocena", "wynik", "ocjena", "pontszám", "értékelés",
           "puan", "değerlendirme", "poäng", "betyg", "pisteet", "arvosana", "βαθμολογία",
           "оцінка", "điểm", "skor", "nilai", "คะแนน", "स्कोर", "अंक", "الدرجة", "التقييم",
           "ציון", "امتیاز", "cijfer", "beoordeling", "scor", "notă")

# Words that mark a value as the final one among several.
FINAL_WORDS = re.compile(r"\b(?:final|finally|overall|conclusion|in\s+sum|verdict)\b|最终|最終|"
                         r"总体|최종|endgültig|finale?s?\b|итог", re.I)


def key(name: str) -> str:
    """``name`` as compared: NFKC, case-folded, letters and digits only."""
    return "".join(c for c in unicodedata.normalize("NFKC", name).casefold() if c.isalnum())


def slot_names(slot: ScoreSlot) -> tuple[str, ...]:
    """The slot's own names and their translations (the specific names)."""
    own = [slot.name, *([slot.label] if slot.label else [])]
    names = list(own)
    for word in own:
        names += TRANSLATIONS.get(word.lower(), ())
    return tuple(dict.fromkeys(n for n in names if n))


# Short cuts that are words of their own ("con", "flu", "hall") or too common to be a label.
_NOT_ABBREVIATIONS = frozenset({"con", "com", "cor", "flu", "hal", "hall", "clar", "cla"})


def abbreviations(slot: ScoreSlot) -> tuple[str, ...]:
    """The slot's criterion name cut short: "Acc", "Comp.", "Conc", "Rel" (ACCR on one line).

    Only a criterion the vocabulary knows, cut to three letters or more where the cut starts
    no other criterion's name ("Co" could be completeness, conciseness or correctness); each
    also with its full stop ("Acc."). A reading under an abbreviation is never the method's
    own format (:mod:`capjudge.reading.contract`).
    """
    name = slot.name.lower()
    if name not in TRANSLATIONS or not name.isalpha():
        return ()
    others = [w for w in TRANSLATIONS if w != name and w.isascii()]
    cuts = [name[:k] for k in range(3, len(name))
            if name[:k] not in _NOT_ABBREVIATIONS
            and not any(o.startswith(name[:k]) for o in others)]
    return tuple(c + dot for c in cuts for dot in ("", "."))


def is_generic(slot: ScoreSlot) -> bool:
    """Whether the slot also answers to the generic names of a verdict.

    The slot is the answer's one verdict (an unlabelled slot, or the ``score`` slot), so a
    bare "Score:" or ``{"rating": 4}`` is about it; a labelled criterion (ACCR's
    "Accuracy") is found only under its own names.
    """
    return slot.label is None or slot.name == "score"


_SUFFIXES = ("", "score", "rating", "points", "point", "value", "grade", "评分", "得分", "分数",
             "スコア", "점수", "puntuación", "note", "punktzahl", "punteggio")
# (schema.org's Rating names its value "ratingValue", beside "bestRating" and "worstRating".)
_GENERIC_KEYS = frozenset({key(g) for g in GENERIC} | {"final" + key(g) for g in GENERIC}
                          | {"overall" + key(g) for g in GENERIC}
                          | {key(g) + "value" for g in GENERIC})


def _forms(name: str) -> set[str]:
    """A name's key with the words that may follow or precede it ("accuracy_score")."""
    k = key(name)
    return {k + key(s) for s in _SUFFIXES} | {"final" + k, k + "final", "overall" + k}


def matches(name: str, slot: ScoreSlot) -> int:
    """How well a field or label name names the slot: 2 its own name, 1 generic, 0 not.

    ``"accuracy"``, ``"Accuracy score"``, ``"准确性"`` name ACCR's accuracy slot (2);
    ``"score"``, ``"final_score"``, ``"rating"`` name a slot that is its request's only
    verdict (1); ``"score_max"`` or ``"reason"`` name nothing (0).
    """
    k = key(name)
    if not k:
        return 0
    if any(k in _forms(n) for n in slot_names(slot)):
        return 2
    if is_generic(slot) and k in _GENERIC_KEYS:
        return 1
    return 0


def criteria_named(name: str) -> list[str]:
    """The criteria the vocabulary knows that ``name`` names by their own names.

    "Fluency" names fluency; "Objects", "Overall" name none.
    """
    return [c for c in CRITERIA if matches(name, ScoreSlot(c, 0, 1, label=c)) == 2]


def label_pattern(names: Sequence[str]) -> str:
    """A regex alternation of label names, longest first, words kept whole."""
    return _label_alternation(tuple(names))


@functools.lru_cache(maxsize=256)
def _label_alternation(names: tuple[str, ...]) -> str:
    # Cached: a method's few label sets are asked for with every answer read.
    parts = sorted({re.escape(n).replace(r"\ ", r"[\s_]+") for n in names}, key=len,
                   reverse=True)
    return r"(?<![A-Za-z])(?:" + "|".join(parts) + r")(?![A-Za-z])"

r"""The answer as a reader sees it: normalised, without its reasoning, offsets kept.

Before anything looks for a verdict, the answer is put in one canonical form
(:func:`answer_view`):

- **Unicode NFKC**, character by character: full-width digits and letters ("８５", "ＡＢ"),
  full-width punctuation ("：", "＄", "（"), the non-breaking space and other look-alikes
  become their plain forms; the fraction slash becomes "/" and the minus sign "-".
- **Invisible characters removed**: zero-width spaces and joiners, the word joiner, the byte
  order mark, the soft hyphen, variation selectors and the keycap mark ("8\u200b5" is 85,
  "4️⃣" is 4), bidirectional controls.
- **Every script's decimal digits** as ASCII digits ("٨٥", "८५" are 85).
- **Reasoning removed**: ``<think>…</think>`` and its kin (``<thinking>``, ``<reasoning>``,
  ``<thought>``, ``<|begin_of_thought|>…<|end_of_thought|>``, ``◁think▷…◁/think▷``) are never
  the answer. A closing tag with no opening one (the chat template opened the block in the
  prompt) makes everything before it reasoning. An opening tag that is never closed means the
  answer ended inside its reasoning: :attr:`AnswerView.reasoning_cut`. Where the answer wraps
  its verdict in ``<answer>…</answer>``, only that part is read.
- **A serving API's whole response** logged as the message (a llama.cpp ``/completion`` body,
  OpenAI chunks as ``data:`` lines, Ollama's NDJSON, ...) reads as the text it carries
  (:mod:`capjudge.reading.envelope`).
- **Chat-template tokens end the answer** (issue 40): ``<|im_end|>``, ``<|im_start|>``,
  ``<end_of_turn>``, ``<|eot_id|>``, ``<|endoftext|>``, ``</s>``, ``[INST]`` ... A model that
  leaks one has stopped its turn: what follows (often an invented user turn and another
  answer) is never the judge's verdict. Tokens before any content (and their role word) are
  skipped.
- **gpt-oss's harmony channels**: only the ``final`` channel is the answer; the ``analysis``
  channel is reasoning (an answer with no final channel never wrote its verdict).
- **HTML character references** (``&#36;``, ``&quot;``, ``&lt;``) read as their character and
  ``<br>`` as a line break: an answer that went through an HTML escaper on its way.
- **HTML markup** (``<p>``, ``<b>``, ``<li>``, ``<dt>``/``<dd>`` ...) read as spaces, the end of a
  definition term as its label's colon: an answer rendered by a chat UI or a gateway.
- **Struck-through text** (``~~$85$~~``, ``<del>``, ``<s>``) is text the judge deleted: blanked.
- **LaTeX math delimiters** ``\( 82 \)`` and ``\[ 82 \]`` read as ``$ 82 $``; an
  **arithmetic verdict** inside the delimiters (``$100 - 12 - 6 = 82$``) reads as its result.

The view keeps a map from each of its characters to the original's offset (:meth:`origin`),
so a number found in the view is found in the original answer and in its tokens.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass

from capjudge.reading.arithmetic import miscounted
from capjudge.reading.envelope import unwrap
from capjudge.util.unicode_text import INVISIBLE as _INVISIBLE

# Format characters a judge (or a copy-paste) leaves inside words and numbers; never content.
INVISIBLE = _INVISIBLE
# Vulgar fractions stay themselves: NFKC would write "2½" as "21/2".
VULGAR = {"½": 0.5, "¼": 0.25, "¾": 0.75, "⅓": 1 / 3, "⅔": 2 / 3, "⅕": 0.2, "⅖": 0.4,
          "⅗": 0.6, "⅘": 0.8, "⅙": 1 / 6, "⅚": 5 / 6, "⅛": 0.125, "⅜": 0.375, "⅝": 0.625,
          "⅞": 0.875}
# NFKC leaves these as they are; a reader takes them for their ASCII twins. (SentencePiece's
# word-start mark "\u2581" is a space a detokeniser failed to restore: "Score:\u25812".)
_PLAIN = {"\u2044": "/", "\u2215": "/", "\u2212": "-", "\u2010": "-", "\u2011": "-",
          "\u00d7": "x", "\u3000": " ", "\u2581": " "}

# A superscript digit glued to what precedes it is a footnote marker ("$83$¹", "76¹", "husky²"),
# not a digit of the number: NFKC would read "76¹" as 761 and "7¹" as 71 (corpus AC).
_SUPERSCRIPT_DIGITS = frozenset("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")

_BLOCKS = [
    # (also namespaced: Seed-OSS's "<seed:think>")
    (re.compile(r"<\s*((?:[\w-]+:)?(?:think|thinking|reasoning|thought|reflection))\s*>", re.I),
     lambda name: re.compile(rf"<\s*/\s*{re.escape(name)}\s*>", re.I)),
    (re.compile(r"<\|begin_of_thought\|>", re.I),
     lambda _: re.compile(r"<\|end_of_thought\|>", re.I)),
    (re.compile(r"\u25c1think\u25b7"), lambda _: re.compile(r"\u25c1/think\u25b7")),
]
_LONE_CLOSE = re.compile(r"<\s*/\s*(?:[\w-]+:)?(?:think|thinking|reasoning|thought)\s*>|"
                         r"<\|end_of_thought\|>"
                         r"|\u25c1/think\u25b7", re.I)
_ANSWER = re.compile(r"<\s*answer\s*>(.*?)(?:<\s*/\s*answer\s*>|$)", re.I | re.S)
_TAG = re.compile(r"<\s*/?\s*answer\s*>|<\|begin_of_solution\|>|<\|end_of_solution\|>", re.I)
# Special tokens of the common chat templates (ChatML, Gemma, Llama 3, Mistral, Phi, GPT-2 end
# of text), with the role word that may follow an opening one.
_TURN = re.compile(r"(?:<\|im_(?:start|end)\|>|<\|(?:eot_id|end_of_text|endoftext|end|eom_id|"
                   r"start_header_id|end_header_id|user|assistant|system)\|>|"
                   r"<(?:start|end)_of_turn>|</s>|\[/?INST\])"
                   r"(?:[ \t]*(?:user|assistant|model|system)\b)?(?:<\|end_header_id\|>)?", re.I)
# An end of turn followed at once by the judge's own next turn: "<end_of_turn>\n<start_of_turn>
# model", "<|im_end|>\n<|im_start|>assistant", "<|eot_id|><|start_header_id|>assistant
# <|end_header_id|>".
_SAME_SPEAKER = re.compile(r"(?:<\|im_end\|>|<end_of_turn>|<\|eot_id\|>|<\|end\|>|</s>)\s*"
                           r"(?:<\|im_start\|>|<start_of_turn>|<\|start_header_id\|>)[ \t]*"
                           r"(?:assistant|model)\b(?:<\|end_header_id\|>)?", re.I)
# An end of turn followed by a bare number on its own line, with no header between: a serving
# path that prepended the previous turn's cached verdict ("60<|eot_id|>\n77"), or a judge that
# ran on past its end token. A number alone is no user's turn: the judge's, answering again.
_BARE_NEXT = re.compile(r"(?:<\|im_end\|>|<end_of_turn>|<\|eot_id\|>|<\|end\|>|</s>)[ \t]*\n?"
                        r"[ \t]*(?=\d+(?:[ \t]*/[ \t]*\d+)?[ \t]*(?:\n|$))")
# "\( 82 \)", "\[82\]": the same two characters wide as "$ 82 $" would be with a space.
_LATEX_MATH = re.compile(r"\\([(\[])(?P<body>[^\n]{0,60}?)\\([)\]])")
# A display block over lines: "\[\n\text{The final score is } 83\n\]".
_LATEX_DISPLAY = re.compile(r"\\\[(?P<body>[ \t]*\n[^\n]{0,80}\n[ \t]*)\\\]")
# LaTeX spacing ("$\,83\,$", "\quad"): spaces, as wide as written.
_LATEX_SPACE = re.compile(r"\\(?:[,;:! ]|q?quad\b)")
# Text set in math ("\text{The final score is } 83"): the words, without the command.
_LATEX_TEXT = re.compile(r"\\(?:text|textrm|mathrm)\s*\{(?P<body>[^{}\n]{0,80})\}")
# Markup around the one value inside the delimiters: "${{72}}$" (a template's braces kept),
# "$^{85}$", "$\mathbf{85}$", "$**85**$": the value, as wide as written.
_MATH_DECOR = re.compile(r"(?<=\$)(?P<pre>[ \t]*(?:\{\{|[\^_]\{|\\(?:mathbf|textbf|bf|boxed|"
                         r"underline|mathrm|text|mathit|bm)\s*\{|\{|\*\*)[ \t]*)"
                         r"(?P<n>\d+(?:\.\d+)?)(?P<post>[ \t]*(?:\}\}|\}|\*\*)[ \t]*)(?=\$)")
# A LaTeX table's column mark before a label's colon ("\text{Accuracy} &: 70 \\") and its
# line break: spaces.
_ALIGN = re.compile(r"&(?=[ \t]*[:=])|\\\\[ \t]*$", re.M)
# "$100 - 12 - 6 = 82$": an arithmetic verdict; its result is the value.
_ARITHMETIC = re.compile(r"\$(?P<expr>[\d\s.+\-*/×x()]*\d[\d\s.+\-*/×x()]*=\s*)(?=\d+(?:\.\d+)?"
                         r"\s*\$)")


@dataclass(frozen=True)
class AnswerView:
    """An answer in canonical form (see the module doc).

    Attributes:
        original: the answer as the backend returned it.
        text: the canonical text: normalised, reasoning blanked by spaces (newlines kept).
        index: for each character of ``text``, its offset in ``original``; one more entry,
            ``len(original)``, for the end.
        reasoning_cut: the answer ends inside a reasoning block that never closed.
        had_reasoning: some reasoning was removed.
    """

    original: str
    text: str
    index: tuple[int, ...]
    reasoning_cut: bool = False
    had_reasoning: bool = False

    def origin(self, offset: int) -> int:
        """The original's offset of the view's ``offset`` (an end offset maps to an end)."""
        return self.index[min(max(offset, 0), len(self.index) - 1)]

    def origin_end(self, offset: int) -> int:
        """The original's end offset for a span of the view ending at ``offset``."""
        if offset <= 0:
            return self.index[0]
        return self.index[min(offset, len(self.text)) - 1] + 1 if offset <= len(self.text) \
            else len(self.original)

    @property
    def blank(self) -> bool:
        """Nothing but whitespace is left (the answer was empty, or only reasoning)."""
        return not self.text.strip()


def normalise(text: str) -> tuple[str, tuple[int, ...]]:
    """``text`` in NFKC with invisible characters removed, and each character's origin."""
    if text.isascii():
        # Every character stays itself (the tables below hold no ASCII): the common case, and
        # the reader normalises the prompt's quoted texts for every answer it reads.
        return text, tuple(range(len(text) + 1))
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        if ch in INVISIBLE:
            continue
        plain = ch if ch in VULGAR else _PLAIN.get(ch)
        if ch in _SUPERSCRIPT_DIGITS and _footnote_marker(text, i):
            plain = " "
        if plain is None and not ch.isascii() and (digit := unicodedata.decimal(ch, None)) \
                is not None:
            plain = str(digit)  # "٨٥", "८५", "８５": any script's decimal digits
        if plain is None:
            plain = unicodedata.normalize("NFKC", ch) if ord(ch) > 127 else ch
            plain = "".join(_PLAIN.get(c, c) for c in plain)
        for c in plain:
            out.append(c)
            index.append(i)
    index.append(len(text))
    return "".join(out), tuple(index)


def _footnote_marker(text: str, i: int) -> bool:
    """Whether the superscript digit at ``i`` is a footnote marker.

    So is a run glued to what precedes it ("76¹"); not a numerator ("⁸⁵⁄₁₀₀") or a number of
    its own (" ⁸⁵").
    """
    start = i
    while start > 0 and text[start - 1] in _SUPERSCRIPT_DIGITS:
        start -= 1
    end = i
    while end < len(text) and text[end] in _SUPERSCRIPT_DIGITS:
        end += 1
    if text[end: end + 1] in ("\u2044", "/", "\u2215"):
        return False
    # Glued to a letter or a digit, or to a closing delimiter right after one ("$83$¹",
    # "**4**¹"); not a run that is the delimited value itself ("$⁸⁵$", "**⁴**").
    before = start
    while before > 0 and text[before - 1] in "$*_)]`":
        before -= 1
    return before > 0 and text[before - 1].isalnum() and text[before - 1] not in _SUPERSCRIPT_DIGITS


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def reasoning_spans(text: str) -> tuple[list[tuple[int, int, int, int]], bool]:
    """The judge's thought blocks in ``text``, and whether the last one is cut.

    Each span is ``(start, end, inner_start, inner_end)``: the block with its tags, and its
    content. The one home of what a thought block looks like: the reader blanks these
    (:func:`strip_reasoning`), :mod:`capjudge.reading.thought` reads them.
    """
    spans: list[tuple[int, int, int, int]] = []
    cut = False
    # A closing tag before any opening one: the template opened the block in the prompt.
    first_open = min((m.start() for opener, _ in _BLOCKS if (m := opener.search(text))),
                     default=len(text))
    lone = _LONE_CLOSE.search(text, 0, first_open)
    if lone is not None:
        spans.append((0, lone.end(), 0, lone.start()))
        text = _blank(text, 0, lone.end())
    for opener, closer_of in _BLOCKS:
        pos = 0
        # Blanking what each kind of block covers keeps a block inside another from counting twice.
        while (m := opener.search(text, pos)) is not None:
            name = m.group(1) if m.groups() else ""
            close = closer_of(name).search(text, m.end())
            end = close.end() if close is not None else len(text)
            inner_end = close.start() if close is not None else len(text)
            cut = cut or close is None
            spans.append((m.start(), end, m.end(), inner_end))
            text, pos = _blank(text, m.start(), end), end
    return sorted(spans), cut


def strip_reasoning(text: str) -> tuple[str, bool, bool]:
    """``text`` with its reasoning blanked; (text, reasoning_cut, had_reasoning)."""
    spans, cut = reasoning_spans(text)
    for start, end, _, _ in spans:
        text = _blank(text, start, end)
    return text, cut, bool(spans)


def _answer_only(text: str) -> str:
    """Only the ``<answer>`` blocks, where the answer has one with content."""
    blocks = [m for m in _ANSWER.finditer(text) if m.group(1).strip()]
    if not blocks:
        return _TAG.sub(lambda m: " " * len(m.group(0)), text)
    keep = [False] * len(text)
    for m in blocks:
        for i in range(m.start(1), m.end(1)):
            keep[i] = True
    return "".join(c if keep[i] or c == "\n" else " " for i, c in enumerate(text))


def _turn_after_content(text: str) -> re.Match[str] | None:
    """The first chat-template token that follows some content (the judge's turn ends there).

    Tokens before any content are a template's own header, with its role word.
    """
    pos = 0
    while (m := _TURN.search(text, pos)) is not None:
        if text[pos: m.start()].strip():
            return m
        pos = m.end()
    return None


def own_next_turn(text: str) -> tuple[int, int] | None:
    """Where the judge's turn ends and its own next turn's text starts, or None.

    ``ignore_eos``: the judge closed its turn, then opened another of its own with no user turn
    between (:data:`_SAME_SPEAKER`) and answered the same request again; or a bare number
    follows its end token (:data:`_BARE_NEXT`). The first turn token after some content decides
    (a template's header before the answer is no turn).
    """
    m = _turn_after_content(text)
    same = None if m is None else (_SAME_SPEAKER.match(text, m.start())
                                   or _BARE_NEXT.match(text, m.start()))
    return None if m is None or same is None else (m.start(), same.end())


def turn_ended(text: str) -> bool:
    """Whether a chat-template token follows some content: the judge's own turn ended there.

    A cut at ``max_tokens`` after it ("70 [INST] Why? [/INST] Because ...") cut the invented
    turn, not the answer: the number before the token is finished.
    """
    return _turn_after_content(text) is not None


def end_of_turn(text: str) -> str:
    """``text`` blanked from the first chat-template token that follows some content.

    Tokens before any content (a template's own header, with its role word) are blanked and
    the answer read after them.
    """
    m = _turn_after_content(text)
    end = len(text) if m is None else m.start()
    for header in reversed(list(_TURN.finditer(text, 0, end))):
        text = _blank(text, header.start(), header.end())
    return text if m is None else _blank(text, end, len(text))


# Markdown and HTML strikethrough: text the judge deleted ("~~$85$~~ $74$").
_STRUCK = re.compile(r"~~(?!~)[^\n]*?~~|<\s*(s|del|strike)\s*>.*?<\s*/\s*\1\s*>", re.I | re.S)


# HTML markup around the text (a chat UI's or gateway's rendering): tags read as spaces, a
# definition term's end as its label's colon ("<dt>C. Score</dt><dd>3</dd>").
_HTML_TAG = re.compile(r"<\s*/?\s*(?:b|strong|em|i|u|span|p|div|li|ul|ol|dl|dd|code|pre|h[1-6]|"
                       r"small|mark|sup|sub|font|center|blockquote|section|article)\b[^<>\n]{0,80}>"
                       r"|<\s*dt\b[^<>\n]{0,80}>", re.I)
_DT_END = re.compile(r"<\s*/\s*dt\s*>", re.I)


def html_markup(text: str) -> str:
    """HTML tags as spaces, a ``</dt>`` as a colon (same length)."""
    if "<" not in text:
        return text
    text = _DT_END.sub(lambda m: ":" + " " * (len(m.group(0)) - 1), text)
    return _HTML_TAG.sub(lambda m: " " * len(m.group(0)), text)


def strike_out(text: str) -> str:
    """Struck-through text blanked (same length): the judge deleted it."""
    return _STRUCK.sub(lambda m: " " * len(m.group(0)), text)


def _math_result(m: re.Match[str]) -> str:
    """An arithmetic verdict as its result, when the expression gives it; else as written.

    "$100 - 15 - 10 = 80$" is left whole (its steps give 75): the reading then names the
    contradiction (:func:`capjudge.reading.scale.check_number`) instead of taking either.
    """
    stated = re.match(r"\d+(?:\.\d+)?", m.string[m.end():])
    if stated is not None and miscounted(m.group("expr"), float(stated.group(0))) is not None:
        return m.group(0)
    return "$" + " " * len(m.group("expr"))


def plain_math(text: str) -> str:
    """LaTeX math delimiters as ``$`` and an arithmetic verdict as its result (same length)."""
    text = _LATEX_SPACE.sub(lambda m: " " * len(m.group(0)), text)
    text = _LATEX_TEXT.sub(lambda m: " " * (m.start("body") - m.start()) + m.group("body") + " ",
                           text)
    text = _LATEX_DISPLAY.sub(lambda m: " $" + m.group("body") + "$ ", text)
    text = _LATEX_MATH.sub(lambda m: " $" + m.group("body") + "$ ", text)
    if "$" in text:
        text = _MATH_DECOR.sub(lambda m: " " * len(m.group("pre")) + m.group("n")
                               + " " * len(m.group("post")), text)
    if "&" in text or "\\\\" in text:
        text = _ALIGN.sub(lambda m: " " * len(m.group(0)), text)
    return _ARITHMETIC.sub(_math_result, text)


# "&#36;66&#36;", "&quot;score&quot;", "&lt;answer&gt;", "<br>": an answer passed through
# an HTML escaper (a web UI's log, a proxy) before it reached us.
# Content encoded twice shows its escapes: "$\u0037\u0034$" is "$74$" (corpus AC).
_ONE_ENTITY = re.compile(r"&(?:#\d{1,6}|#x[0-9a-f]{1,6}|[a-z]{2,8});|\\u[0-9a-f]{4}", re.I)
_ENTITY = re.compile(rf"(?:{_ONE_ENTITY.pattern})+|<br\s*/?>", re.I)  # a run of them, or <br>


def _unescaped(written: str) -> str:
    if written.startswith("\\"):
        code = int(written[2:], 16)
        # (A lone surrogate or a control character is no text: the escape stays as written.)
        return chr(code) if code >= 0x20 and not 0xD800 <= code <= 0xDFFF else written
    return html.unescape(written)


def html_entities(text: str) -> str:
    r"""HTML character references and ``\uXXXX`` escapes as their character (same length).

    ``<br>`` is a line break. A run of them takes the run's last places, so the characters
    stay together and a number right after stays next to them ("&#36;66" reads "    $66",
    "&#56;&#50;" reads "        82").
    """
    def run(m: re.Match[str]) -> str:
        written = m.group(0)
        if written[0] == "<":
            return "\n" + " " * (len(written) - 1)
        out, pending, width = [], "", 0
        for part in (p.group(0) for p in _ONE_ENTITY.finditer(written)):
            plain = _unescaped(part)
            if len(plain) == 1 and plain != part:
                pending, width = pending + plain, width + len(part)
                continue
            out += [" " * (width - len(pending)), pending, part]  # kept as written
            pending, width = "", 0
        if out or not pending:
            return "".join([*out, " " * (width - len(pending)), pending])
        # Right after a number, the run's characters stay next to it ("80&#43;" is "80+").
        text_ = m.string
        glued = m.start() > 0 and text_[m.start() - 1].isalnum() and not (
            m.end() < len(text_) and text_[m.end()].isalnum())
        return pending + " " * (width - len(pending)) if glued else \
            " " * (width - len(pending)) + pending

    return _ENTITY.sub(run, text) if "&" in text or "<" in text or "\\u" in text else text


# gpt-oss's "harmony" format: "<|channel|>analysis<|message|>..." is its reasoning,
# "<|channel|>final<|message|>..." its answer (a "<|constrain|>json" may stand between).
_CHANNEL = re.compile(r"<\|channel\|>\s*(?P<name>\w+)[^<\n]{0,40}?(?:<\|constrain\|>\s*\w+)?"
                      r"\s*<\|message\|>")
_HARMONY_TOKEN = re.compile(r"<\|(?:start|end|return|call)\|>(?:\s*assistant)?")


def harmony(text: str) -> tuple[str, bool, bool]:
    """An answer in the harmony format with only its final channel left (same length).

    Returns (text, had reasoning, reasoning only): an answer whose channels are all analysis
    never wrote its verdict.
    """
    channels = list(_CHANNEL.finditer(text)) if "<|channel|>" in text else []
    if not channels:
        return text, False, False
    finals = [m for m in channels if m.group("name").lower() == "final"]
    if not finals:
        return _blank(text, 0, len(text)), True, True
    last = finals[-1]
    nxt = next((m.start() for m in channels if m.start() > last.end()), len(text))
    text = _blank(_blank(text, 0, last.end()), nxt, len(text))
    return _HARMONY_TOKEN.sub(lambda m: " " * len(m.group(0)), text), True, False


def as_viewed(text: str) -> str:
    r"""A text the answer may quote (the candidate, a reference) in the view's form.

    Normalised and with the same markup read as the answer's view reads it, so a quotation of
    "$\boxed{100}$" in the answer is found where the view wrote it.
    """
    return plain_math(html_markup(strike_out(html_entities(normalise(text)[0]))))


def answer_view(text: str) -> AnswerView:
    """The canonical view of an answer (see the module doc)."""
    normal, index = normalise(text or "")
    if (carried := unwrap(text or "")) is not None:
        inner, offsets = carried
        normal, inner_index = normalise(inner)
        index = tuple(offsets[i] for i in inner_index)
    normal, in_channels, only_analysis = harmony(normal)
    normal = plain_math(html_markup(strike_out(end_of_turn(html_entities(normal)))))
    stripped, cut, had = strip_reasoning(normal)
    had, cut = had or in_channels, cut or only_analysis
    stripped = _answer_only(stripped)
    # Cut inside its reasoning, with nothing after it: the verdict was never written.
    return AnswerView(text or "", stripped, index, reasoning_cut=cut and not stripped.strip(),
                      had_reasoning=had)


def blank(text: str, start: int, end: int) -> str:
    """``text`` with ``start:end`` blanked to spaces (line breaks kept: offsets and lines hold)."""
    return text[:start] + re.sub(r"[^\n]", " ", text[start:end]) + text[end:]


def start_of_line(text: str, pos: int) -> int:
    """Where the line holding ``pos`` starts (the rules read a value's line as its context)."""
    return text.rfind("\n", 0, pos) + 1


def line_before(text: str, pos: int) -> str:
    """The text of ``pos``'s line before it: a value's label, bullet or voice."""
    return text[start_of_line(text, pos): pos]

r"""The structures judges put their verdicts in: JSON, tables, ``\boxed{}``.

Each finder returns the structure's *fields* (a name and a value with the value's offsets in
the text), so the verdict found in a structure is located in the answer like any other, and
its tokens' log-probabilities can be read there.

- :func:`json_fields`: every key of every JSON object in the answer (in code fences or not,
  nested at any depth), with its path of parent keys. The parser is lenient the way judges'
  JSON needs: single-quoted strings, trailing commas, unquoted keys.
- :func:`table_fields`: the cells of markdown tables (``| Accuracy | 80 |``), named by their
  row's first cell and their column's header; a table laid out the other way (a header of
  criteria, one row of values) is named by the header.
- :func:`xml_fields`: ``<score>85</score>``, a tag around a value.
- :func:`boxed_fields`: ``\boxed{85}`` (and ``\fbox``), the LaTeX way of marking a final
  answer.

Tables are markdown (``| Accuracy | 80 |``), HTML (``<tr><td>Accuracy</td><td>80</td>``),
comma-separated lines (``criterion,score`` then ``overall,71``) or LaTeX ``tabular``
(``Accuracy & 80 \\``, booktabs rules included).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Field:
    """One named value in a structure.

    Attributes:
        path: the names leading to it, outermost first (JSON keys; a table's row name, then
            its column's header).
        value: the value's text as written (a JSON string without its quotes).
        start: offset of the value's text in the answer.
        end: offset just after it.
        kind: ``json``, ``table``, ``xml``, ``boxed`` or ``marker``.
        group: which written structure it belongs to (a JSON object's offset): the objects
            of a list (``[{"criterion": ...}, {"criterion": ...}]``) are read one by one.
    """

    path: tuple[str, ...]
    value: str
    start: int
    end: int
    kind: str
    group: int = -1

    @property
    def name(self) -> str:
        """The innermost name."""
        return self.path[-1] if self.path else ""


class _JsonError(ValueError):
    pass


class _Parser:
    """A lenient JSON parser that records each scalar's offsets (see the module doc)."""

    def __init__(self, text: str, start: int) -> None:
        self.text, self.pos = text, start
        self.fields: list[Field] = []

    def space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def value(self, path: tuple[str, ...], depth: int = 0) -> None:
        if depth > 32:
            raise _JsonError("too deep")
        self.space()
        if self.pos >= len(self.text):
            raise _JsonError("end of text")
        ch = self.text[self.pos]
        if ch == "{":
            self.obj(path, depth)
        elif ch == "[":
            self.array(path, depth)
        elif ch in "\"'":
            start, end, text = self.string()
            self.fields.append(Field(path, text, start, end, "json"))
        else:
            m = re.compile(r"[^,}\]\n]+").match(self.text, self.pos)
            if m is None:
                raise _JsonError(f"unexpected {ch!r}")
            raw = m.group(0).rstrip()
            self.fields.append(Field(path, raw, m.start(), m.start() + len(raw), "json"))
            self.pos = m.start() + len(raw)

    def string(self) -> tuple[int, int, str]:
        quote = self.text[self.pos]
        start = self.pos + 1
        i = start
        while i < len(self.text) and self.text[i] != quote:
            i += 2 if self.text[i] == "\\" else 1
        if i >= len(self.text):
            raise _JsonError("unterminated string")
        self.pos = i + 1
        return start, i, self.text[start:i]

    def key(self) -> str:
        self.space()
        if self.pos < len(self.text) and self.text[self.pos] in "\"'":
            return self.string()[2].strip()  # (an escaped quote read as " and a space)
        m = re.compile(r"[^:\s{}\[\],]+").match(self.text, self.pos)
        if m is None:
            raise _JsonError("no key")
        self.pos = m.end()
        return m.group(0)

    def obj(self, path: tuple[str, ...], depth: int) -> None:
        self.pos += 1
        while True:
            self.space()
            if self.pos < len(self.text) and self.text[self.pos] == "}":
                self.pos += 1
                return
            name = self.key()
            self.space()
            if self.pos >= len(self.text) or self.text[self.pos] not in ":=":
                raise _JsonError("no colon")
            self.pos += 1
            self.value((*path, name), depth + 1)
            self.space()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
            elif self.pos < len(self.text) and self.text[self.pos] == "}":
                continue
            else:
                raise _JsonError("no comma")

    def array(self, path: tuple[str, ...], depth: int) -> None:
        self.pos += 1
        k = 0
        while True:
            self.space()
            if self.pos < len(self.text) and self.text[self.pos] == "]":
                self.pos += 1
                return
            self.value((*path, f"[{k}]"), depth + 1)
            k += 1
            self.space()
            if self.pos < len(self.text) and self.text[self.pos] == ",":
                self.pos += 1
            elif self.pos < len(self.text) and self.text[self.pos] == "]":
                continue
            else:
                raise _JsonError("no comma")


def json_fields(text: str, depth: int = 0) -> list[Field]:
    """Every scalar field of every JSON object written in ``text`` (see the module doc).

    Args:
        text: the answer.
        depth: how many JSON strings deep ``text`` already is (tool-call arguments).
    """
    out: list[Field] = []
    pos = 0
    while (start := text.find("{", pos)) >= 0:
        parser = _Parser(text, start)
        try:
            parser.obj((), 0)
        except _JsonError:
            if parser.pos < len(text) and text[parser.pos:].strip():
                pos = start + 1
                continue
            # The text ended inside the object (cut at max_tokens, padding until the cut):
            # the fields a comma closed are complete; the one being written is not.
            parser.fields = [f for f in parser.fields
                             if re.match(r"[\"']?\s*,", text[f.end:])]
        # An object needs a key that looks like a name: "{85}" or "{x}" in prose is not JSON.
        for f in parser.fields:
            f = replace(f, group=start)
            out.append(f)
            out += _encoded_fields(text, f, depth)
        pos = parser.pos
    return out


# A string field that is a schema's placeholder, not the judge's words: {"reasoning":
# "string", "score": 50} is the schema's example object echoed back by guided decoding, and
# its numbers are the example's (corpus AJ).
_PLACEHOLDER = re.compile(r"(?:<\s*)?(?:string|str|text|\.{3}|\u2026|(?:your|the|brief|short)?\s*"
                          r"(?:reasoning|explanation|rationale|justification|reason)"
                          r"(?:\s+(?:here|goes\s+here))?)(?:\s*>)?|<[^<>\n]{1,40}>", re.I)


# Keys whose value names a kind, not the judge's words: a message part's {"type": "text", ...},
# a turn's "role", an API object's "object".
_KINDS = frozenset({"type", "role", "kind", "object", "format", "mode", "name", "content_type",
                    "mime_type", "media_type", "encoding"})


def template_spans(text: str) -> list[tuple[int, int]]:
    """The JSON objects in ``text`` that are a schema's template echoed back.

    An object with a string field that is a placeholder ("string", "<your reasoning>",
    "..."): its other values are the template's examples, not a verdict.
    """
    fields = json_fields(text)
    groups = {f.group for f in fields if f.start > 0 and text[f.start - 1] in "\"'"
              and f.name.lower() not in _KINDS and _PLACEHOLDER.fullmatch(f.value.strip())}
    spans = []
    for group in sorted(groups):
        end = max(f.end for f in fields if f.group == group)
        close = text.find("}", end)
        spans.append((group, close + 1 if close >= 0 else end))
    return spans


def json_document(text: str, start: int, end: int) -> list[Field] | None:
    """The fields of the one JSON object or array that fills ``text[start:end]``, or None.

    Whitespace may stand around it; anything else (prose, a second document) and it is None.
    Offsets are in ``text``.
    """
    first = end - len(text[start:end].lstrip())
    if first >= end or text[first] not in "{[":
        return None
    parser = _Parser(text[:end], first)
    try:
        parser.value((), 0)
    except _JsonError:
        return None
    if text[parser.pos:end].strip():
        return None
    return parser.fields


def _encoded_fields(text: str, f: Field, depth: int) -> list[Field]:
    r"""The fields of JSON written inside a JSON string (a tool call's ``"arguments"``).

    ``{"name": "submit_score", "arguments": "{\"score\": 72}"}``: function-calling APIs send
    the arguments as a JSON string. Each escaped quote is read as a space and a quote (the
    same length), so the inner fields keep their offsets in the answer; their path continues
    the string's.
    """
    if depth >= 2 or not f.value.lstrip().startswith(("{", "[")):
        return []
    inner = text[f.start:f.end].replace('\\"', ' "')
    return [Field(f.path + g.path, g.value, f.start + g.start, f.start + g.end, "json",
                  f.start + g.group) for g in json_fields(inner, depth + 1)]


_ROW = re.compile(r"^[ \t]*\|(.*)\|[ \t]*$", re.M)
_RULE = re.compile(r"^[\s|:\-]+$")


def _cells(line_start: int, inner: str, offset: int) -> list[tuple[str, int, int]]:
    """(text, start, end) of each cell of a table row (offsets of the stripped text)."""
    out = []
    pos = offset
    for part in inner.split("|"):
        stripped = part.strip()
        lead = len(part) - len(part.lstrip())
        out.append((stripped, pos + lead, pos + lead + len(stripped)))
        pos += len(part) + 1
    return out


def _tables(text: str) -> list[list[list[tuple[str, int, int]]]]:
    """Markdown tables: lists of rows of cells (the separator row dropped)."""
    tables: list[list[list[tuple[str, int, int]]]] = []
    last_end = -2
    for m in _ROW.finditer(text):
        cells = _cells(m.start(), m.group(1), m.start(1))
        contiguous = text[last_end:m.start()].strip() == "" if last_end >= 0 else False
        if not (tables and contiguous):
            tables.append([])
        last_end = m.end()
        if _RULE.match(m.group(1)):
            continue
        tables[-1].append(cells)
    return [t for t in tables if len(t) >= 2 or (t and len(t[0]) >= 2)]


def table_fields(text: str) -> list[Field]:
    """The cells of markdown tables, named by row and column (see the module doc).

    A cell of a row is named (row's first cell, column header); a table whose header names
    the things rated and that has one row of values names each value by its header.
    """
    out: list[Field] = []
    for rows in _tables(text) + _html_tables(text) + _csv_tables(text) + _latex_tables(text):
        header = [c[0] for c in rows[0]]
        body = rows[1:] if len(rows) > 1 else rows
        for row in body:
            name = row[0][0]
            for k, (cell, start, end) in enumerate(row[1:], start=1):
                column = header[k] if k < len(header) and len(rows) > 1 else ""
                out.append(Field((name, column), cell, start, end, "table"))
        if len(rows) == 2:
            # Criteria across, values below: each value named by its column's header.
            for k, (cell, start, end) in enumerate(rows[1]):
                if k < len(header):
                    out.append(Field((header[k],), cell, start, end, "table"))
    return out


def _csv_row(text: str, start: int, end: int) -> list[tuple[str, int, int]] | None:
    """The cells of one comma-separated line (a quoted cell may hold commas), or None."""
    cells: list[tuple[str, int, int]] = []
    pos = start
    while True:
        while pos < end and text[pos] in " \t":
            pos += 1
        if pos < end and text[pos] == '"':
            close = text.find('"', pos + 1, end)
            if close < 0:
                return None
            cell_start, cell_end, pos = pos + 1, close, close + 1
            while pos < end and text[pos] in " \t":
                pos += 1
            if pos < end and text[pos] != ",":
                return None
        else:
            comma = text.find(",", pos, end)
            stop = comma if comma >= 0 else end
            if '"' in text[pos:stop]:
                return None
            cell_start, pos = pos, stop
            cell_end = stop
            while cell_end > cell_start and text[cell_end - 1] in " \t":
                cell_end -= 1
        cells.append((text[cell_start:cell_end], cell_start, cell_end))
        if pos >= end:
            return cells
        pos += 1  # the comma


def _csv_tables(text: str) -> list[list[list[tuple[str, int, int]]]]:
    """Comma-separated tables: two or more lines in a row with the same number of cells.

    ``criterion,score`` / ``coverage,80`` / ``overall,71``: short cells that end no sentence
    (a line of prose with commas is not a row), at least two per line, the first line the
    header, and some cell below it a number.
    """
    tables: list[list[list[tuple[str, int, int]]]] = []
    block: list[list[tuple[str, int, int]]] = []
    for m in re.finditer(r"^[^\n]*$", text, re.M):
        cells = _csv_row(text, m.start(), m.end()) if "," in m.group(0) else None
        if cells is None or len(cells) < 2 or any(
                len(c[0]) > 60 or re.search(r"[.!?:;]$", c[0]) for c in cells):
            cells = None
        if cells is not None and block and len(cells) == len(block[0]):
            block.append(cells)
            continue
        tables.append(block)
        block = [cells] if cells is not None else []
    tables.append(block)
    return [t for t in tables if len(t) >= 2 and any(
        re.fullmatch(r"[-+]?\d+(?:\.\d+)?%?", c[0]) for row in t[1:] for c in row)]


_XML = re.compile(r"<([A-Za-z][\w.-]{0,40})(?:\s[^<>]*)?>([^<>]{0,200})</\1\s*>")
_HTML_TABLE = re.compile(r"<table\b[^>]*>(.*?)</table\s*>", re.I | re.S)
_HTML_ROW = re.compile(r"<tr\b[^>]*>(.*?)</tr\s*>", re.I | re.S)
_HTML_CELL = re.compile(r"<t([dh])\b[^>]*>(.*?)</t[dh]\s*>", re.I | re.S)
_TAGS = re.compile(r"<[^<>]*>")


def xml_fields(text: str) -> list[Field]:
    """``<score>85</score>``, ``<accuracy>80</accuracy>``: a tag around a value (no nesting).

    Table cells (``td``, ``th``) are left to :func:`table_fields`.
    """
    return [Field((m.group(1),), m.group(2), m.start(2), m.end(2), "xml")
            for m in _XML.finditer(text) if m.group(1).lower() not in ("td", "th")]


def _html_tables(text: str) -> list[list[list[tuple[str, int, int]]]]:
    """HTML tables as rows of (cell text without tags, start, end)."""
    tables = []
    for t in _HTML_TABLE.finditer(text):
        rows = []
        for r in _HTML_ROW.finditer(text, t.start(1), t.end(1)):
            cells = []
            for c in _HTML_CELL.finditer(text, r.start(1), r.end(1)):
                inner = _TAGS.sub(lambda m: " " * len(m.group(0)), c.group(2))
                lead = len(inner) - len(inner.lstrip())
                cells.append((inner.strip(), c.start(2) + lead,
                              c.start(2) + lead + len(inner.strip())))
            if cells:
                rows.append(cells)
        if rows:
            tables.append(rows)
    return tables


_LATEX_TABLE = re.compile(r"\\begin\{(?P<env>tabular\*?|tabularx|longtable|array)\}"
                          r"(?:\{[^{}\n]*\})*(?P<body>.*?)\\end\{(?P=env)\}", re.S)
# Rules between rows (booktabs' too) and a cell's own markup around its value.
_LATEX_RULE = re.compile(r"\\(?:hline|toprule|midrule|bottomrule|cline\{[^{}]*\}|"
                         r"cmidrule(?:\([^()]*\))?\{[^{}]*\}|addlinespace)")
_LATEX_WRAP = re.compile(r"(?:\\(?:textbf|textit|emph|mathbf|text|underline)\s*\{(?P<a>.*)\}"
                         r"|\$(?P<b>[^$]*)\$)$", re.S)


def _latex_cell(text: str, start: int, end: int) -> tuple[str, int, int]:
    """A LaTeX cell's value and its offsets, without the markup around the whole of it."""
    while True:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        m = _LATEX_WRAP.match(text, start, end)
        if m is None or m.end() != end:
            return text[start:end], start, end
        group = "a" if m.group("a") is not None else "b"
        start, end = m.start(group), m.end(group)


def _latex_tables(text: str) -> list[list[list[tuple[str, int, int]]]]:
    r"""LaTeX ``tabular`` environments: rows end with ``\\`` (or a line), cells split by ``&``."""
    tables = []
    for t in _LATEX_TABLE.finditer(text):
        body_start = t.start("body")
        body = _LATEX_RULE.sub(lambda m: " " * len(m.group(0)), t.group("body"))
        blanked = text[:body_start] + body + text[t.end("body"):]  # offsets kept
        rows = []
        pos = 0
        # A row ends with "\\\\" or its line (the answer's view blanks a "\\\\" at a line's end).
        for m in re.finditer(r"\\\\(?:\[[^\]\n]*\])?|\n|$", body):
            row, pos = (pos, m.start()), m.end()
            if not body[row[0]:row[1]].strip():
                continue
            cells, cell = [], row[0]
            for amp in re.finditer(r"(?<!\\)&", body[row[0]:row[1]]):
                cells.append(_latex_cell(blanked, body_start + cell, body_start + row[0]
                                         + amp.start()))
                cell = row[0] + amp.end()
            cells.append(_latex_cell(blanked, body_start + cell, body_start + row[1]))
            rows.append(cells)
            if m.end() == len(body):
                break
        if rows and any(re.fullmatch(r"[-+]?\d+(?:\.\d+)?\\?%?", c[0]) for c in rows[0][1:]):
            # No header row ("Accuracy & 90" first): its first row is a row of values.
            rows.insert(0, [("", c[1], c[1]) for c in rows[0]])
        if rows:
            tables.append(rows)
    return tables


_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{((?:[^{}]|\{[^{}]*\})*)\}")


# The verdict markers of common judge formats: MT-Bench's "[[8]]", Prometheus' "[RESULT] 4".
_MARKER = re.compile(r"\[\[\s*(?P<a>[^\[\]\n]{1,12}?)\s*\]\]|\[RESULT\]\s*(?P<b>[^\n]{1,12})")


def boxed_fields(text: str) -> list[Field]:
    r"""``\boxed{...}`` contents, and the verdict markers of common judge formats.

    A nested ``\text{}`` is unwrapped by the value reader; MT-Bench's ``[[82]]`` and
    Prometheus' ``[RESULT] 84`` are fields of kind ``marker``.
    """
    boxed = [Field(("boxed",), m.group(1), m.start(1), m.end(1), "boxed")
             for m in _BOXED.finditer(text)]
    marked = [Field(("marker",), m.group(g), m.start(g), m.end(g), "marker")
              for m in _MARKER.finditer(text) for g in ("a", "b") if m.group(g)]
    return boxed + marked

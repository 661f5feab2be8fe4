"""An answer that is a serving API's whole response, logged as the message: the text it carries.

A gateway, a proxy or a logging layer sometimes hands the reader not the judge's message but
the server's response around it, serialised: a llama.cpp ``/completion`` body (``content``
among ``timings``, ``tokens_predicted``, ``id_slot``), an OpenAI chat completion or its
streamed chunks (``choices[0].delta.content``, as ``data:`` lines), a Batch API output line,
Ollama's NDJSON stream (``response`` pieces with ``done``), an Anthropic message (text
blocks), a Responses API item list, a Gemini ``candidates`` body, TGI's ``generated_text``.
Read as prose, its first number is an index, a slot id or a token count, never the verdict.

:func:`unwrap` recognises those shapes by their structure (the keys each API writes around
its text, never a phrase) and returns the text they carry, decoded, with each character's
offset in the original: the answer's view (:mod:`capjudge.reading.view`) reads that text,
and what it finds is still located in the original. What the response keeps apart as thought
(``reasoning_content``, Anthropic ``thinking`` blocks, Responses ``reasoning`` items, Gemini
parts marked ``thought``) is not carried: it is never the answer. Anything that is not
wholly such a response (JSON inside prose, a judge's own JSON verdict, a shape none of the
rules names) is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from capjudge.reading.structure import Field, json_document

# The text of each API's response, as a path of keys ("[k]": an array's element).
_CARRIERS = [
    # OpenAI chat completions (whole, streamed, a Batch API output line) and completions.
    re.compile(r"(?:^|/)(?P<owner>choices/\[\d+\])/(?:message|delta)/content$"),
    re.compile(r"(?:^|/)(?P<owner>choices/\[\d+\])/text$"),
    # Gemini: candidates[k].content.parts[j].text.
    re.compile(r"(?:^|/)(?P<owner>candidates/\[\d+\])/content/parts/\[\d+\]/text$"),
    # Anthropic: content[k].text of a message; a streamed delta's text.
    re.compile(r"^(?P<owner>)content/\[\d+\]/text$"),
    re.compile(r"^(?P<owner>)delta/text$"),
    # The Responses API: output[k].content[j].text, or the output items alone.
    re.compile(r"^(?:output/)?(?P<owner>)\[\d+\]/content/\[\d+\]/text$"),
    # Ollama (generate, chat), llama.cpp's /completion, TGI.
    re.compile(r"^(?P<owner>)(?:response|message/content|content)$"),
    re.compile(r"^(?P<owner>(?:\[\d+\])?)/?generated_text$"),
]
# What an API writes beside its text (at the level holding "choices" or "candidates").
_RESPONSE_KEYS = frozenset({"id", "object", "model", "created", "usage", "system_fingerprint",
                            "usageMetadata", "modelVersion", "responseId", "custom_id"})
# llama.cpp's /completion body: its text is "content" among these.
_LLAMACPP_KEYS = frozenset({"timings", "tokens_predicted", "tokens_evaluated",
                            "generation_settings", "id_slot", "stop_type", "tokens_cached"})
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\",
            '"': '"', "'": "'"}
_SSE_DATA = re.compile(r"^data:[ \t]?(?P<body>.*)$")
_SSE_OTHER = re.compile(r"^(?:event|id|retry):.*$|^:.*$|^\s*$")


def _documents(text: str) -> list[list[Field]] | None:
    """The JSON documents ``text`` is made of (one, NDJSON lines or SSE ``data:`` lines)."""
    whole = json_document(text, 0, len(text))
    if whole is not None:
        return [whole]
    docs: list[list[Field]] = []
    pos = 0
    sse = text.lstrip().startswith("data:")
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        body = text[start:end]
        if sse:
            m = _SSE_DATA.match(body)
            if m is None:
                if _SSE_OTHER.match(body):
                    continue
                return None
            if m.group("body").strip() == "[DONE]":
                continue
            start += m.start("body")
        elif not body.strip():
            continue
        fields = json_document(text, start, end)
        if fields is None:
            return None
        docs.append(fields)
    return docs or None


def _is_string(text: str, f: Field) -> bool:
    return f.start > 0 and text[f.start - 1] in "\"'"


def _value(fields: Sequence[Field], path: str) -> str | None:
    return next((f.value for f in fields if "/".join(f.path) == path), None)


def _keys_at(fields: Sequence[Field], owner: str) -> set[str]:
    """The keys of the object at ``owner`` (a path; "" is the top level)."""
    depth = len(owner.split("/")) if owner else 0
    prefix = owner + "/" if owner else ""
    return {f.path[depth] for f in fields
            if len(f.path) > depth and "/".join(f.path).startswith(prefix)}


# A document that also holds a verdict of its own (a tool call's arguments, a score field beside
# the text) is read as it stands: the text alone would lose it.
_VERDICT_KEY = re.compile(r"^(?:final_?)?(?:score|rating|grade|verdict|correctness|accuracy|"
                          r"completeness|conciseness|relevance|hallucination)s?$", re.I)
_TOOL_KEYS = frozenset({"tool_calls", "function_call", "tool_use", "input", "arguments"})


def _holds_more(text: str, fields: Sequence[Field]) -> bool:
    """Whether the document holds a tool call or a verdict field besides its text."""
    for f in fields:
        if set(f.path) & _TOOL_KEYS or f.value in ("tool_use", "function_call"):
            return True
        if f.path and _VERDICT_KEY.match(f.path[-1]) and not _is_string(text, f):
            return True
    return False


def _carried(text: str, fields: Sequence[Field]) -> list[tuple[str, Field]]:
    """(which text it belongs to, the field) for each piece of text the response carries."""
    out: list[tuple[str, Field]] = []
    top = _keys_at(fields, "")
    for f in fields:
        path = "/".join(f.path)
        if not _is_string(text, f):
            continue
        for rule in _CARRIERS:
            m = rule.search(path)
            if m is None:
                continue
            owner = path[:m.start("owner")] + m.group("owner")
            if _belongs(fields, path, m, top):
                out.append((owner, f))
            break
    return out


def _belongs(fields: Sequence[Field], path: str, m: re.Match[str], top: set[str]) -> bool:
    """Whether the field at ``path`` is an API's text: the keys around it say so."""
    if "/choices/" in "/" + path or "/candidates/" in "/" + path:
        level = path[:m.start("owner")].rstrip("/")
        if "/candidates/" in "/" + path:
            part = path.rsplit("/", 1)[0]
            if (_value(fields, part + "/thought") or "").lower() == "true":
                return False  # Gemini's thought summary
        return bool(_keys_at(fields, level) & _RESPONSE_KEYS)
    if path.startswith("content/["):  # Anthropic: a message's text blocks
        block = path.rsplit("/", 1)[0]
        return (_value(fields, block + "/type") == "text"
                and (_value(fields, "type") == "message" or "stop_reason" in top))
    if path == "delta/text":
        return _value(fields, "type") == "content_block_delta"
    if path.endswith("/text") and "/content/[" in path:  # Responses API items
        item = path.split("/content/[")[0]
        return (_value(fields, item + "/type") == "message"
                and _value(fields, item + "/role") in (None, "assistant")
                and _value(fields, path.rsplit("/", 1)[0] + "/type") in (None, "output_text"))
    if path in ("response", "message/content"):  # Ollama
        return "done" in top and bool(top & {"model", "created_at"})
    if path == "content":  # llama.cpp's /completion; a chat message ({"role": "assistant"})
        return bool(top & _LLAMACPP_KEYS) or _value(fields, "role") == "assistant"
    return path.endswith("generated_text")  # TGI


def _decode(text: str, f: Field) -> list[tuple[str, int]]:
    """A JSON string's characters, escapes decoded, each with its offset in ``text``."""
    out: list[tuple[str, int]] = []
    raw, i = text[f.start:f.end], 0
    while i < len(raw):
        c = raw[i]
        if c != "\\" or i + 1 >= len(raw):
            out.append((c, f.start + i))
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", raw[i + 2:i + 6]):
            code, width = int(raw[i + 2:i + 6], 16), 6
            if 0xD800 <= code < 0xDC00 and re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}",
                                                        raw[i + 6:i + 12]):
                low = int(raw[i + 8:i + 12], 16)
                code, width = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), 12
            out.append((chr(code), f.start + i))
            i += width
            continue
        out.append((_ESCAPES.get(nxt, nxt), f.start + i))
        i += 2
    return out


# A framework's result object printed whole: "RunResponse(content='...', metrics={...})",
# "ChatMessageContent(..., items=[TextContent(text='...')])", "AgentRunResult(output='...')".
_REPR_CALL = re.compile(r"[A-Z][\w.]{0,60}\(")
_REPR_FIELD = re.compile(r"\b(?:content|text|output|final_output|response|answer|result)\s*=\s*"
                         r"(?=[\"'])")
_REPR_VERDICT = re.compile(r"\b(?:final_?)?(?:score|rating|grade|verdict|correctness|accuracy|"
                           r"completeness|conciseness|relevance|hallucination)s?\s*=\s*-?\d",
                           re.I)
_PY_ESCAPES = {**_ESCAPES, "a": "\a", "v": "\v", "0": "\0"}


def _python_string(text: str, start: int) -> tuple[list[tuple[str, int]], int] | None:
    """The Python string literal at ``start``: its characters with their offsets, and its end."""
    quote, i = text[start], start + 1
    out: list[tuple[str, int]] = []
    while i < len(text):
        c = text[i]
        if c == quote:
            return out, i + 1
        if c == "\n":
            return None  # a one-line literal never spans a line
        if c != "\\" or i + 1 >= len(text):
            out.append((c, i))
            i += 1
            continue
        nxt = text[i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(nxt, 0)
        digits = text[i + 2:i + 2 + width]
        if width and re.fullmatch(rf"[0-9a-fA-F]{{{width}}}", digits):
            out.append((chr(int(digits, 16)), i))
            i += 2 + width
        elif nxt in _PY_ESCAPES:
            out.append((_PY_ESCAPES[nxt], i))
            i += 2
        else:  # not an escape: Python keeps the backslash
            out += [("\\", i), (nxt, i + 1)]
            i += 2
    return None


def _repr_texts(text: str) -> list[list[tuple[str, int]]] | None:
    """The text fields of an object's printed repr, when ``text`` is wholly one, or None."""
    body = text.strip()
    if not (_REPR_CALL.match(body) and body.endswith(")")):
        return None
    if _REPR_VERDICT.search(text):
        return None  # "Verdict(answer='yes', score=85)": its own verdict field, read as it stands
    texts = []
    for m in _REPR_FIELD.finditer(text):
        literal = _python_string(text, m.end())
        if literal is not None and literal[0]:
            texts.append(literal[0])
    return texts or None


def unwrap(text: str) -> tuple[str, tuple[int, ...]] | None:
    """The text a serialised API response carries, and each character's offset in ``text``.

    Returns None when ``text`` is not wholly such a response (see the module doc). The
    offsets hold one more entry, ``len(text)``, for the end. A streamed response's pieces are
    joined in order; the texts of several choices (``n`` > 1) are set apart by a blank line,
    so a reader sees two answers, never one number made of both.
    """
    stripped = text.lstrip()
    texts: dict[str, list[tuple[str, int]]] = {}
    if _REPR_CALL.match(stripped):
        printed = _repr_texts(text)
        return None if printed is None else _joined(
            text, {str(k): chars for k, chars in enumerate(printed)})
    if not stripped.startswith(("{", "[", "data:")):
        return None
    docs = _documents(text)
    if docs is None:
        return None
    if any(_holds_more(text, fields) for fields in docs):
        return None
    for fields in docs:
        pieces = _carried(text, fields)
        for owner, f in pieces:
            chars = texts.setdefault(owner, [])
            if len(docs) == 1 and chars:  # blocks of one message: a line apart
                chars.append(("\n", f.start))
            chars += _decode(text, f)
    return _joined(text, texts) if texts else None


def _joined(text: str, texts: dict[str, list[tuple[str, int]]]
            ) -> tuple[str, tuple[int, ...]]:
    """Several carried texts as one, a blank line apart, with their offsets."""
    joined: list[tuple[str, int]] = []
    for chars in texts.values():
        if joined and chars:
            joined += [("\n", chars[0][1]), ("\n", chars[0][1])]
        joined += chars
    return "".join(c for c, _ in joined), (*(o for _, o in joined), len(text))


__all__ = ["unwrap"]

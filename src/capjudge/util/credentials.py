"""Keeping credentials out of everything capjudge writes, logs or sends by accident.

Secrets live in environment variables only: the API key in ``OPENAI_API_KEY`` (or the variable a
judge names with ``backend_options.api_key_env``). Nothing else may carry one, and base URLs are
the usual leak: ``http://user:pass@host/v1`` given as ``--base-url``, ``backend_options.base_url``
or ``OPENAI_BASE_URL`` would be written to ``summary.json``, ``reports/lineage.json``, the report
database, the run registry, ``dvc.lock`` (params are recorded there) and Prefect's flow-run
parameters, and the HTTP client would send them as Basic auth instead of the bearer key.

So a URL with user-info is refused where it enters (:func:`check_url`, used by the judge config,
the OpenAI backend and the flows' params loader), and whatever describes a backend passes its
URL through :func:`strip_userinfo` as a second line of defence (:func:`redact` does the same for
free text such as error messages).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

# scheme://userinfo@ : userinfo runs to the last "@" before the path, query or fragment (an
# unencoded "@" in a password is common, and urlsplit splits on the last one too).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/?#\s]*@)")


class CredentialsInURLError(ValueError):
    """A URL carries credentials (user-info); the message never repeats them."""


def has_userinfo(url: str | None) -> bool:
    """Whether ``url`` carries ``user[:password]@`` before its host."""
    return bool(url) and _USERINFO.search(str(url)) is not None


def strip_userinfo(url: str) -> str:
    """``url`` without its user-info (``http://u:p@host/v1`` -> ``http://host/v1``)."""
    return _USERINFO.sub(r"\1", url)


# API-key-shaped tokens: OpenAI's "sk-..." (also sk-proj-..., sk-svcacct-...), and bearer
# headers a server may echo back.
_KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}|(?i:\bbearer\s+)[A-Za-z0-9._~+/\-]{8,}=*")
# Environment variables whose values are secrets: every value is removed from messages, so a
# server that repeats the key it was sent (a 401 body) cannot get it stored or printed.
_SECRET_ENV = re.compile(r"(?i)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)")
REDACTED = "[REDACTED]"


def secret_values() -> list[str]:
    """The values of secret-named environment variables (8+ characters), longest first."""
    import os

    values = {v for k, v in os.environ.items()
              if _SECRET_ENV.search(k) and v and len(v) >= 8 and v != "EMPTY"}
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: Sequence[str] | None = None) -> str:
    """Free text (an error message, a log line) with every credential in it removed.

    Removes the user-info of every URL, every value of a secret-named environment variable
    (``OPENAI_API_KEY``, ``*_TOKEN``, ...; or ``secrets`` when given), and anything shaped like
    an API key (``sk-...``, ``Bearer ...``).
    """
    if not text:
        return text
    text = _USERINFO.sub(r"\1", text)
    for secret in secret_values() if secrets is None else secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return _KEY_SHAPED.sub(REDACTED, text)


def redact_value(value: Any) -> Any:
    """A copy of ``value`` (nested dicts, lists, strings) with :func:`redact` on every string.

    Used for backend facts on their way to lineage, the report database and the registry.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_value(v) for v in value]
    return value


def check_url(url: str | None, where: str) -> None:
    """Refuse a URL that carries credentials.

    Args:
        url: the URL (None passes).
        where: what it came from, for the message (``--base-url``, ``OPENAI_BASE_URL``, ...).

    Raises:
        CredentialsInURLError: ``url`` has user-info. The message shows the URL without it.
    """
    if not has_userinfo(url):
        return
    assert url is not None
    raise CredentialsInURLError(
        f"{where}: the base URL {strip_userinfo(url)} carries credentials (user:password@); "
        "they would be written to summaries, lineage, the report database, dvc.lock and "
        "Prefect's flow parameters, and sent as HTTP Basic auth instead of the API key. Remove "
        "them from the URL and put the key in OPENAI_API_KEY (or in the environment variable "
        "named by backend_options.api_key_env).")


def find_credentials(value: Any, path: str = "") -> list[tuple[str, str]]:
    """Every string inside ``value`` (nested dicts and lists) that is a URL carrying user-info.

    They are given as (dotted path, URL) pairs, e.g.
    ``[("judges.gpt.backend_options.base_url", "http://…")]``.
    """
    found: list[tuple[str, str]] = []
    if isinstance(value, str):
        if has_userinfo(value):
            found.append((path or "<value>", value))
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            found += find_credentials(inner, f"{path}.{key}" if path else str(key))
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for k, inner in enumerate(value):
            found += find_credentials(inner, f"{path}[{k}]")
    return found


def refuse_credentials(value: Any, path: str = "") -> None:
    """:func:`check_url` on every URL inside ``value`` (a params file, a judge's options).

    Raises:
        CredentialsInURLError: the first URL with user-info, named by its dotted path.
    """
    for where, url in find_credentials(value, path):
        check_url(url, where)


__all__ = ["CredentialsInURLError", "check_url", "find_credentials", "has_userinfo", "redact",
           "redact_value", "refuse_credentials", "strip_userinfo"]

"""Run ``uv pip install`` with the package sources pip is configured to use here.

``scripts/setup.sh`` installs the pinned stack with uv when it can (about 10 s from a cold cache
on 2 cores, against 2-3 minutes for pip; issue 42). uv does not read pip's configuration, so a
machine whose pip was pointed at a mirror, a wheel folder or a constraints file would silently
resolve from PyPI instead: this script reads ``pip config list`` (files and ``PIP_*``
variables, the precedence pip's own ``install`` command uses) and passes the equivalents to uv.

Usage: ``python scripts/pip_like_uv.py UV [uv pip install arguments...]``; the exit status is
uv's. Settings with no uv equivalent are ignored (they do not choose which packages install).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys

# pip's configuration keys that choose where packages come from, as uv options. A key may hold
# several whitespace-separated values (pip splits these lists the same way).
LIST_OPTIONS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links",
                "constraint": "--constraint", "trusted-host": "--allow-insecure-host"}
# pip reads the global section, then the command's own section, then PIP_* variables.
SCOPES = ("global", "install", ":env:")


def pip_settings(python: str) -> dict[str, str]:
    """Pip's effective settings for ``pip install``, later scopes overriding earlier ones."""
    listing = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True,
                             text=True, check=False).stdout
    found: dict[tuple[str, str], str] = {}
    for line in listing.splitlines():
        name, sep, raw = line.partition("=")
        scope, dot, key = name.rpartition(".")
        if not (sep and dot) or scope not in SCOPES:
            continue
        try:
            value = ast.literal_eval(raw)  # pip prints repr() of the value
        except (SyntaxError, ValueError):
            value = raw
        found[(scope, key.replace("_", "-"))] = str(value)
    settings: dict[str, str] = {}
    for scope in SCOPES:
        settings.update({key: value for (where, key), value in found.items() if where == scope})
    return settings


def uv_command(uv: str, settings: dict[str, str], rest: list[str]) -> list[str]:
    """The uv command line equivalent to ``pip install REST`` under ``settings``."""
    command = [uv, "pip", "install"]
    if settings.get("index-url"):
        command += ["--index-url", settings["index-url"]]
    for key, option in LIST_OPTIONS.items():
        for value in settings.get(key, "").split():
            command += [option, value]
    if settings.get("no-index", "").lower() in {"1", "true", "yes", "on"}:
        command.append("--no-index")
    # pip takes the best version across every index and wheel folder; uv's default stops at
    # the first index that has the package (which would ignore, e.g., a local CPU torch).
    command += ["--index-strategy", "unsafe-best-match"]
    return command + rest


def main(argv: list[str]) -> int:
    """Run uv; its exit status is returned."""
    uv, rest = argv[0], argv[1:]
    settings = pip_settings(sys.executable)
    env = dict(os.environ)
    if settings.get("cert") and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = settings["cert"]
    if settings.get("timeout") or settings.get("default-timeout"):
        env.setdefault("UV_HTTP_TIMEOUT", settings.get("timeout") or settings["default-timeout"])
    return subprocess.run(uv_command(uv, settings, rest), env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``capjudge serve`` defaults that hold up beside other load: half the cores, idle threads sleep.

With a thread per core and llama.cpp's busy-waiting poll (50), a busy core slowed a 32-token
answer of the embedded model from about 1-3 s to 10-14 s on 2 cores (docs/guides/
local-servers.md). The engine itself is not started here: ``server_params`` is replaced by a
recorder that stops the command right after it was called.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

import capjudge.backends.llamacpp as llamacpp
from capjudge.cli import main as cli_main
from capjudge.protocol import BackendError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def record(gguf: Path, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise BackendError("recorded; not starting the engine", transient=False)

    monkeypatch.setattr(llamacpp, "resolve_model", lambda name: (Path("m.gguf"), "m"))
    monkeypatch.setattr(llamacpp, "server_params", record)
    return seen


def test_serve_defaults_to_half_the_cores_and_sleeping_threads(
        recorded: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["serve", "--port", str(_free_port())]) == 2  # stopped by the recorder
    assert "recorded; not starting the engine" in capsys.readouterr().err
    cores = len(os.sched_getaffinity(0))
    assert recorded["threads"] == max(1, min(8, cores // 2))
    assert recorded["poll"] == 0


def test_serve_passes_threads_and_poll_as_given(recorded: dict[str, Any]) -> None:
    assert cli_main(["serve", "--port", str(_free_port()), "--threads", "3",
                     "--poll", "50"]) == 2
    assert recorded["threads"] == 3 and recorded["poll"] == 50


@pytest.mark.parametrize("flag", [["--poll", "101"], ["--poll", "-1"], ["--threads", "0"]])
def test_serve_refuses_out_of_range_settings(flag: list[str], recorded: dict[str, Any],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:  # argparse's refusal, before anything starts
        cli_main(["serve", "--port", str(_free_port()), *flag])
    assert info.value.code == 2
    assert flag[0] in capsys.readouterr().err
    assert not recorded  # the engine's parameters were never built

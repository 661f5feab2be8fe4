"""``capjudge serve``: llama.cpp's OpenAI-compatible server on a GGUF (default: embedded).

The server is llama.cpp's own (through the PyPI package ``xllamacpp``): ``/v1/models``,
``/health``, ``/v1/chat/completions`` with ``logprobs``/``top_logprobs`` and assistant prefill,
continuous batching over ``--parallel`` slots and prompt caching. The first line on stdout is
the base URL, printed once ``/v1/models`` answers, so a script can wait for it::

    url=$(capjudge serve --port 8080 | head -n 1)   # or read the first line of a background job
    capjudge score --backend openai/gemma-3-270m --base-url "$url" ...

SIGINT or SIGTERM stops it at once (requests in flight are dropped), exit status 0. A
port in use, or a model file that is missing, unreadable or not a GGUF, is a one-line error
(exit 2).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
import urllib.request
from typing import Any

from capjudge.cli.common import EXIT_INTERNAL, EXIT_OK, UsageError, bounded

READY_TIMEOUT_S = 120.0
"""How long the server may take to answer ``/v1/models`` after loading."""


def _check_port(host: str, port: int) -> None:
    """Refuse a port another process listens on (the engine would fail less clearly)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UsageError(f"cannot listen on {host}:{port}: "
                             f"{exc.strerror or exc}") from None


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _stopped() -> None:
    """End the process now, status 0.

    Not through the engine's destructor: it waits for the requests in flight while holding
    the interpreter lock (measured: a long generation kept the process alive past 20 s, no
    Python thread able to run). The OS closes the listener.
    """
    print("capjudge serve: stopped", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(EXIT_OK)


def _pause(seconds: float) -> None:
    """Sleep, or stop if SIGINT/SIGTERM is pending (they are blocked: see :func:`run`)."""
    if signal.sigtimedwait(STOP_SIGNALS, seconds) is not None:
        _stopped()


def _wait_ready(url: str, timeout_s: float) -> bool:
    """Poll ``url`` until it answers 200 (True) or the time is up (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - our server
                if answer.status == 200:
                    return True
        except OSError:
            pass
        _pause(0.1)
    return False


def run(args: argparse.Namespace) -> int:
    """Start the server, print its base URL, serve until SIGINT/SIGTERM.

    Once serving, it does not return: the process exits with status 0 on the signal.
    """
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, got {args.port}")
    _check_port(args.host, args.port)
    # SIGINT/SIGTERM are blocked before the engine starts, so its native threads inherit the
    # mask: the signals then wait for this thread's sigwait, whichever thread the kernel
    # would have picked and whatever handler the engine might install. (With a Python
    # handler, one CI run in many found the process still serving 20 s after SIGTERM.)
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        code = _serve(args)
    finally:  # only reached when it could not serve (a stop ends the process)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    return code


def _serve(args: argparse.Namespace) -> int:
    """Start the engine, announce the URL once it answers, then wait for a stop signal."""
    from capjudge.backends.llamacpp import (
        resolve_model,
        server_params,
        start_engine,
        weights_tags,
    )
    from capjudge.protocol import BackendError

    try:
        gguf, alias = resolve_model(args.model.removeprefix("llamacpp/"))
        params = server_params(gguf, alias=alias, mmproj=args.mmproj, parallel=args.parallel,
                               threads=args.threads, ctx=args.ctx, host=args.host,
                               port=args.port, poll=args.poll)
        # The weights' sha256 as a model tag (/v1/models): clients see a weight change
        # behind the same served name (capjudge.backends.served_identity).
        params.model_tags = weights_tags(args.model, gguf, args.mmproj)
        engine = start_engine(params)  # noqa: F841 - must stay alive until the process ends
    except BackendError as exc:
        raise UsageError(str(exc)) from None
    probe_host = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host  # noqa: S104
    probe_host = f"[{probe_host}]" if ":" in probe_host else probe_host
    if not _wait_ready(f"http://{probe_host}:{args.port}/v1/models", READY_TIMEOUT_S):
        print(f"capjudge serve: error: the server did not answer /v1/models within "
              f"{READY_TIMEOUT_S:g} s", file=sys.stderr)
        return EXIT_INTERNAL
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"http://{shown}:{args.port}/v1", flush=True)
    weights = ", ".join(sorted(params.model_tags))
    print(f"serving {alias} ({gguf}, {weights}) as model {alias!r}; stop with Ctrl-C or "
          "SIGTERM", file=sys.stderr, flush=True)
    signal.sigwait(STOP_SIGNALS)
    _stopped()
    return EXIT_OK  # not reached: _stopped ends the process


def _default_threads() -> int:
    """Half the cores this process may run on (at least 1, at most 8)."""
    return max(1, min(8, len(os.sched_getaffinity(0)) // 2))


def register(sub: Any) -> None:
    """Add the subcommand."""
    p = sub.add_parser("serve", help="run llama.cpp's OpenAI-compatible server on a GGUF "
                       "(default: the embedded model)")
    p.add_argument("model", nargs="?", default="embedded/gemma-3-270m",
                   help="embedded/gemma-3-270m (default) or a path to a .gguf file")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--mmproj", help="a multimodal projector GGUF: the model takes images")
    p.add_argument("--parallel", type=int, default=4, help="slots decoded together")
    # Defaults that hold up beside other load: with a thread per core and llama.cpp's
    # busy-waiting poll (50), one busy core on a 2-core machine slowed a 32-token answer from
    # 0.9-2.7 s (1 thread) to 10-14 s (its threads wait for each other at every step); half
    # the cores, and idle threads that sleep, leave room for the client and everything else.
    p.add_argument("--threads", type=bounded(int, 1), default=_default_threads(),
                   help="CPU threads (default: half the cores, at least 1, at most 8: the "
                        "rest stay free for the client and anything else running)")
    p.add_argument("--poll", type=bounded(int, 0, 100), default=0,
                   help="how hard idle engine threads busy-wait for work, 0-100 (llama.cpp's "
                        "--poll; default 0: they sleep, and a busy machine does not stall "
                        "them; 50 is llama.cpp's own default, a little faster on an idle one)")
    p.add_argument("--ctx", type=int, default=None,
                   help="context tokens shared by the slots (default 2048 per slot)")
    p.set_defaults(func=run)

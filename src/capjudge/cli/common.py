"""What several subcommands share: exit codes, the usage error, judge options and config."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from capjudge.judge import JudgeConfig

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_STRICT = 0, 1, 2, 3
EXIT_ALERT = 4  # `watch --once`: a re-evaluated judge raised an alert


class UsageError(Exception):
    """Bad arguments or unreadable input: exit code 2 with the message."""


def bounded(kind: type, low: float | None = None, high: float | None = None, *,
            strict_low: bool = False) -> Any:
    """An argparse ``type=`` that parses ``kind`` and refuses values out of range (or nan).

    argparse turns the refusal into its one-line error and exit 2, before anything runs.
    """
    import math

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a{'n integer' if kind is int else ' number'}:"
                                             f" {text!r}") from None
        bad = isinstance(value, float) and not math.isfinite(value)
        if low is not None:
            bad = bad or (value <= low if strict_low else value < low)
        if high is not None:
            bad = bad or value > high
        if bad:
            want = f"{'>' if strict_low else '>='} {low:g}" if low is not None else ""
            if high is not None:
                want = f"in {low:g}..{high:g}" if low is not None else f"<= {high:g}"
            raise argparse.ArgumentTypeError(f"must be {want}, got {text}")
        return value

    return parse


def add_judge_options(p: argparse.ArgumentParser) -> None:
    """--method (choices from the method registry), --backend and the client settings."""
    from capjudge.backends import DEFAULT_BACKEND, backend_kinds
    from capjudge.methods import DEFAULT_METHOD, method_names

    p.add_argument("--method", default=DEFAULT_METHOD, choices=method_names())
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help=f"KIND/NAME with KIND one of {', '.join(backend_kinds())} "
                        "(openai/<model>, hf/<path>, embedded/gemma-3-270m, fake/<script>)")
    p.add_argument("--base-url", help="OpenAI-compatible server (else $OPENAI_BASE_URL); no "
                   "credentials in it: the key comes from $OPENAI_API_KEY")
    p.add_argument("--max-retry-after", type=float, default=None, metavar="SECONDS",
                   help="longest Retry-After to wait (default 120); a request asked to wait "
                        "longer fails with the reason")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="client timeout of one call (default 120; judge setting timeout_s)")
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--min-mass", type=float, default=0.5,
                   help="below this captured probability mass a judgement is 'low_mass'")
    p.add_argument("--cache-dir", type=Path,
                   help="request cache (default $CAPJUDGE_CACHE_DIR or .capjudge-cache)")
    p.add_argument("--params", default=None,
                   help="for the price table (default: params.yaml when there is one)")
    p.add_argument("--profile", help="a method's named settings (gveval: gveval_code, what "
                   "the G-VEval repository's scorer does)")
    p.add_argument("--templates", type=Path, help="a folder of your own prompt templates "
                   "(templates.yaml; versioned by content hash)")
    p.add_argument("--method-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a method option (judges.<name>.method_options), e.g. "
                        "verdict_format=json_schema, prompt_variant=guarded (repeatable)")
    p.add_argument("--backend-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a backend option (judges.<name>.backend_options; the value read as "
                        "YAML), e.g. confirm=follow_up, force_anchor=true (repeatable)")


class _ClientLimits(TypedDict, total=False):
    """The client limits a flag sets (``--max-retry-after``, ``--timeout``)."""

    max_retry_after_s: float
    timeout_s: float


def judge_config(args: argparse.Namespace, modes: list[str] | None) -> JudgeConfig:
    """A :class:`~capjudge.judge.JudgeConfig` from the judge options.

    Raises:
        UsageError: a refused setting (e.g. credentials in ``--base-url``).
    """
    from capjudge.judge import JudgeConfig

    options: dict[str, object] = {}
    templates = getattr(args, "templates", None)
    if templates and not (Path(templates) / "templates.yaml").is_file():
        raise UsageError(f"--templates {templates}: no templates.yaml in that folder")
    for pair in getattr(args, "backend_option", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--backend-option wants KEY=VALUE, got {pair!r}")
        import yaml

        options[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    if args.base_url:
        options["base_url"] = args.base_url
    params = getattr(args, "params", None)
    if params and not Path(params).is_file():
        raise UsageError(f"--params {params}: no such file")
    prices = read_prices(Path(params or "params.yaml"))
    extra: _ClientLimits = {}
    if getattr(args, "max_retry_after", None) is not None:
        extra["max_retry_after_s"] = args.max_retry_after
    if getattr(args, "timeout", None) is not None:
        extra["timeout_s"] = args.timeout
    given: dict[str, object] = {"method": args.method}
    method_options: dict[str, object] = {}
    if getattr(args, "templates", None):
        method_options["templates"] = str(args.templates)
    for pair in getattr(args, "method_option", None) or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--method-option wants KEY=VALUE, got {pair!r}")
        method_options[key.strip()] = value.strip()
    if method_options:
        given["method_options"] = method_options
    try:
        from capjudge.judge import apply_profile

        # The CLI sets no temperature or top_logprobs: a profile's stand.
        # Any: the keys become JudgeConfig's keyword arguments, of several types.
        settings: dict[str, Any] = apply_profile(given, getattr(args, "profile", None),
                                                 {"method"})
        from capjudge.methods import check_method_options

        # Named options are checked here, as in params.yaml: a typo, or another method's
        # option, is a usage error, not a traceback or an option silently ignored.
        check_method_options(args.method, settings.get("method_options") or {})
        return JudgeConfig(backend=args.backend, modes=modes,
                           max_tokens=args.max_tokens, min_mass=args.min_mass,
                           backend_options=options, prices=prices,
                           cache_dir=str(args.cache_dir) if args.cache_dir else None,
                           **settings, **extra)
    except ValueError as exc:  # refused settings, e.g. credentials in --base-url
        raise UsageError(flag_message(str(exc))) from exc


# Judge settings and the flags that set them, so a refusal names what the user typed.
_FLAGS = {"max_tokens": "--max-tokens", "min_mass": "--min-mass", "limit": "--limit",
          "max_retry_after_s": "--max-retry-after", "timeout_s": "--timeout",
          "concurrency": "--concurrency", "item_fraction": "--item-fraction",
          "item_seed": "--item-seed"}


def flag_message(message: str) -> str:
    """``"max_tokens must be ..."`` as ``"--max-tokens (max_tokens) must be ..."``."""
    setting, sep, rest = message.partition(" must be ")
    if sep and setting in _FLAGS:
        return f"{_FLAGS[setting]} ({setting}) must be {rest}"
    return message


def read_prices(params: Path) -> dict[str, dict[str, float]]:
    """``judge.prices`` of a params file (empty when the file does not exist).

    The file is read by :func:`capjudge.params.load_params`, so a typo anywhere in it fails
    here, before any request is sent.

    Raises:
        UsageError: the file is not YAML or does not fit the params schema (one line naming
            the key and the closest valid one).
    """
    if not params.is_file():
        return {}
    from capjudge.params import load_params

    try:
        data = load_params(params)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--params {exc}") from None
    # The params schema has checked judge.prices against JudgeConfig.prices.
    prices: dict[str, dict[str, float]] = (data.get("judge") or {}).get("prices") or {}
    return prices

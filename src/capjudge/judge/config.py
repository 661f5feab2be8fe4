"""A judge's configuration: :class:`JudgeConfig`, its checks, profiles and params.yaml glue.

One judge is a method with its modes on one backend (``params.yaml: judges.<name>``). This
module builds it from ``params.yaml`` (:func:`config_from_params`, :func:`judge_section`),
from a method's named profile (:func:`apply_profile`) and from environment variables
(:func:`env_settings`), and refuses every setting out of its range before anything runs
(:func:`check_settings`). Re-exported by :mod:`capjudge.judge`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from capjudge.client import DEFAULT_MAX_RETRY_AFTER_S
from capjudge.methods import get_method
from capjudge.protocol import Decoding
from capjudge.stage_files import CONTEXTS, default_dir
from capjudge.util.credentials import refuse_credentials

DEFAULT_TIMEOUT_S = 120.0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_settings(config: Any) -> None:
    """Refuse every judge setting out of its range before anything runs.

    One rule per setting, so the CLI, ``params.yaml`` and the flows fail alike, with a
    one-line message naming the setting (the CLI turns it into exit 2).

    Raises:
        ValueError: a setting is of the wrong type or out of range (``nan`` included).
    """
    def need(ok: bool, name: str, want: str) -> None:
        if not ok:
            raise ValueError(f"{name} must be {want}, got {getattr(config, name)!r}")

    need(_is_int(config.max_tokens) and config.max_tokens >= 1, "max_tokens",
         "an integer >= 1")
    need(_is_number(config.min_mass) and 0 <= config.min_mass <= 1, "min_mass",
         "a number in [0, 1]")
    need(_is_number(config.temperature) and config.temperature >= 0, "temperature",
         "a number >= 0")
    need(_is_int(config.top_logprobs) and 0 <= config.top_logprobs <= 20, "top_logprobs",
         "an integer in 0..20")
    need(config.limit is None or (_is_int(config.limit) and config.limit >= 1), "limit",
         "an integer >= 1 (or null: every item)")
    need(config.item_fraction is None or (_is_number(config.item_fraction)
                                          and 0 < config.item_fraction <= 1),
         "item_fraction", "a number in (0, 1] (or null: every item)")
    need(_is_int(config.item_seed), "item_seed", "an integer")
    need(_is_int(config.max_attempts) and config.max_attempts >= 1, "max_attempts",
         "an integer >= 1")
    need(_is_number(config.backoff_base_s) and config.backoff_base_s >= 0, "backoff_base_s",
         "a number >= 0")
    need(_is_number(config.max_retry_after_s) and config.max_retry_after_s > 0,
         "max_retry_after_s", "a number > 0")
    need(_is_number(config.timeout_s) and config.timeout_s > 0, "timeout_s", "a number > 0")
    need(config.concurrency is None or (_is_int(config.concurrency)
                                        and config.concurrency >= 1),
         "concurrency", "an integer >= 1 (or null)")
    for name in ("rpm", "tpm"):
        value = getattr(config, name)
        need(value is None or (_is_number(value) and value > 0), name, "a number > 0 (or null)")
    need(isinstance(config.backend_options, dict), "backend_options", "a mapping")
    need(isinstance(config.method_options, dict), "method_options", "a mapping")
    need(isinstance(config.prices, dict), "prices", "a mapping")


@dataclass
class JudgeConfig:
    """One judge: a method with its modes on one backend (``params.yaml: judges.<name>``)."""

    method: str
    backend: str
    modes: list[str] | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    top_logprobs: int = 20
    detail: str = "auto"
    min_mass: float = 0.5
    backend_options: dict[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    rpm: float | None = None
    tpm: float | None = None
    max_attempts: int = 5
    backoff_base_s: float = 0.5
    limit: int | None = None  # judge only the first N items (smoke runs)
    # Judge a seeded sample of about this share of the items (capjudge.judge.selection): the
    # others have no rows, and the summary and the report say how many were judged.
    item_fraction: float | None = None
    item_seed: int = 0
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    cache_dir: str | None = None
    method_options: dict[str, Any] = field(default_factory=dict)
    # The backend's fingerprint as last seen by the watch flow (API system_fingerprint, model
    # list). It joins the model snapshot in the cache key, so a changed remote model is asked
    # again instead of being answered from the cache.
    fingerprint: str | None = None
    # Test-retest: ask every request this many times (distinct cache keys, one sample each).
    # Needs temperature > 0; the report measures the judge's reliability from the repeats.
    repeats: int = 1
    # The longest Retry-After the client waits; a request asked to wait longer fails with the
    # reason (and every worker of the client waits out shorter windows together).
    max_retry_after_s: float = DEFAULT_MAX_RETRY_AFTER_S
    # The window rpm/tpm are enforced over, with the budget scaled to it (rpm x window / 60
    # requests per window). Providers enforce a minute's budget in shorter quanta (OpenAI:
    # "60,000 rpm may be enforced as 1,000 requests per second"): a window of a few seconds
    # avoids the bursts they reject. 60 is the plain per-minute budget.
    rate_window_s: float = 60.0
    # How requests reach the model: "sync" (one call each) or "batch" (the OpenAI Batch API,
    # openai/<model> backends: see capjudge.backends.openai_batch; ``batch_options`` tune
    # it). Not "mode": ``modes`` are the method's modes.
    submit: str = "sync"
    batch_options: dict[str, Any] = field(default_factory=dict)
    # The client's timeout for one call, in seconds (backends that take one: openai/...).
    timeout_s: float = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        """Reject settings that would make the repeats meaningless, and credentials.

        Raises:
            ValueError: ``repeats`` is not a positive integer, or ``repeats > 1`` at
                temperature 0 (every repeat would be the same answer, faking perfect
                reliability).
            capjudge.util.credentials.CredentialsInURLError: a URL in ``backend_options`` or
                ``method_options`` carries user-info (a ValueError too).
        """
        check_settings(self)
        if isinstance(self.repeats, bool) or not isinstance(self.repeats, int) \
                or self.repeats < 1:
            raise ValueError(f"repeats must be a positive integer, got {self.repeats!r}")
        if self.repeats > 1 and not self.temperature > 0:
            raise ValueError(
                f"repeats: {self.repeats} needs temperature > 0 (got {self.temperature}): at "
                "temperature 0 every repeat is the same answer, which would fake perfect "
                "test-retest reliability; set e.g. temperature: 1.0, or repeats: 1")
        if not self.rate_window_s > 0:
            raise ValueError(f"rate_window_s must be positive, got {self.rate_window_s!r}")
        if self.rpm is not None and self.rpm * self.rate_window_s / 60 < 1:
            # A window that holds less than one request would admit one anyway (a request
            # always goes alone), i.e. more than the budget.
            raise ValueError(f"rate_window_s: {self.rate_window_s:g} s holds less than one "
                             f"request at rpm {self.rpm:g}; use at least {60 / self.rpm:g} s")
        # The config travels as Prefect parameters and into dvc.lock and summaries: a URL with
        # user-info here would be persisted everywhere, so it is refused before anything runs.
        refuse_credentials({"backend_options": self.backend_options,
                            "method_options": self.method_options})
        from capjudge.backends.openai_batch import SUBMIT_MODES, BatchOptions

        if self.submit not in SUBMIT_MODES:
            raise ValueError(f"submit must be one of {', '.join(SUBMIT_MODES)}, got "
                             f"{self.submit!r}")
        BatchOptions.from_dict(self.batch_options)  # unknown keys fail before anything runs

    @classmethod
    def from_params(cls, section: Mapping[str, object], common: Mapping[str, object] | None = None
                    ) -> JudgeConfig:
        """Build from a params section (unknown keys are an error naming them).

        Two keys are expanded first: ``profile`` (a method's named settings, e.g. G-VEval's
        ``gveval_code``; :func:`apply_profile`) and ``templates`` (a user's template folder,
        passed to the method as ``method_options.templates``).
        """
        # Any: the keys become this dataclass's keyword arguments, of several types.
        merged: dict[str, Any] = {**(common or {}), **section, **env_settings()}
        if "templates" in merged:
            merged["method_options"] = {**(merged.get("method_options") or {}),
                                        "templates": merged.pop("templates")}
        if "profile" in merged:
            merged = apply_profile(merged, merged.pop("profile"), explicit=set(section))
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(merged) - known)
        if unknown:
            raise ValueError(f"unknown judge settings: {', '.join(unknown)}")
        return cls(**merged)

    def decoding(self) -> Decoding:
        """The decoding settings every request of this judge uses."""
        return Decoding(max_tokens=self.max_tokens, temperature=self.temperature,
                        top_logprobs=self.top_logprobs)

    def stable_hash(self) -> str:
        """A hash of every setting, equal across processes and hosts (unlike ``id()``).

        It is the key under which workers share one backend and client.
        """
        payload = json.dumps(asdict(self), sort_keys=True, default=str)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


ENV_SETTINGS: dict[str, str] = {"cache_dir": "CAPJUDGE_CACHE_DIR"}
"""Judge settings an environment variable sets. The one precedence for every setting:
command-line flag > environment variable > ``params.yaml`` > default."""


def env_settings() -> dict[str, str]:
    """The judge settings set by environment variables (:data:`ENV_SETTINGS`), non-empty ones.

    They win over ``params.yaml`` (:meth:`JudgeConfig.from_params`); a command-line flag wins
    over them (the CLI builds its config from its flags).
    """
    import os

    return {key: os.environ[var] for key, var in ENV_SETTINGS.items() if os.environ.get(var)}


def apply_profile(settings: Mapping[str, object], profile: str | None,
                  explicit: set[str] | None = None) -> dict[str, object]:
    """``settings`` with a method's named profile filled in under them.

    Args:
        settings: judge settings (``method`` required).
        profile: a name from the method's :attr:`~capjudge.methods.Method.profiles` (None:
            unchanged).
        explicit: the keys the user set for this judge (default: all of ``settings``); they
            win over the profile. ``method_options`` are merged key by key, and record the
            profile's name.

    Raises:
        ValueError: the method has no such profile (the message lists its profiles).
    """
    if profile is None:
        return dict(settings)
    method = get_method(str(settings["method"]))
    if profile not in method.profiles:
        raise ValueError(f"method {method.name!r} has no profile {profile!r}; profiles: "
                         f"{', '.join(sorted(method.profiles)) or 'none'}")
    explicit = set(settings) if explicit is None else explicit
    out = dict(settings)
    chosen = method.profiles[profile]
    for key, value in chosen.items():
        if key != "method_options" and key not in explicit:
            out[key] = value
    if "method_options" in chosen:
        mine = settings.get("method_options") or {}
        if not isinstance(mine, Mapping):
            raise ValueError(f"method_options must be a mapping, got {mine!r}")
        out["method_options"] = {**chosen["method_options"], **mine, "profile": profile}
    return out


def judge_section(params: Mapping[str, Any], name: str) -> dict[str, Any]:
    """``judges.NAME`` or ``context_judges.NAME`` from params.yaml."""
    for group in ("judges", "context_judges"):
        if name in (params.get(group) or {}):
            return dict(params[group][name])
    known = [*(params.get("judges") or {}), *(params.get("context_judges") or {})]
    raise KeyError(f"no judge {name!r} in params.yaml (known: {', '.join(known)})")


def config_from_params(params: Mapping[str, Any], name: str) -> JudgeConfig:
    """The named judge's config, with the shared ``judge`` section as defaults."""
    section = judge_section(params, name)
    section.pop("out", None)
    context = section.pop("context", None)
    if context is not None:
        ctx = (params.get("contexts") or {}).get(context)
        if ctx is None:
            raise KeyError(f"judge {name!r} reads contexts.{context}, which is not defined")
        out = ctx.get("out", default_dir("context", context))
        section["method_options"] = {**section.get("method_options", {}),
                                     "contexts": f"{out}/{CONTEXTS}"}
    common = dict(params.get("judge") or {})
    return JudgeConfig.from_params(section, common)

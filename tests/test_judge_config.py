"""Unit tests of :mod:`capjudge.judge.config`: a judge's settings, checked before anything
runs, and built from params.yaml with one precedence (flag > environment > params > default)."""

from __future__ import annotations

import pytest

from capjudge.judge.config import (
    JudgeConfig,
    apply_profile,
    check_settings,
    config_from_params,
    env_settings,
)


@pytest.mark.parametrize(("setting", "value", "message"), [
    ("max_tokens", 0, "max_tokens must be an integer >= 1, got 0"),
    ("min_mass", float("nan"), "min_mass must be a number in [0, 1], got nan"),
    ("top_logprobs", 21, "top_logprobs must be an integer in 0..20, got 21"),
    ("temperature", -0.1, "temperature must be a number >= 0, got -0.1"),
])
def test_a_setting_out_of_range_is_refused_by_name(setting: str, value: object,
                                                   message: str) -> None:
    config = JudgeConfig(method="gveval", backend="fake/hash")
    check_settings(config)  # the defaults pass
    object.__setattr__(config, setting, value)
    with pytest.raises(ValueError) as raised:
        check_settings(config)
    assert str(raised.value) == message


def test_a_profile_fills_in_under_the_users_settings() -> None:
    out = apply_profile({"method": "gveval", "temperature": 0.0,
                         "method_options": {"video_detail": "low"}}, "gveval_code",
                        explicit={"temperature", "method_options"})
    assert out["temperature"] == 0.0  # set by the user: the profile does not override it
    assert out["top_logprobs"] == 5  # from the profile
    assert out["method_options"] == {"video_detail": "low", "frame_policy": "gveval_code",
                                     "profile": "gveval_code"}
    with pytest.raises(ValueError, match="has no profile 'fast'; profiles: gveval_code"):
        apply_profile({"method": "gveval"}, "fast")


def test_params_give_the_shared_section_as_defaults_and_the_environment_wins(
        monkeypatch: pytest.MonkeyPatch) -> None:
    params = {
        "judge": {"cache_dir": "from-params", "max_tokens": 64},
        "judges": {"a": {"method": "gveval", "backend": "fake/hash", "out": "data/judge/a"}},
        "contexts": {"ctx": {"backend": "fake/hash+vision", "out": "data/context/mine"}},
        "context_judges": {"b": {"method": "visce2", "backend": "fake/hash+vision",
                                 "context": "ctx"},
                           "c": {"method": "visce2", "backend": "fake/hash", "context": "x"}},
    }
    monkeypatch.delenv("CAPJUDGE_CACHE_DIR", raising=False)
    a = config_from_params(params, "a")
    assert (a.cache_dir, a.max_tokens) == ("from-params", 64)
    monkeypatch.setenv("CAPJUDGE_CACHE_DIR", "from-env")
    assert env_settings() == {"cache_dir": "from-env"}
    assert config_from_params(params, "a").cache_dir == "from-env"
    b = config_from_params(params, "b")
    assert b.method_options["contexts"] == "data/context/mine/contexts.parquet"
    with pytest.raises(KeyError, match="reads contexts.x, which is not defined"):
        config_from_params(params, "c")
    with pytest.raises(KeyError, match=r"no judge 'z' in params.yaml \(known: a, b, c\)"):
        config_from_params(params, "z")
    with pytest.raises(ValueError, match="unknown judge settings: colour"):
        JudgeConfig.from_params({"method": "gveval", "backend": "fake/hash", "colour": 1})

"""The params.yaml schema: typos, wrong types and unknown ids fail fast with the closest key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from capjudge.params import ParamsError, load_params, validate_params

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return load_params(ROOT / "params.yaml")


def _error(params: dict[str, Any], edit: Any) -> str:
    data = copy.deepcopy(params)
    edit(data)
    with pytest.raises(ParamsError) as info:
        validate_params(data)
    message = str(info.value)
    assert "\n" not in message  # one line
    return message


def test_the_committed_params_file_validates(committed: dict[str, Any]) -> None:
    assert validate_params(committed) is committed  # returned unchanged
    assert {"sample", "ingest", "judges", "report", "watch"} <= set(committed)


# One typo per section: (section path, wrong key, the key the message must suggest).
TYPOS = [
    (("sample",), "image", "images"),
    (("ingest",), "media_rot", "media_root"),
    (("runner",), "thread_per_worker", "threads_per_worker"),
    (("judge",), "min_mas", "min_mass"),
    (("contexts", "embedded"), "kind", "kinds"),
    (("judges", "gveval-embedded"), "max_tokns", "max_tokens"),
    (("context_judges", "visce2-embedded"), "contxt", "context"),
    (("aggregate",), "gama", "gamma"),
    (("validate",), "max_failure", "max_failure_rate"),
    (("report",), "bootstrapp", "bootstrap"),
    (("watch",), "alert_dorp", "alert_drop"),
]


@pytest.mark.parametrize(("section", "typo", "meant"), TYPOS,
                         ids=[".".join(t[0]) for t in TYPOS])
def test_a_typo_in_each_section_names_the_closest_key(
        committed: dict[str, Any], section: tuple[str, ...], typo: str, meant: str) -> None:
    def edit(data: dict[str, Any]) -> None:
        target = data
        for key in section:
            target = target[key]
        target[typo] = 1

    message = _error(committed, edit)
    assert message == f"{'.'.join(section)}.{typo}: unknown key (did you mean {meant!r}?)"


def test_a_misspelt_section_names_the_closest_section(committed: dict[str, Any]) -> None:
    message = _error(committed, lambda d: d.update(reprot=d.pop("report")))
    assert message == "reprot: unknown key (did you mean 'report'?)"


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("report", "bootstrap"), "many", "report.bootstrap: Input should be a valid integer"),
    (("report", "calibration"), "yes", "report.calibration: Input should be a valid boolean"),
    (("validate", "min_mass"), True, "validate.min_mass: Input should be a valid number"),
    (("judges", "gveval-embedded", "modes"), "ref-only",
     "judges.gveval-embedded.modes: Input should be a valid list"),
    (("judge", "prices", "gpt-4.1", "input_per_1m"), "cheap",
     "judge.prices.gpt-4.1.input_per_1m: Input should be a valid number"),
    (("contexts", "embedded", "max_tokens"), "lots",
     "contexts.embedded.max_tokens: Input should be a valid integer"),
    (("judges", "gveval-embedded", "backend_options"), [1],
     "judges.gveval-embedded.backend_options: expected a mapping, got [1]"),
])
def test_a_wrong_type_names_the_key(committed: dict[str, Any], path: tuple[str, ...],
                                    value: Any, expected: str) -> None:
    def edit(data: dict[str, Any]) -> None:
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    assert _error(committed, edit).startswith(expected)


def test_an_entry_that_is_not_a_mapping(committed: dict[str, Any]) -> None:
    message = _error(committed, lambda d: d["judges"].update(extra=3))
    assert message == "judges.extra: expected a mapping, got 3"


def test_unknown_method_and_backend_ids(committed: dict[str, Any]) -> None:
    message = _error(committed, lambda d: d["judges"]["gveval-embedded"].update(method="gveal"))
    assert message == ("judges.gveval-embedded.method: unknown method 'gveal' "
                       "(did you mean 'gveval'?)")
    message = _error(committed, lambda d: d["contexts"]["embedded"].update(
        backend="opneai/gpt-4o"))
    assert message.startswith("contexts.embedded.backend: unknown backend kind 'opneai'")
    assert "(did you mean 'openai'?)" in message
    message = _error(committed, lambda d: d["judges"]["gveval-embedded"].pop("method"))
    assert message == "judges.gveval-embedded.method: missing (required)"


def test_free_form_options_are_left_to_the_components(committed: dict[str, Any]) -> None:
    # The values of backend_options are the backend's to check (their keys are checked
    # against the class's declared options: see the next test); method_options stay free-form.
    data = copy.deepcopy(committed)
    data["judges"]["likelihood-embedded"]["backend_options"] = {
        "batch_size": 16, "prefix_sharing": True, "threads": 2}
    data["judges"]["gveval-embedded"]["method_options"] = {"prompt_variant": "guarded",
                                                           "anything_new": "y"}
    assert validate_params(data) is data


def test_a_backend_option_typo_fails_at_load_with_the_closest_option(
        committed: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a typo in backend_options surfaced only when the stage built the backend."""
    from capjudge.backends.base import Backend
    from capjudge.backends.openai_backend import OpenAIBackend

    def never(*args: Any, **kwargs: Any) -> Backend:
        raise AssertionError("checking params must not build a backend")

    monkeypatch.setattr(OpenAIBackend, "create", classmethod(never))
    message = _error(committed, lambda d: d["judges"]["gveval-embedded"].update(
        backend="openai/gpt-4o", backend_options={"base_ulr": "http://127.0.0.1:9/v1"}))
    assert message.startswith("judges.gveval-embedded.backend_options.base_ulr: unknown option "
                              "of backend 'openai/gpt-4o' (did you mean 'base_url'?); "
                              "it accepts: api_key_env, base_url, ")
    message = _error(committed, lambda d: d["judges"]["gveval-embedded"][
        "backend_options"].update(thread=1))
    assert "backend 'llamacpp/gemma-3-270m' (did you mean 'threads'?)" in message
    message = _error(committed, lambda d: d["contexts"]["embedded"].update(
        backend_options={"batchsize": 4}))
    assert message.startswith("contexts.embedded.backend_options.batchsize: unknown option of "
                              "backend 'embedded/gemma-3-270m' (did you mean 'batch_size'?)")
    # The shared judge section's backend_options reach every judge that sets none of its own.
    message = _error(committed, lambda d: d["judge"].update(backend_options={"zzz": 1}))
    assert message.startswith("judge.backend_options.zzz: unknown option of backend "
                              "'embedded/gemma-3-270m' of judges.cap3d-embedded; it accepts")


def test_a_backend_option_typo_stops_the_judge_stage_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.judge import main

    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["judges"]["gveval-embedded"]["backend"] = "openai/gpt-4o"
    data["judges"]["gveval-embedded"]["backend_options"] = {"base_ulr": "http://127.0.0.1:9/v1"}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main(["--name", "gveval-embedded", "--params", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "(did you mean 'base_url'?)" in err


def test_a_methods_named_options_take_only_its_values(committed: dict[str, Any]) -> None:
    # Free-form keys are the components'; a named option's value (prompt_variant,
    # verdict_format ...) is the method's list, checked before any stage runs.
    for option, bad in (("prompt_variant", "x"), ("verdict_format", "xml")):
        data = copy.deepcopy(committed)
        data["judges"]["gveval-embedded"]["method_options"] = {option: bad}
        with pytest.raises(ParamsError, match=rf"judges.gveval-embedded.method_options: "
                                              rf"gveval: unknown {option} '{bad}'; choose"):
            validate_params(data)


def test_load_params_prefixes_the_file_and_fails_on_bad_yaml(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"report": {"bootstrap": 10, "sed": 1}}))
    with pytest.raises(ParamsError, match=r"params.yaml: report.sed: unknown key "
                                          r"\(did you mean 'seed'\?\)"):
        load_params(path)
    path.write_text("report: [unclosed")
    with pytest.raises(ParamsError, match="not readable YAML"):
        load_params(path)
    path.write_text("- a list")
    with pytest.raises(ParamsError, match="expected a mapping at the top level"):
        load_params(path)
    with pytest.raises(FileNotFoundError):
        load_params(tmp_path / "missing.yaml")


@pytest.mark.parametrize("stage", ["report", "aggregate", "validate"])
def test_report_stages_exit_2_on_a_typo_not_a_type_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], stage: str) -> None:
    from flows.report import main

    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data[stage]["bogus_key"] = 1
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main([stage, "--params", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{stage}.bogus_key: unknown key" in err and len(err.strip().splitlines()) == 1


def test_sample_and_ingest_flows_exit_2_before_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.ingest import main as ingest_main
    from flows.sample import main as sample_main

    data = yaml.safe_load((ROOT / "params.yaml").read_text())
    data["sample"]["out"] = str(tmp_path / "never")
    data["sample"]["seeds"] = 1
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(data))
    assert sample_main(["--params", str(path)]) == 2
    assert "sample.seeds: unknown key (did you mean 'seed'?)" in capsys.readouterr().err
    assert not (tmp_path / "never").exists()
    assert ingest_main(["--params", str(path)]) == 2
    assert "sample.seeds" in capsys.readouterr().err


def test_a_named_option_of_another_method_is_refused_naming_who_has_it() -> None:
    """``visual_input`` is G-VEval's: on VisCE² it would be ignored, so it is refused."""
    from capjudge.params import _check_choices

    _check_choices("judges.j.method_options", "gveval", {"visual_input": "frames"})
    _check_choices("judges.j.method_options", "gveval-accr", {"visual_input": "frames"})
    with pytest.raises(ParamsError, match=r"visce2 has no option 'visual_input'.*gveval"):
        _check_choices("judges.j.method_options", "visce2", {"visual_input": "frames"})
    with pytest.raises(ParamsError, match="unknown visual_input"):
        _check_choices("judges.j.method_options", "gveval", {"visual_input": "video"})
    # verdict_format is every reading method's: the likelihood judge reads no verdict.
    with pytest.raises(ParamsError, match="likelihood has no option 'verdict_format'"):
        _check_choices("judges.j.method_options", "likelihood", {"verdict_format": "paper"})
    # Free-form keys no method names stay free-form (backends and profiles read them).
    _check_choices("judges.j.method_options", "visce2", {"media": ["video"]})

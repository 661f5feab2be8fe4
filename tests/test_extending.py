"""A method and a backend defined only in this test, registered from outside the package, run
through the whole pipeline (judge -> aggregate -> validate -> report -> compare, and the CLI).

This is what docs/extending/ ("Extending capjudge") promises: nothing else in the code names them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capjudge.aggregate import AggregateConfig, run_aggregate
from capjudge.backends import BACKEND_REGISTRY, create_backend, register_backend
from capjudge.backends.base import Backend, Capabilities
from capjudge.compare import compare_series
from capjudge.item import Item
from capjudge.judge import JudgeConfig, run_judge
from capjudge.methods import (
    METHOD_REGISTRY,
    AggregateOptions,
    AggregateSetting,
    Criterion,
    CriterionSpec,
    Method,
    MethodOptions,
    Planned,
    Scale,
    Skip,
    register_method,
)
from capjudge.protocol import (
    BackendError,
    JudgeRequest,
    JudgeResponse,
    ScoreSlot,
    SlotResult,
    Usage,
)
from capjudge.report import ReportConfig, run_report
from capjudge.validate import ValidateConfig, ValidationFailed, run_validate

TEN = Scale(0, 10, pass_mark=6)


class ToyMethod(Method):
    """Two criteria on 0-10; the overall score is the weaker one."""

    name = "toy-min"
    criteria = (CriterionSpec("brevity", TEN), CriterionSpec("overlap", TEN))
    overall_scale = TEN
    combination = "the minimum of brevity and overlap"
    aggregates = ("share_passing",)
    # Its own aggregate setting: params.yaml `aggregate: {toy_cap: 4}`, no shared type edited.
    aggregate_settings = {"toy_cap": AggregateSetting(10.0, 0.0, 10.0,
                                                      doc="the highest overall score")}

    def plan(self, item: Item, mode: str, options: MethodOptions) -> list[Planned | Skip]:
        self.check_mode(mode)
        if not item.references:
            return [Skip(item.id, mode, "toy needs references", "toy@1")]
        from capjudge.protocol import Message

        text = f"{item.candidate}\n---\n" + "\n".join(item.references)
        slots = tuple(ScoreSlot(c.name, 0, 10) for c in self.criteria)
        request = JudgeRequest(messages=(Message("user", (text,)),), slots=slots,
                               decoding=options.decoding, template="toy@1", tag=item.id)
        return [Planned(item.id, mode, request)]

    def overall(self, criteria: Sequence[Criterion], options: AggregateOptions
                ) -> tuple[float | None, str | None]:
        scores = [c.score for c in criteria if c.score is not None]
        if len(scores) < 2:
            return None, "a criterion is missing"
        return min(*scores, self.setting(options, "toy_cap")), None

    def system_aggregates(self, criteria: Sequence[Sequence[Criterion]]
                          ) -> dict[str, float | None]:
        overall = [self.overall(c, {})[0] for c in criteria]
        scored = [s for s in overall if s is not None]
        return {"share_passing": (sum(s >= TEN.threshold for s in scored) / len(scored))
                if scored else None}


class ToyBackend(Backend):
    """Brevity from the candidate's length, overlap from shared words: exact, no model."""

    options = frozenset({"min_mass", "sharpness"})

    def __init__(self, name: str, min_mass: float = 0.5, sharpness: float = 1.0) -> None:
        self.backend_id = f"toy/{name}"
        self.sharpness = sharpness
        self.capabilities = Capabilities(vision=False, distribution="exact", max_batch=8)

    def snapshot(self) -> str:
        return "toy-v1"

    def generate(self, requests: Sequence[JudgeRequest]) -> list[JudgeResponse | BackendError]:
        out: list[JudgeResponse | BackendError] = []
        for request in requests:
            candidate, _, refs = request.messages[0].text().partition("\n---\n")
            words, ref_words = set(candidate.lower().split()), set(refs.lower().split())
            centres = {"brevity": max(0, 10 - len(candidate.split()) // 2),
                       "overlap": round(10 * len(words & ref_words) / max(1, len(words)))}
            slots = []
            for slot in request.slots:
                probs = [1.0 if v == centres[slot.name] else 0.0 for v in slot.values]
                slots.append(SlotResult(slot.name, slot.values, probs, 1.0, "teacher_forcing",
                                        "ok", None, centres[slot.name]))
            out.append(JudgeResponse("ok", text=json.dumps(centres), slots=slots,
                                     usage=Usage(10, 2), model="toy"))
        return out


@pytest.fixture
def registered() -> Iterator[None]:
    register_method("toy-min")(ToyMethod)
    register_backend("toy")(ToyBackend)
    yield
    METHOD_REGISTRY.remove("toy-min")
    BACKEND_REGISTRY.remove("toy")


def test_toy_method_and_backend_run_through_the_whole_pipeline(
        registered: None, ingested: Path, tmp_path: Path) -> None:
    config = JudgeConfig(method="toy-min", backend="toy/exact", cache_dir=str(tmp_path / "c"),
                         backend_options={"sharpness": 2.0})
    summary = run_judge(ingested / "items.parquet", tmp_path / "toy", config)
    assert summary["by_status"]["ok"] > 100 and summary["model_calls"] > 50
    assert summary["backend"] == {"backend": "toy/exact", "snapshot": "toy-v1"}
    dirs = [tmp_path / "toy"]
    run_aggregate(dirs, tmp_path / "agg", AggregateConfig())
    items = pq.read_table(tmp_path / "agg" / "item_scores.parquet").to_pylist()
    scored = [i for i in items if i["score"] is not None]
    assert scored and all(0 <= i["score"] <= 10 for i in scored)
    crit = pq.read_table(tmp_path / "agg" / "criteria.parquet").to_pylist()
    one = scored[0]["item_id"]
    assert scored[0]["score"] == min(c["score"] for c in crit if c["item_id"] == one)
    systems = pq.read_table(tmp_path / "agg" / "system_scores.parquet").to_pylist()
    assert all("share_passing" in s for s in systems)
    assert run_validate(ingested / "items.parquet", dirs, tmp_path / "reports",
                        ValidateConfig())["success"]
    ctx = run_report(ingested, dirs, tmp_path / "agg", tmp_path / "reports",
                     ReportConfig(bootstrap=20, registry=None))
    md = (tmp_path / "reports" / "report.md").read_text()
    assert "toy/default" in md and "share_passing" in md
    assert any(a["judge"] == "toy" and a["n"] > 100 for a in ctx["agreement"])
    # The toy's own pass mark (6 of 10) decides pass/fail flips in a comparison.
    a = {"x": {"score": 5.0, "system": "s", "human": 1.0},
         "y": {"score": 7.0, "system": "s", "human": 2.0}}
    b = {"x": {"score": 6.5, "system": "s", "human": 1.0},
         "y": {"score": 7.0, "system": "s", "human": 2.0}}
    assert compare_series(a, b, "toy-min", 10, None)["pass_fail"]["threshold"] == 6
    # Its declared scale is what validation checks.
    rows = pq.read_table(tmp_path / "toy" / "judgements.parquet").to_pylist()
    rows[0]["score"] = 11.0
    broken = tmp_path / "broken" / "toy"
    broken.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), broken / "judgements.parquet")
    with pytest.raises(ValidationFailed, match="scores-toy-min-all"):
        run_validate(ingested / "items.parquet", [broken], tmp_path / "r2", ValidateConfig())


def test_toy_backend_options_are_validated(registered: None) -> None:
    assert isinstance(create_backend("toy/x", sharpness=3.0), ToyBackend)
    with pytest.raises(BackendError, match="does not accept the option.*colour"):
        create_backend("toy/x", colour="red")


@pytest.mark.parametrize("backend_id", ["fake/hash", "openai/gpt-4o-2024-08-06"])
def test_every_backend_refuses_unknown_options(backend_id: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(BackendError, match="does not accept the option.*bogus"):
        create_backend(backend_id, bogus=1)


def test_the_cli_offers_registered_components(registered: None, ingested: Path,
                                              tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    from capjudge.cli import main

    code = main(["judge", "--method", "toy-min", "--backend", "toy/exact", "--items",
                 str(ingested / "items.parquet"), "--out", str(tmp_path / "cli"),
                 "--cache-dir", str(tmp_path / "c"), "--limit", "5"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["by_status"] == {"ok": 10}  # 5 items x 2 criteria


def test_likelihood_answers_are_cached(tmp_path: Path) -> None:
    """A likelihood answer has no text, only log-likelihoods: it is still a real answer."""
    from capjudge.cache import RequestCache

    cache = RequestCache(tmp_path)
    answer = JudgeResponse("ok", logliks=[-3.5, -7.0], lengths=[2, 3])
    assert cache.put("ab" * 32, answer)
    hit = cache.get("ab" * 32)
    assert hit is not None and hit.logliks == [-3.5, -7.0] and hit.lengths == [2, 3]
    assert not cache.put("cd" * 32, JudgeResponse("ok"))  # empty: never stored


def test_a_method_owns_its_aggregate_setting(registered: None, ingested: Path,
                                             tmp_path: Path) -> None:
    """The toy's ``toy_cap`` is a key of params.yaml's aggregate section, checked against its
    bounds and read by its ``overall()``, with no shared type or stage edited for it."""
    from capjudge.params import ParamsError, validate_params

    root = Path(__file__).resolve().parents[1]
    import yaml

    params = yaml.safe_load((root / "params.yaml").read_text())
    params["aggregate"]["toy_cap"] = 4
    validate_params(params)  # the schema takes the method's own key
    params["aggregate"]["toy_cap"] = "high"
    with pytest.raises(ParamsError, match="toy_cap"):
        validate_params(params)
    with pytest.raises(ValueError, match=r"aggregate.toy_cap must be in \[0, 10\], got 11"):
        AggregateConfig.from_section({"toy_cap": 11})
    with pytest.raises(ValueError, match="aggregate.toy_capp: no method declares"):
        AggregateConfig.from_section({"toy_capp": 4})

    config = JudgeConfig(method="toy-min", backend="toy/exact", cache_dir=str(tmp_path / "c"))
    run_judge(ingested / "items.parquet", tmp_path / "toy", config)
    summary = run_aggregate([tmp_path / "toy"], tmp_path / "agg",
                            AggregateConfig.from_section({"toy_cap": 4}))
    assert summary["settings"]["toy_cap"] == 4.0
    assert summary["settings"]["gamma"] == 0.75  # HarmonicEval's default, recorded
    scores = [i["score"] for i in pq.read_table(tmp_path / "agg" / "item_scores.parquet")
              .to_pylist() if i["score"] is not None]
    assert scores and max(scores) <= 4.0
    crit = pq.read_table(tmp_path / "agg" / "criteria.parquet").to_pylist()
    assert any(c["score"] > 4.0 for c in crit)  # the cap is the method's, not the criteria's

"""capjudge.judge.rows: the one place a judgement row is built (unit tests of the module)."""

from __future__ import annotations

import pytest

from capjudge.cost import Price
from capjudge.item import Item
from capjudge.judge.rows import JUDGEMENTS_SCHEMA, format_settings, judgement, rows_table
from capjudge.methods.base import Criterion
from capjudge.protocol import JudgeResponse, Usage

ITEM = Item(id="i1", candidate="A dog.", media_sha256="ab" * 32, system="model-a")
LINEAGE = {"template": "gveval/ref-only@3", "settings": "prompt_variant=paper",
           "backend": "openai/m", "snapshot": "m@fp1"}


def _answer(*, cached: bool = False, text: str = "Reasoning. Score: 7") -> JudgeResponse:
    return JudgeResponse(status="ok", text=text, usage=Usage(prompt_tokens=1000,
                                                             completion_tokens=50),
                         model="m-2024", latency_s=0.5, cached=cached)


def test_a_skip_is_a_row_with_its_reason_and_nothing_asked() -> None:
    skip = Criterion("overall", "skipped", reason="backend has no vision input")
    row = judgement(ITEM, "gveval", "ref-free", skip, **LINEAGE)
    assert (row.status, row.reason, row.score) == ("skipped", "backend has no vision input",
                                                   None)
    assert row.prompt_tokens is None and row.cost_usd is None and row.cached is False
    assert (row.media_sha256, row.system, row.template) == (ITEM.media_sha256, "model-a",
                                                           "gveval/ref-only@3")


def test_an_answer_carries_its_reading_usage_and_lineage() -> None:
    read = Criterion("overall", "ok", score=70.0, values=[6, 7, 8], probs=[0.2, 0.5, 0.3],
                     printed=7)
    row = judgement(ITEM, "gveval", "ref-only", read, response=_answer(), repeat=2, **LINEAGE)
    assert (row.score, row.values, row.probs, row.printed) == (70.0, [6, 7, 8],
                                                               [0.2, 0.5, 0.3], 7.0)
    assert (row.prompt_tokens, row.completion_tokens, row.model) == (1000, 50, "m-2024")
    assert row.reasoning == "Reasoning. Score: 7"  # the answer, when the method keeps none
    assert (row.repeat, row.snapshot, row.settings) == (2, "m@fp1", "prompt_variant=paper")
    assert row.cost_usd is None  # no price known: no cost, not a cost of 0


def test_a_cached_answer_costs_nothing_and_a_fresh_one_its_list_price() -> None:
    price = Price(input_per_1m=2.5, output_per_1m=10.0)
    read = Criterion("overall", "ok", score=70.0)
    fresh = judgement(ITEM, "gveval", "ref-only", read, response=_answer(), price=price,
                      **LINEAGE)
    assert fresh.cost_usd == pytest.approx((1000 * 2.5 + 50 * 10.0) / 1e6)
    again = judgement(ITEM, "gveval", "ref-only", read, response=_answer(cached=True),
                      price=price, **LINEAGE)
    assert again.cost_usd == 0.0 and again.cached is True


def test_settings_text_and_the_table_schema() -> None:
    assert format_settings([("prompt_variant", "paper"), ("score", "printed")]) == \
        "prompt_variant=paper; score=printed"
    assert format_settings([]) is None
    rows = [judgement(ITEM, "gveval", "ref-free", Criterion("overall", "skipped", reason="r"),
                      **LINEAGE),
            judgement(ITEM, "gveval", "ref-only", Criterion("overall", "ok", score=1.0),
                      response=_answer(), **LINEAGE)]
    table = rows_table(rows)
    assert table.schema == JUDGEMENTS_SCHEMA and table.num_rows == 2
    assert table.column("status").to_pylist() == ["skipped", "ok"]

"""The row records: schemas derived from the fields, tables built from and read back as records."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from capjudge.records import (
    ContextRow,
    CriterionScore,
    ItemRow,
    ItemScore,
    Judgement,
    QuarantineRow,
    RepeatScore,
    SystemScore,
    arrow_type,
)


def test_arrow_type_maps_each_field_type() -> None:
    assert arrow_type(str) == pa.string()
    assert arrow_type(int) == pa.int64()
    assert arrow_type(float) == pa.float64()
    assert arrow_type(bool) == pa.bool_()
    assert arrow_type(str | None) == pa.string()
    assert arrow_type(tuple[str, ...]) == pa.list_(pa.string())
    assert arrow_type(list[float] | None) == pa.list_(pa.float64())
    assert arrow_type(tuple[int, ...] | None) == pa.list_(pa.int64())


@pytest.mark.parametrize("tp", [dict[str, int], int | str, tuple[int, str], bytes])
def test_arrow_type_refuses_a_type_without_a_column_type(tp: object) -> None:
    with pytest.raises(TypeError, match="no Arrow column type"):
        arrow_type(tp)


def test_schemas_are_the_fields_in_order() -> None:
    assert Judgement.schema().names[:6] == ["item_id", "method", "mode", "criterion", "status",
                                            "reason"]
    assert Judgement.schema().field("values").type == pa.list_(pa.int64())
    assert Judgement.schema().field("paths_disagree").type == pa.bool_()
    assert Judgement.schema().names[-2:] == ["repeat", "server_timings"]
    # A nested dataclass is a struct column, and it comes back as the dataclass.
    assert Judgement.schema().field("server_timings").type == pa.struct([
        ("prompt_n", pa.int64()), ("prompt_ms", pa.float64()), ("predicted_n", pa.int64()),
        ("predicted_ms", pa.float64()), ("cache_n", pa.int64())])
    assert ItemScore.schema().names == [
        "judge", "method", "mode", "item_id", "system", "score", "status", "cause", "reason",
        "criteria_scored", "criteria_total", "backend", "snapshot"]
    assert RepeatScore.schema().names == [
        "judge", "method", "mode", "item_id", "system", "repeat", "score", "status", "cause"]
    assert SystemScore.schema().names == [
        "judge", "method", "mode", "system", "mean_score", "items", "scored", "failed"]
    assert QuarantineRow.schema() == pa.schema([("id", pa.string()), ("line", pa.int64()),
                                                ("reason", pa.string()), ("raw", pa.string())])
    assert ItemRow.schema().field("frame_timestamps_s").type == pa.list_(pa.float64())
    assert CriterionScore.schema().field("repeat").type == pa.int64()
    assert ContextRow.schema().field("cached").type == pa.bool_()


def test_a_table_round_trips_and_matches_building_from_rows() -> None:
    rows = [Judgement(item_id="a", method="m", mode="x", criterion="c", status="ok",
                      score=3.0, values=[1, 2, 3], probs=[0.2, 0.3, 0.5], repeat=1),
            Judgement(item_id="b", method="m", mode="x", criterion="*", status="skipped",
                      reason="no vision")]
    table = Judgement.table(rows)
    assert table.schema == Judgement.schema()
    assert table.equals(pa.Table.from_pylist([r.to_row() for r in rows],
                                             schema=Judgement.schema()))
    assert Judgement.from_table(table) == rows
    assert table.column("cached").to_pylist() == [False, False]  # the defaults
    assert table.column("score").to_pylist() == [3.0, None]


def test_from_row_fills_missing_columns_and_ignores_unknown_ones() -> None:
    old = {"item_id": "a", "method": "m", "mode": "x", "criterion": "c", "status": "ok",
           "score": 1.0, "a_column_from_elsewhere": 7}
    row = Judgement.from_row(old)  # written before ``repeat`` existed
    assert row.repeat == 0 and row.score == 1.0
    with pytest.raises(TypeError):
        Judgement.from_row({"item_id": "a"})  # no status: not a judgement


def test_empty_tables_keep_their_columns() -> None:
    assert ItemScore.table([]).schema == ItemScore.schema()
    assert CriterionScore.table([]).num_columns == len(CriterionScore.schema())
    assert SystemScore.table([]).schema == SystemScore.schema()


def test_system_scores_append_every_methods_aggregates() -> None:
    a = SystemScore(judge="j", method="m", mode="x", system="s1", mean_score=1.0, items=2,
                    scored=1, failed=1, aggregates={"precision_micro": 0.5})
    b = SystemScore(judge="k", method="n", mode="x", system="s1", items=1, scored=0, failed=1,
                    aggregates={"another": None})
    table = SystemScore.table([a, b])
    assert table.schema.names[-2:] == ["another", "precision_micro"]
    assert table.schema.field("precision_micro").type == pa.float64()
    assert table.column("precision_micro").to_pylist() == [0.5, None]
    assert table.column("another").to_pylist() == [None, None]


def test_a_struct_column_round_trips_through_parquet(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from capjudge.records import ServerTimings

    rows = [Judgement(item_id="a", method="m", mode="x", criterion="c", status="ok",
                      server_timings=ServerTimings(3, 1.5, 2, 4.0, 300)),
            Judgement(item_id="b", method="m", mode="x", criterion="c", status="ok")]
    pq.write_table(Judgement.table(rows), tmp_path / "j.parquet")
    back = Judgement.from_table(pq.read_table(tmp_path / "j.parquet"))
    assert back == rows
    assert back[0].server_timings == ServerTimings(3, 1.5, 2, 4.0, 300)
    assert back[1].server_timings is None

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from canonical import FMT, call, res, row
from click.testing import CliRunner
from synthetic import generate_rows

from transcript_clean.cli import main
from transcript_clean.errors import FormatError
from transcript_clean.formats import get_format
from transcript_clean.formats.base import Row
from transcript_clean.model import assistant, parse_messages, system, user
from transcript_clean.pipeline import batch_verdicts, clean_batch
from transcript_clean.policy import DEFAULT, STRICT, Config

OPENAI = get_format("openai")
GOOD = row(system("s"), user("hi"), assistant(call("c1")), user(res("c1")), assistant("done"))


def table(rows: list[Row]) -> pa.Table:
    return pa.Table.from_pylist(rows)


@pytest.mark.parametrize("size", [1, 10, 64])
def test_clean_batch_splits_rows_in_order(size: int) -> None:
    rows = [
        {**row(user(f"q{i}"), assistant(f"a{i}") if i % 3 else assistant("")), "id": i}
        for i in range(size)
    ]
    kept, rejects, stats = clean_batch(
        table(rows), DEFAULT, format=FMT, source="s.parquet", first_row=100
    )
    assert kept.num_rows + rejects.num_rows == size == stats.rows_in
    stats.check()
    assert kept.schema == table(rows).schema
    assert kept.column("id").to_pylist() == [i for i in range(size) if i % 3]
    assert rejects.column("id").to_pylist() == [i for i in range(size) if not i % 3]
    assert rejects.column("_source_row").to_pylist() == [100 + i for i in range(size) if not i % 3]
    assert set(rejects.column("_source").to_pylist()) <= {"s.parquet"}
    if rejects.num_rows:
        assert rejects.column("_reject_codes")[0].as_py() == [
            "empty_assistant_turn",
            "no_assistant_turn",
        ]


def test_clean_batch_keeps_unchanged_rows_value_for_value_and_repairs_others() -> None:
    good = row(user("hi"), assistant(call("c1", {"q": 1})), user(res("c1")), assistant("done"))
    # an orphan result after the last assistant turn: dropping it changes no turn (R3)
    bad = row(user("hi"), assistant("y"), user(res("r9")))
    t = table([{**good, "id": 0}, {**bad, "id": 1}])
    kept, rejects, stats = clean_batch(t, DEFAULT, format=FMT)
    assert rejects.num_rows == 0
    assert kept.slice(0, 1).to_pylist() == t.slice(0, 1).to_pylist()
    repaired = parse_messages(kept.column("messages")[1].as_py())
    assert repaired == [user("hi"), assistant("y")]
    assert stats.rows_repaired == 1
    assert stats.records()[0]["code"] == "orphan_tool_result"


def test_json_text_columns_are_decoded_and_written_back_as_text() -> None:
    import json

    bad = row(user("hi"), assistant("y"), user(res("r9")))
    t = pa.table({"messages": [json.dumps(GOOD["messages"]), json.dumps(bad["messages"]), "{oops"]})
    kept, rejects, _ = clean_batch(t, DEFAULT, format=FMT)
    assert kept.column("messages")[0].as_py() == json.dumps(GOOD["messages"])
    assert parse_messages(json.loads(kept.column("messages")[1].as_py())) == [
        user("hi"),
        assistant("y"),
    ]
    assert rejects.column("_reject_codes").to_pylist() == [["malformed_row"]]
    assert "not valid JSON" in rejects.column("_reject_message")[0].as_py()


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
@pytest.mark.parametrize("size", [1, 37, 600])
def test_verdicts_computed_ahead_give_the_same_result(config: Config, size: int) -> None:
    t = pa.Table.from_pylist([r for r, _ in generate_rows(size, format="openai", seed=size)])
    verdicts = batch_verdicts(t, config, format=OPENAI)
    assert verdicts is not None
    ahead = clean_batch(t, config, format=OPENAI, source="s", first_row=5, verdicts=verdicts)
    here = clean_batch(t, config, format=OPENAI, source="s", first_row=5)
    assert ahead.kept.equals(here.kept)
    assert ahead.rejects.equals(here.rejects)
    assert ahead.stats == here.stats
    assert ahead.kept.schema == t.schema


def test_verdicts_without_codes_leave_every_row_with_a_code_to_on_row() -> None:
    t = pa.Table.from_pylist([r for r, _ in generate_rows(300, format="openai", seed=3)])
    seen: dict[str, list[int]] = {"ahead": [], "here": []}
    for name, verdicts in [
        ("ahead", batch_verdicts(t, format=OPENAI, codes=False)),
        ("here", None),
    ]:
        result = clean_batch(
            t,
            format=OPENAI,
            verdicts=verdicts,
            on_row=lambda i, _row, result, name=name: seen[name].append(i),
        )
        assert result.stats.rows_in == 300
    assert seen["ahead"] == seen["here"]
    assert 0 < len(seen["here"]) < 300


def test_no_verdicts_for_json_text_or_formats_without_a_fast_path() -> None:
    import json

    as_text = pa.table({"messages": [json.dumps(GOOD["messages"])]})
    assert batch_verdicts(as_text, format=FMT) is None
    # rig flattens into the columnar view; a part with no type is the decoder's to reject:
    # the view leaves the row unread and rejects it in the decoder's words.
    rig = pa.table({"messages": [[{"role": "user", "content": [{"text": "x"}]}]]})
    verdicts = batch_verdicts(rig, format="rig")
    assert verdicts is not None and verdicts.view is not None and verdicts.view.unread.all()
    [reject] = verdicts.rejects
    assert reject.code == "malformed_row"
    assert reject.messages[0].startswith("messages[0].content[0]")
    with pytest.raises(FormatError, match="no column 'conversations'"):
        batch_verdicts(pa.table({"messages": [[{"role": "user"}]]}), format="sharegpt")


def test_verdicts_for_another_batch_are_refused() -> None:
    rows = [r for r, _ in generate_rows(3, format="openai", seed=1)]
    verdicts = batch_verdicts(pa.Table.from_pylist(rows), format=OPENAI)
    with pytest.raises(ValueError, match="verdicts for 3 rows given for a batch of 2"):
        clean_batch(pa.Table.from_pylist(rows[:2]), format=OPENAI, verdicts=verdicts)


def test_kept_rows_come_in_one_chunk_of_the_input_schema() -> None:
    empty = [user("q"), assistant(""), user("q"), assistant("a")]  # repaired: R1
    rows = [row(*empty) if i % 3 == 0 else row(user("q"), assistant("a")) for i in range(7)]
    t = pa.concat_tables([table(rows[:3]), table(rows[3:])])
    for fast in (True, False):
        kept, _, stats = clean_batch(t, DEFAULT, format=FMT, fast=fast)
        assert kept.schema == t.schema
        assert [c.num_chunks for c in kept.columns] == [1]
        assert kept.num_rows == 7 and stats.rows_repaired == 3


# ---------------------------------------------------------------------------------------------
# text that is not UTF-8 (issue 14, item 3)


def _not_utf8_table() -> pa.Table:
    """Rows 1 and 3 hold bytes that are not UTF-8: row 1 in its conversation (and otherwise
    clean), row 3 in another column; row 2 has a code."""
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    orphan = [*good, {"role": "tool", "tool_call_id": "x", "content": "?"}]
    orphan.append({"role": "assistant", "content": "ok"})
    table = pa.Table.from_pylist(
        [{"messages": m, "id": str(i)} for i, m in enumerate([good, good, orphan, good])]
    )
    flat = pc.list_flatten(table.column("messages").combine_chunks())
    content = flat.field("content").cast(pa.binary()).to_pylist()
    content[3] = b"bad \xff byte"  # row 1's second message
    contents = pa.array(content, pa.binary()).view(pa.string())
    messages = pa.ListArray.from_arrays(
        table.column("messages").combine_chunks().offsets,
        pa.StructArray.from_arrays([flat.field("role"), contents], names=["role", "content"]),
    )
    ids = pa.array([b"0", b"1", b"2", b"\xed\xa0\x80"], pa.binary()).view(pa.string())
    return pa.table({"messages": messages, "id": ids})


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("config", [DEFAULT, STRICT])
def test_rows_with_text_that_is_not_utf8_are_malformed_rejects(fast: bool, config: Config) -> None:
    # Before issue 14: UnicodeDecodeError out of clean_batch, and an otherwise clean such row
    # was kept as it was by the fast path.
    table = _not_utf8_table()
    seen: dict[int, Row] = {}
    result = clean_batch(
        table,
        config,
        format="openai",
        source="s",
        fast=fast,
        on_row=lambda i, row, _: seen.__setitem__(i, row),
    )
    result.kept.validate(full=True)
    result.rejects.validate(full=True)
    rejects = result.rejects.to_pylist()
    bad = [r for r in rejects if r["_reject_codes"] == ["malformed_row"]]
    assert [r["_source_row"] for r in bad] == [1, 3]
    assert bad[0]["_reject_message"].startswith("messages[1].content: not UTF-8 at byte 4;")
    assert bad[0]["messages"][1]["content"] == "bad \ufffd byte"
    assert bad[1]["_reject_message"].startswith("id: not UTF-8 at byte 0 (a lone surrogate);")
    assert seen[1]["messages"][1]["content"] == "bad \ufffd byte"
    assert result.kept.column("id").to_pylist() == ["0", "2"][: result.kept.num_rows]
    assert result.stats.rows_in == 4
    assert result.stats.rows_kept + result.stats.rows_rejected == 4


def test_the_fast_path_leaves_rows_with_bad_text_to_the_per_row_path() -> None:
    verdicts = batch_verdicts(_not_utf8_table(), DEFAULT, format="openai")
    assert verdicts is not None
    assert verdicts.clean.tolist() == [True, False, False, False]
    assert not verdicts.handled[[1, 3]].any()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_clean_and_audit_get_through_text_that_is_not_utf8(tmp_path: Path, workers: str) -> None:
    # Before issue 14 both exited 1 with a UnicodeDecodeError traceback.
    source = tmp_path / "in.parquet"
    pq.write_table(_not_utf8_table(), source)
    lines = tmp_path / "in.jsonl"
    line = (
        '{"messages": [{"role": "user", "content": "%s"}, {"role": "assistant", "content": "a"}]}'
    )
    lines.write_text("\n".join([line % "hi", line % "\\ud800", ""]), encoding="utf-8")
    runner = CliRunner()
    for path, rejected in ((source, 2), (lines, 1)):
        out = tmp_path / f"out-{path.suffix[1:]}"
        result = runner.invoke(main, ["clean", str(path), str(out), "--workers", workers, "-q"])
        assert result.exit_code == 0, result.output
        for part in sorted(out.glob("*/part-*.parquet")):
            pq.read_table(part).validate(full=True)
        rejects = pq.read_table(out / "rejects")
        assert rejects.column("_reject_codes").to_pylist().count(["malformed_row"]) == rejected
        audit = runner.invoke(main, ["audit", str(path), "--workers", workers])
        assert audit.exit_code == 0, audit.output
        assert "malformed_row" in audit.output
    # explain too read the row with Python's strict decoder, and crashed
    explained = runner.invoke(main, ["explain", str(source), "--row", "1"])
    assert explained.exit_code == 0, explained.output
    assert "malformed_row" in explained.output
    assert "messages[1].content: not UTF-8 at byte 4" in explained.output


def test_a_json_text_conversation_nested_too_deep_is_a_malformed_row(tmp_path: Path) -> None:
    # Issue 14, item 5: RecursionError out of the reader (JSON Lines) or the per-row path
    # (JSON text in Parquet), and the run exited 1.
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    turns = '[{"role": "user", "content": "hi"}, {"role": "assistant", "content": %s}]'
    table = pa.table({"messages": [turns % '"ok"', turns % deep]})
    result = clean_batch(table, DEFAULT, format="openai")
    assert result.kept.num_rows == 1
    assert result.rejects.column("_reject_message").to_pylist() == [
        "messages: nested too deep to read (Python's recursion limit)"
    ]
    lines = tmp_path / "deep.jsonl"
    lines.write_text("".join(f'{{"messages": {t}}}\n' for t in table.column(0).to_pylist()))
    runner = CliRunner()
    cleaned = runner.invoke(main, ["clean", str(lines), str(tmp_path / "out"), "-q"])
    assert cleaned.exit_code == 0, cleaned.output
    assert pq.read_table(tmp_path / "out" / "rejects").num_rows == 1
    audit = runner.invoke(main, ["audit", str(lines)])
    assert audit.exit_code == 0, audit.output
    assert "malformed_row" in audit.output


def _chats(texts: list[str]) -> pa.Table:
    return pa.table(
        {
            "id": list(range(len(texts))),
            "messages": [
                [{"role": "user", "content": "q"}, {"role": "assistant", "content": text}]
                for text in texts
            ],
        }
    )


@pytest.mark.parametrize("fast", [True, False])
def test_a_row_over_max_row_bytes_is_a_reject_saying_so(fast: bool) -> None:
    # Issue 27, finding 19: a row too large is a reject, and never made Python objects.
    table = _chats(["short", "x" * 2_000_000, "short too"])
    config = replace(DEFAULT, max_row_bytes=2**20)
    kept, rejects, stats = clean_batch(table, config, format="openai", fast=fast)
    assert kept.column("id").to_pylist() == [0, 2]
    assert rejects.column("id").to_pylist() == [1]
    assert rejects.column("_reject_codes").to_pylist() == [["malformed_row"]]
    [message] = rejects.column("_reject_message").to_pylist()
    assert message.startswith("row of 2,000,")
    assert message.endswith(" bytes, over --max-row-bytes (1,048,576): not read")
    assert (stats.rows_in, stats.rows_rejected) == (3, 1)
    # Without the limit, the same row is clean.
    kept, rejects, _ = clean_batch(table, DEFAULT, format="openai", fast=fast)
    assert kept.num_rows == 3 and rejects.num_rows == 0


def test_clean_and_audit_reject_parquet_rows_over_max_row_bytes(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(_chats(["short", "x" * 2_000_000]), source)
    out = tmp_path / "out"
    args = ["--max-row-bytes", "1MiB", "--format", "openai"]
    result = CliRunner().invoke(main, ["clean", str(source), str(out), *args])
    assert result.exit_code == 0, result.output
    assert pq.read_table(out / "data").column("id").to_pylist() == [0]
    assert pq.read_table(out / "rejects").column("id").to_pylist() == [1]
    result = CliRunner().invoke(main, ["audit", str(source), *args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert (report["rows_in"], report["rows_rejected"]) == (2, 1), report


def test_clean_batch_reads_a_flattened_batch_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settled rows' profile comes from the view that settled them (as the engines measure
    it), not from a second flattening of the batch; and it is the per-row path's profile."""
    fmt = get_format("sharegpt")
    rows = [r for r, _ in generate_rows(300, "sharegpt", seed=3, rates={})]
    table = pa.Table.from_pylist(rows)
    flatten = type(fmt).flatten
    calls: list[int] = []

    def counted(self: object, *args: object, **kwargs: object) -> object:
        calls.append(1)
        return flatten(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(type(fmt), "flatten", counted)
    fast = clean_batch(table, DEFAULT, format=fmt, source="s")
    assert fast.stats.rows_kept == 300 and not fast.stats.records()  # clean rows: no repair
    assert len(calls) == 1
    slow = clean_batch(table, DEFAULT, format=fmt, source="s", fast=False)
    assert fast.stats.profile == slow.stats.profile

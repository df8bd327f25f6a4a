"""JSON and JSON Lines sources (`transcript_clean.sources.json`)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from jsonl_bench import without_nulls
from sources_helpers import JSON_ROWS, rows, write_json

from transcript_clean.cli import main
from transcript_clean.errors import SourceError
from transcript_clean.pipeline import clean_batch
from transcript_clean.sources import (
    LINE_ERROR,
    RAW_LINE,
    Source,
    hidden_columns,
    open_source,
    rows_to_table,
)
from transcript_clean.sources.jsontypes import JSON, as_storage, has_json
from transcript_clean.utf8 import invalid_text, python_rows

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.parametrize("name", ["rows.json", "rows.jsonl", "rows.json.gz", "lines.json"])
def test_json_rows(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    if name == "rows.json":
        text = json.dumps(JSON_ROWS)
    else:  # JSON Lines, also under a .json name
        text = "\n".join(json.dumps(row) for row in JSON_ROWS) + "\n\n"
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(json.dumps(JSON_ROWS).encode()))
    else:
        path.write_text(text, encoding="utf-8")
    source = open_source(str(path))
    assert (source.kind, source.num_rows) == ("json", 2)
    lines = name in ("rows.jsonl", "lines.json")  # JSON Lines have their lines as columns
    hidden = [RAW_LINE, LINE_ERROR] if lines else []
    assert source.schema.names == ["id", "messages", "extra", *hidden]
    assert data_rows(source) == [{**JSON_ROWS[0], "extra": None}, JSON_ROWS[1]]
    assert data_rows(source, start=1, batch_size=1) == [JSON_ROWS[1]]
    if lines:
        assert [row[RAW_LINE] for row in rows(source)] == [json.dumps(r) for r in JSON_ROWS]


def test_json_single_object_is_one_row(tmp_path: Path) -> None:
    source = open_source(str(write_json(tmp_path / "one.json", JSON_ROWS[0])))
    assert data_rows(source) == [JSON_ROWS[0]]
    pretty = tmp_path / "pretty.json"  # an object over many lines is no JSON Lines
    pretty.write_text(json.dumps(JSON_ROWS[0], indent=2), encoding="utf-8")
    source = open_source(str(pretty))
    assert hidden_columns(source.schema) == []
    assert data_rows(source) == [JSON_ROWS[0]]


def test_json_values_are_typed_and_json_only_where_types_differ(tmp_path: Path) -> None:
    mixed = [
        {"messages": [{"role": "user", "content": "text"}], "n": 1, "tags": ["a"]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
        {"messages": None, "n": 2.5, "tags": ["b"]},
    ]
    source = open_source(str(write_json(tmp_path / "mixed.json", mixed)))
    assert source.schema.metadata is None  # no private metadata
    message = pa.struct([("role", pa.string()), ("content", JSON)])
    assert source.schema.field("messages").type == pa.list_(message)
    assert source.schema.field("n").type == pa.float64()
    assert source.schema.field("tags").type == pa.list_(pa.string())
    read = rows(source)
    assert read[0]["messages"] == [{"role": "user", "content": '"text"'}]
    assert read[2]["messages"] is None
    assert data_rows(source) == [{"tags": None, "n": None, **row} for row in mixed]


@pytest.mark.parametrize(
    ("values", "type_"),
    [
        ([{"a": 1}, {"b": 2}], pa.struct([("a", pa.int64()), ("b", pa.int64())])),
        ([1, 2**70], JSON),  # too big for int64
        ([{}, {}], JSON),  # Parquet cannot store a struct without fields
        ([[1], ["x"]], pa.list_(JSON)),  # as narrow as it goes: the items vary
        ([1, 2.5], pa.float64()),
    ],
)
def test_rows_to_table_types(values: list[Any], type_: pa.DataType) -> None:
    table = rows_to_table([{"v": value} for value in values])
    assert table.schema.field("v").type == type_
    assert [row["v"] for row in python_rows(table)] == [
        {"a": v.get("a"), "b": v.get("b")} if isinstance(v, dict) and v else v for v in values
    ]


def test_rows_to_table_without_rows() -> None:
    assert rows_to_table([]).num_rows == 0


def test_a_bad_json_line_is_a_row_that_says_why(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": \n[1]\n', encoding="utf-8")
    source = open_source(str(path))
    read = rows(source)
    assert [row["a"] for row in read] == [1, 2, None, None]
    assert [row[RAW_LINE] for row in read] == ['{"a": 1}', '{"a": 2}', '{"a": ', "[1]"]
    assert [row[LINE_ERROR] for row in read][:2] == [None, None]
    assert read[2][LINE_ERROR].startswith("line 2: not JSON: ")
    assert read[3][LINE_ERROR] == "line 3: not a JSON object but a list"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("broken.json", '[{"a": 1},\n  {"a": }]', r"broken\.json: line 2, column 9"),
        ("scalars.json", "[1, 2]", r"scalars\.json: row 0 is a int, expected a JSON object"),
    ],
)
def test_json_that_is_not_rows(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(SourceError, match=message):
        open_source(str(tmp_path / name))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("rows.json.gz", b"\x1f\x8bnot gzip", r"rows\.json\.gz: cannot read after byte 0"),
        ("rows.json", b'[{"a": "\xff"}]', r"rows\.json is not UTF-8"),
    ],
)
def test_json_file_that_cannot_be_read(
    tmp_path: Path, name: str, content: bytes, message: str
) -> None:
    (tmp_path / name).write_bytes(content)
    with pytest.raises(SourceError, match=message):
        open_source(str(tmp_path / name))


def test_json_glob_is_one_source(tmp_path: Path) -> None:
    write_json(tmp_path / "a.json", JSON_ROWS[:1])
    write_json(tmp_path / "b.json", [{"id": 5, "messages": [], "extra": False}])
    source = open_source(str(tmp_path / "*.json"))
    assert [(part.name, part.num_rows) for part in source.parts()] == [
        (str(tmp_path / "a.json"), 1),
        (str(tmp_path / "b.json"), 1),
    ]
    assert [row["id"] for row in rows(source, source.parts()[1])] == [5]


def test_json_fingerprint(tmp_path: Path) -> None:
    path = write_json(tmp_path / "rows.json", JSON_ROWS)
    fingerprint = open_source(str(path)).fingerprint()
    assert open_source(str(path)).fingerprint() == fingerprint
    write_json(path, JSON_ROWS[::-1])
    assert open_source(str(path)).fingerprint() != fingerprint


def data_rows(source: Source, **kw: Any) -> list[dict[str, Any]]:
    """Every row, as the pipeline reads it: `json_` values decoded, no hidden columns."""
    batches = [b for part in source.parts() for b in source.read(part, **kw)]
    table = pa.Table.from_batches(batches, source.schema)
    return python_rows(table.drop_columns(hidden_columns(source.schema)))


SHARED_FILES = {
    "sharegpt/glaive_toolcall_en_demo.json": 300,
    "sharegpt/fastchat_dummy_conversation.json": 500,
    "sharegpt/axolotl_conversation_missingturns.json": 1,
    "openai/toy_chat_fine_tuning.jsonl": 5,
    "openai/functionary_test_case.json": 1,
}


@pytest.mark.parametrize("name", sorted(SHARED_FILES))
def test_shared_data_loads_and_round_trips(name: str) -> None:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    text = path.read_text(encoding="utf-8")
    if name.endswith(".jsonl"):
        original = [json.loads(line) for line in text.splitlines() if line.strip()]
    else:
        value = json.loads(text)
        original = value if isinstance(value, list) else [value]
    source = open_source(str(path))
    assert source.num_rows == SHARED_FILES[name]
    read = rows(source, batch_size=64)
    assert without_nulls(data_rows(source, batch_size=64)) == without_nulls(original)
    if name.endswith(".jsonl"):  # each line as it is: its exact keys
        assert [json.loads(row[RAW_LINE]) for row in read] == original


def test_functionary_is_typed_with_json_only_where_values_differ() -> None:
    path = DATA / "openai/functionary_test_case.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    # Its messages have different keys (tool_calls, name, metainfo): struct fields, null
    # where missing; its tools' JSON schemas are JSON.
    schema = open_source(str(path)).schema
    message = schema.field("messages").type.value_type
    assert {"role", "content", "tool_calls", "name"} <= set(message.names)
    assert message.field("content").type == pa.string()
    tool = schema.field("tools").type.value_type
    assert tool.field("function").type.field("parameters").type == JSON


def test_a_lone_surrogate_keeps_the_column_typed_and_its_row_not_utf8(tmp_path: Path) -> None:
    # Issue 14: pa.array raised UnicodeEncodeError on "\ud800", and the run died.
    path = tmp_path / "rows.jsonl"
    good = '{"messages": [{"role": "user", "content": "hi"}], "id": "a"}'
    bad = '{"messages": [{"role": "user", "content": "hi \\ud800"}], "id": "b"}'
    path.write_text(f"{good}\n{bad}\n", encoding="utf-8")
    table = rows_to_table([json.loads(good), json.loads(bad)])
    assert pa.types.is_list(table.schema.field("messages").type)  # not JSON text
    assert table.column("id").to_pylist() == ["a", "b"]
    assert invalid_text(table) == {1: "messages[0].content: not UTF-8 at byte 3 (a lone surrogate)"}
    source = open_source(str(path))
    assert invalid_text(pa.Table.from_batches(list(source.read(source.parts()[0])))) == {
        1: "messages[0].content: not UTF-8 at byte 3 (a lone surrogate)"
    }


def test_a_lone_surrogate_in_a_json_text_column_is_not_utf8_either() -> None:
    # A content that is a string here and a list there: the column is JSON text.
    table = rows_to_table([{"c": "x"}, {"c": ["\ud800"]}])
    assert table.schema.field("c").type == JSON
    assert invalid_text(table) == {1: "c: not UTF-8 at byte 2 (a lone surrogate)"}


def _deep(depth: int, list_: bool = False) -> str:
    return ("[" * depth + "1" + "]" * depth) if list_ else ('{"a":' * depth + "1" + "}" * depth)


@pytest.mark.parametrize("list_", [False, True])
@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json"])
def test_a_row_nested_too_deep_for_the_parser_is_a_malformed_row(
    tmp_path: Path, name: str, list_: bool
) -> None:
    # Issue 14, item 5: RecursionError out of the reader, and the whole file failed. A JSON
    # file keeps the value as JSON text, a JSON Lines file the line; either way the cleaner
    # rejects the row as malformed_row.
    turns = '{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}'
    good = '{"messages": [' + turns + '], "n": 1}'
    deep = '{"messages": [{"role": "user", "content": DEEP}], "n": 2}'
    deep = deep.replace("DEEP", _deep(5000, list_))
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text(f"{good}\n{deep}\n", encoding="utf-8")
    else:
        path.write_text(f"[{good}, {deep}]", encoding="utf-8")
    source = open_source(str(path))
    table = pa.Table.from_batches(list(source.read(source.parts()[0])))
    if name.endswith(".jsonl"):
        assert table.column("n").to_pylist() == [1, None]
        assert table.column(RAW_LINE).to_pylist()[1] == deep
        assert table.column(LINE_ERROR).to_pylist()[1] == (
            "line 1: not JSON: nested too deep to parse"
        )
        message = "line 1: not JSON: nested too deep to parse"
    else:
        assert table.column("n").to_pylist() == [1, 2]
        assert table.schema.field("messages").type == JSON
        text = table.column("messages").to_pylist()[1]
        assert text.startswith('[{"role": "user", "content": ') and len(text) > 10000
        message = "messages: nested too deep to parse"
    kept, rejects, _ = clean_batch(table, format="openai")
    assert kept.column("n").to_pylist() == [1]
    assert rejects.column("_reject_codes").to_pylist() == [["malformed_row"]]
    assert rejects.column("_reject_message").to_pylist() == [message]


def test_values_too_deep_for_parquet_are_json_text(tmp_path: Path) -> None:
    # A Parquet reader refuses a schema nested over 100 deep: written typed, the output of a
    # JSON source with such a value could not be read back.
    table = rows_to_table([{"v": json.loads(_deep(20)), "w": json.loads(_deep(900))}])
    assert has_json(table.schema.field("w").type)  # typed down to where it is too deep
    assert pa.types.is_struct(table.schema.field("w").type)
    assert not has_json(table.schema.field("v").type)
    pq.write_table(table, tmp_path / "t.parquet")
    assert pq.read_table(tmp_path / "t.parquet").equals(table)


def test_bad_json_around_a_deep_value_is_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"messages": ' + _deep(5000) + ", }\n", encoding="utf-8")
    [row] = rows(open_source(str(path)))
    assert row[LINE_ERROR].startswith("line 0: not JSON: ")


# ---------------------------------------------------------------------------------------------
# files known by their content (issue 15, item 2)


def test_files_without_a_known_name_are_read_by_their_content(tmp_path: Path) -> None:
    rows = [{"messages": [{"role": "user", "content": "hi"}], "id": i} for i in range(3)]
    lines = tmp_path / "run.log"
    lines.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    array = tmp_path / "export"  # no extension at all
    array.write_text(json.dumps(rows), encoding="utf-8")
    parquet = tmp_path / "table.data"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    for path in (lines, array, parquet):
        source = open_source(str(path))
        assert source.num_rows == 3, path
        table = pa.Table.from_batches(list(source.read(source.parts()[0])))
        assert table.column("id").to_pylist() == [0, 1, 2]
    garbage = tmp_path / "notes.txt"
    garbage.write_text("not a table", encoding="utf-8")
    with pytest.raises(SourceError, match=r"notes.txt: neither Parquet .* nor JSON"):
        open_source(str(garbage))


def test_a_file_that_is_a_list_of_messages_is_one_conversation(tmp_path: Path) -> None:
    # mini-swe-agent and other harnesses save a trajectory so: no conversation column.
    messages = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "Done."},
    ]
    path = tmp_path / "run.traj"
    path.write_text(json.dumps(messages), encoding="utf-8")
    source = open_source(str(path))
    assert source.num_rows == 1
    assert source.note is not None and "run.traj: a list of messages" in source.note
    [row] = pa.Table.from_batches(list(source.read(source.parts()[0]))).to_pylist()
    assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["clean", str(path), str(out)])
    assert result.exit_code == 0, result.output
    assert "read as one conversation in column 'messages'" in result.output
    assert pq.read_table(out / "data").num_rows == 1
    # rows that hold conversations are rows, even when they also carry a role
    rows = [{"role": "agent", "messages": messages}]
    path.write_text(json.dumps(rows), encoding="utf-8")
    assert open_source(str(path)).note is None


def test_as_storage_views_json_fields_as_their_text_without_a_copy() -> None:
    """What compute kernels are given (issue 27): Arrow 26 cannot flatten a list of
    `pa.json_()` structs that is null in every row, and can once the same buffers are seen as
    text."""
    import pyarrow.compute as pc

    text = pa.list_(pa.field("element", pa.struct([("schema", pa.string())])))
    typed = pa.list_(pa.field("element", pa.struct([("schema", JSON)])))
    nulls = pa.array([None, None], text).cast(typed)
    assert pc.list_flatten(as_storage(nulls)).type == text.value_type
    some = pa.array([None, [{"schema": '{"a": [1]}'}]], text).cast(typed).slice(1)
    seen = as_storage(some)
    assert seen.type == text and seen.to_pylist() == [[{"schema": '{"a": [1]}'}]]
    assert seen.buffers()[1].address == some.buffers()[1].address  # the same offsets
    chunked = as_storage(pa.chunked_array([nulls, some]))
    assert chunked.type == text and chunked.num_chunks == 2
    plain = pa.array([1, 2])
    assert as_storage(plain) is plain

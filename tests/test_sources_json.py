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
from sources_helpers import JSON_ROWS, rows, write_json

from transcript_clean.cli import main
from transcript_clean.errors import SourceError
from transcript_clean.sources import (
    JSON_COLUMNS_KEY,
    Source,
    json_columns,
    open_source,
    rows_to_table,
)
from transcript_clean.utf8 import invalid_text

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
    assert (source.kind, source.num_rows, json_columns(source.schema)) == ("json", 2, [])
    assert source.schema.names == ["id", "messages", "extra"]
    assert rows(source) == [{**JSON_ROWS[0], "extra": None}, JSON_ROWS[1]]
    assert rows(source, start=1, batch_size=1) == [JSON_ROWS[1]]


def test_json_single_object_is_one_row(tmp_path: Path) -> None:
    source = open_source(str(write_json(tmp_path / "one.json", JSON_ROWS[0])))
    assert rows(source) == [JSON_ROWS[0]]


def test_json_columns_arrow_cannot_hold_become_json_text(tmp_path: Path) -> None:
    mixed = [
        {"messages": [{"role": "user", "content": "text"}], "n": 1, "tags": ["a"]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "parts"}]}]},
        {"messages": None, "n": 2.5, "tags": ["b"]},
    ]
    source = open_source(str(write_json(tmp_path / "mixed.json", mixed)))
    assert json_columns(source.schema) == ["messages", "n"]
    assert source.schema.metadata == {JSON_COLUMNS_KEY: b"messages,n"}
    assert source.schema.field("messages").type == pa.string()
    assert source.schema.field("tags").type == pa.list_(pa.string())
    read = rows(source)
    assert read[0]["messages"] == '[{"role": "user", "content": "text"}]'
    assert read[2]["messages"] is None  # null stays null, not "null"
    assert decode(source, read) == [{"tags": None, "n": None, **row} for row in mixed]


@pytest.mark.parametrize(
    "values",
    [
        [{"a": 1}, {"b": 2}],  # Arrow would add missing keys as nulls
        [1, 2**70],  # too big for int64
        [{}, {}],  # Parquet cannot store a struct without fields
        [[1], ["x"]],
    ],
)
def test_rows_to_table_falls_back_when_arrow_is_not_exact(values: list[Any]) -> None:
    table = rows_to_table([{"v": value} for value in values])
    assert json_columns(table.schema) == ["v"]
    assert [json.loads(text) for text in table.column("v").to_pylist()] == values


def test_rows_to_table_without_rows() -> None:
    assert rows_to_table([]).num_rows == 0


def test_bad_json_line_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": \n', encoding="utf-8")
    with pytest.raises(SourceError, match=r"bad\.jsonl: line 3: invalid JSON"):
        open_source(str(path))


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("broken.json", '[{"a": 1},\n  {"a": }]', r"broken\.json: line 2, column 9"),
        ("scalars.json", "[1, 2]", r"scalars\.json: row 0 is a int, expected a JSON object"),
        ("lists.jsonl", "[1]\n", r"lists\.jsonl: line 1 is a list"),
    ],
)
def test_json_that_is_not_rows(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(SourceError, match=message):
        open_source(str(tmp_path / name))


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("rows.json.gz", b"not gzip", r"cannot read .*rows\.json\.gz"),
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


def decode(source: Source, read: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with their JSON-text columns decoded, as the pipeline reads them."""
    as_json = json_columns(source.schema)
    return [
        {k: json.loads(v) if k in as_json and v is not None else v for k, v in row.items()}
        for row in read
    ]


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
    assert decode(source, rows(source, batch_size=64)) == original


def test_functionary_falls_back_to_json_text() -> None:
    path = DATA / "openai/functionary_test_case.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    # Its messages have different keys (tool_calls, name, metainfo): Arrow would add nulls.
    assert json_columns(open_source(str(path)).schema) == ["tools", "messages"]


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
    assert json_columns(table.schema) == ["c"]
    assert invalid_text(table) == {1: "c: not UTF-8 at byte 2 (a lone surrogate)"}


def _deep(depth: int, list_: bool = False) -> str:
    return ("[" * depth + "1" + "]" * depth) if list_ else ('{"a":' * depth + "1" + "}" * depth)


@pytest.mark.parametrize("list_", [False, True])
@pytest.mark.parametrize("name", ["rows.jsonl", "rows.json"])
def test_a_row_nested_too_deep_for_the_parser_keeps_its_value_as_text(
    tmp_path: Path, name: str, list_: bool
) -> None:
    # Issue 14, item 5: RecursionError out of the reader, and the whole file failed.
    good = '{"messages": [{"role": "user", "content": "hi"}], "n": 1}'
    deep = '{"messages": [{"role": "user", "content": DEEP}], "n": 2}'
    deep = deep.replace("DEEP", _deep(5000, list_))
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text(f"{good}\n{deep}\n", encoding="utf-8")
    else:
        path.write_text(f"[{good}, {deep}]", encoding="utf-8")
    source = open_source(str(path))
    table = pa.Table.from_batches(list(source.read(source.parts()[0])))
    assert json_columns(table.schema) == ["messages"]
    assert table.column("n").to_pylist() == [1, 2]
    texts = table.column("messages").to_pylist()
    assert json.loads(texts[0]) == [{"role": "user", "content": "hi"}]
    assert texts[1].startswith('[{"role": "user", "content": ') and len(texts[1]) > 10000


def test_values_too_deep_for_parquet_are_json_text(tmp_path: Path) -> None:
    # A Parquet reader refuses a schema nested over 100 deep: written typed, the output of a
    # JSON source with such a value could not be read back.
    table = rows_to_table([{"v": json.loads(_deep(20)), "w": json.loads(_deep(900))}])
    assert json_columns(table.schema) == ["w"]
    pq.write_table(table, tmp_path / "t.parquet")
    assert pq.read_table(tmp_path / "t.parquet").equals(table)


def test_bad_json_around_a_deep_value_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"messages": ' + _deep(5000) + ", }\n", encoding="utf-8")
    with pytest.raises(SourceError, match="line 1: invalid JSON"):
        open_source(str(path))


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

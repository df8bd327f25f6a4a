"""The options objects `clean`, `audit` and the command line share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transcript_clean.errors import FormatError, SourceError
from transcript_clean.options import EngineOptions, SourceOptions, resolve_format, split_options


def test_keywords_go_to_the_object_that_has_the_field() -> None:
    read, run = split_options(
        "raw/", "ray", {"format": "sharegpt", "limit": 7, "batch_size": 5, "ray_address": "auto"}
    )
    assert read == SourceOptions("raw/", format="sharegpt", limit=7, batch_size=5)
    assert run == EngineOptions("ray", ray_address="auto")


def test_keywords_replace_the_fields_of_objects_given() -> None:
    given = SourceOptions("raw/", column="chat", limit=3)
    read, run = split_options(given, EngineOptions(workers=4), {"limit": 9})
    assert read == SourceOptions("raw/", column="chat", limit=9)
    assert run == EngineOptions("local", workers=4)
    assert given.limit == 3  # frozen: a new object, the one given is left as it was


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'workerz'"):
        split_options("raw/", "local", {"workerz": 2})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"engine": "spark"}, "engine must be 'local' or 'ray'"), ({"workers": 0}, "at least 1")],
)
def test_engine_options_refuse_what_no_engine_runs(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EngineOptions(**kwargs)  # type: ignore[arg-type]


def test_source_options_open_resolve_and_count(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    rows = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows * 5), encoding="utf-8")

    source, fmt = SourceOptions(path, limit=3).resolve()
    assert (source.name, fmt.name, fmt.column) == (str(path), "sharegpt", "conversations")
    assert SourceOptions(path, limit=3).rows_total(source) == 3
    assert SourceOptions(path).rows_total(source) == 5
    assert SourceOptions(source).open() is source  # an open source is used as it is
    assert resolve_format(source, "sharegpt").name == "sharegpt"


def test_a_file_no_format_reads_is_named_and_not_told_to_name_a_format(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1, "b": "x"}\n' * 3, encoding="utf-8")
    with pytest.raises(FormatError) as err:
        SourceOptions(path).resolve()
    message = str(err.value)
    assert message.splitlines()[0].startswith(f"{path}: cannot tell the conversation format")
    assert "columns: a, b\n" in message  # the source's own columns, not the hidden ones
    assert "_raw_line" not in message
    assert "No column holds a list of messages (JSON objects), so no format" in message
    assert "Name the format" not in message


def test_an_empty_json_lines_file_has_no_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    for fmt in ("auto", "sharegpt"):
        with pytest.raises(SourceError) as err:
            SourceOptions(path, format=fmt).resolve()
        assert str(err.value) == f"{path}: no rows: nothing to clean"


def test_a_named_format_that_does_not_fit_suggests_the_one_that_does(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with pytest.raises(SourceError) as err:
        SourceOptions(path, format="sharegpt").resolve()
    message = str(err.value)
    assert message.startswith(f"{path}: no column 'conversations' for format sharegpt")
    assert "the columns are messages;" in message
    assert "_raw_line" not in message and "_line_error" not in message
    assert "it reads as openai (column 'messages'): use format='openai'" in message
    assert "column=" not in message


def test_a_dataset_type_without_its_columns_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n', encoding="utf-8")
    with pytest.raises(FormatError) as err:
        SourceOptions(path, dataset_type="preference").resolve()
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    assert "the columns are messages (" in message  # not the reader's _raw_line, _line_error


def test_source_errors_name_the_keywords_a_python_caller_passes(tmp_path: Path) -> None:
    """From Python, `tools_column`, `prompt_column`, `candidates` and `dataset_type`, the
    fields of `SourceOptions`, not the CLI's flags."""
    path = tmp_path / "in.jsonl"
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(SourceError, match="no column 'nope' for tools_column;"):
        SourceOptions(str(path), tools_column="nope").resolve()
    with pytest.raises(SourceError, match=r"^prompt_column and candidates go with dataset_type$"):
        SourceOptions(str(path), prompt_column="prompt").resolve()


def test_a_named_format_that_misreads_most_rows_hints_at_the_one_that_reads(
    tmp_path: Path,
) -> None:
    """From Python the hint names the keyword: `format='openai'`."""
    from transcript_clean.formats import get_format
    from transcript_clean.options import format_hint

    path = tmp_path / "t.jsonl"
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text(json.dumps({"messages": messages}) + "\n", encoding="utf-8")
    src, fmt = SourceOptions(path, format="anthropic").resolve()
    assert format_hint(src, fmt) == (
        "1 of the first 1 rows do not read as anthropic; they read as openai "
        "(column 'messages'): pass format='openai'"
    )
    assert format_hint(src, get_format("openai")) is None


def test_a_source_is_sampled_once_for_its_format_and_the_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Detection's first rows are read once per source, however many questions they answer
    (a dataset type, a named format's hint): each read decodes a row group's first pages."""
    from transcript_clean.options import format_hint
    from transcript_clean.sources.json import JsonSource

    path = tmp_path / "t.jsonl"
    rows = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows * 5), encoding="utf-8")
    reads = []
    read = JsonSource.read
    monkeypatch.setattr(
        JsonSource, "read", lambda self, *a, **k: reads.append(a) or read(self, *a, **k)
    )

    src, fmt = SourceOptions(path, format="sharegpt").resolve()
    assert format_hint(src, fmt) is None
    assert len(reads) == 1
    SourceOptions(path, format="sharegpt").resolve()  # another source reads its own
    assert len(reads) == 2

"""The options objects `clean`, `audit` and the command line share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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

"""JSON and JSON Lines files (each maybe gzip- or zstd-compressed), typed as Arrow data.

JSON Lines (`.jsonl`, `.ndjson`, or a file whose first line is a JSON object) are streamed in
blocks (`jsonl`); a file holding one JSON value (a list of rows, or one row) is read whole, up
to `WHOLE_FILE_LIMIT`. Values are typed as `jsontypes` says: `list<struct<...>>` conversations,
`pa.json_()` only where values differ in type.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa

from transcript_clean.errors import SourceError
from transcript_clean.sources import jsontypes
from transcript_clean.sources.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_ROW_BYTES,
    FileSource,
    Part,
    digest,
    hidden_renames,
    label,
    row_range,
    table_batches,
)
from transcript_clean.sources.jsonl import (
    HIDDEN_FIELDS,
    LinesIndex,
    compression_of,
    index_lines,
    is_json_lines,
    read_lines,
)
from transcript_clean.sources.jsontypes import TooDeep as _TooDeep

WHOLE_FILE_LIMIT: Final = 2**30
"""Bytes of a JSON file (not JSON Lines) read whole at most: past it, the error says to convert
the file to JSON Lines, which is streamed (docs/formats.md)."""


class JsonSource(FileSource):
    """JSON files, one part each: JSON Lines (streamed), or a list of row objects or one row
    object (read whole). When any file is JSON Lines, the schema ends with the hidden columns
    `_raw_line` and `_line_error` (`sources.base`); rows of the other files have them null."""

    kind = "json"

    def __init__(
        self,
        name: str,
        files: Sequence[Path],
        root: Path,
        max_row_bytes: int | None = DEFAULT_MAX_ROW_BYTES,
    ) -> None:
        """`max_row_bytes`: a JSON Lines line longer than it is a reject, never read whole."""
        whole: list[dict[str, Any]] = []
        self._parts: list[Part] = []
        digests = []
        schemas = []
        conversations = []
        trajectories = []
        for file in files:
            if is_json_lines(file):
                index = index_lines(file, max_row_bytes)
                self._parts.append(Part(str(file), index.num_rows, index))
                schemas.append(index.schema)
                digests.append((label(file, root), index.digest))
                continue
            data = _read_whole(file)
            file_rows = _json_rows(file, data)
            if _is_one_conversation(file_rows):
                file_rows = [{CONVERSATION_COLUMN: file_rows}]
                conversations.append(file)
            elif _is_one_trajectory(file_rows):
                file_rows = [{TRAJECTORY_COLUMN: file_rows}]
                trajectories.append(file)
            self._parts.append(Part(str(file), len(file_rows), len(whole)))
            schemas.append(rows_schema(file_rows))
            whole.extend(file_rows)
            digests.append((label(file, root), hashlib.sha256(data).hexdigest()))
        self._root = root
        schema = jsontypes.unify_schemas(schemas)
        self._table = jsontypes.to_table(whole, schema)
        self._renames: dict[str, str] = {}
        if any(isinstance(part.key, LinesIndex) for part in self._parts):
            # The rows' own `_raw_line` (the tool's rejects) would meet the reader's: renamed.
            self._renames = hidden_renames(schema.names)
            if self._renames:
                names = [self._renames.get(name, name) for name in schema.names]
                schema = pa.schema(
                    [f.with_name(n) for f, n in zip(schema, names, strict=True)], schema.metadata
                )
                self._table = self._table.rename_columns(names)
            for f in HIDDEN_FIELDS:
                schema = schema.append(f)
                self._table = self._table.append_column(f, pa.nulls(len(whole), pa.string()))
        self._fingerprint = digest("json", digests)
        super().__init__(name, schema)
        notes = []
        if conversations:
            what = "a list of messages" if len(conversations) == 1 else "lists of messages"
            notes.append(
                f"{', '.join(f.name for f in conversations)}: {what}, read as one conversation "
                f"in column {CONVERSATION_COLUMN!r}"
            )
        if trajectories:
            what = "a list" if len(trajectories) == 1 else "lists"
            notes.append(
                f"{', '.join(f.name for f in trajectories)}: {what} of OpenHands events, read "
                f"as one trajectory in column {TRAJECTORY_COLUMN!r}"
            )
        if notes:
            self.note = "; ".join(notes)

    def read(
        self,
        part: Part,
        start: int = 0,
        stop: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        batch_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[pa.RecordBatch]:
        start, stop = row_range(part, start, stop, batch_size, batch_bytes)
        if start >= stop:
            return
        if isinstance(part.key, LinesIndex):
            for table in read_lines(part.key, self.schema, start, stop, self._renames):
                # Arrow's reader gives a chunk per MiB it parsed (a thousand rows or so): one
                # chunk, so that batches have `batch_size` rows (a batch costs the cleaner a
                # fixed overhead too).
                table = table.combine_chunks()
                yield from table_batches(table, self.schema, batch_size, batch_bytes)
        else:
            rows = self._table.slice(part.key + start, stop - start)
            yield from table_batches(rows, self.schema, batch_size, batch_bytes)

    def fingerprint(self) -> str:
        """From each file's name and the bytes that were read."""
        return self._fingerprint


CONVERSATION_COLUMN = "messages"
"""The column a file holding one conversation (a list of messages) is read into."""


def _is_one_conversation(rows: list[dict[str, Any]]) -> bool:
    """Whether a file's rows are the messages of one conversation, as agent harnesses save a
    trajectory: every row has a `role` and none holds a conversation of its own."""
    return bool(rows) and all(
        "role" in row
        and not any(
            isinstance(v, list) and v and isinstance(v[0], dict) and "role" in v[0]
            for v in row.values()
        )
        for row in rows
    )


TRAJECTORY_COLUMN = "history"
"""The column a file holding one OpenHands trajectory (a list of events) is read into: the
name OpenHands' resolver gives a trajectory in its `output.jsonl`."""


def _is_one_trajectory(rows: list[dict[str, Any]]) -> bool:
    """Whether a file's rows are the events of one OpenHands trajectory (as its
    `save_trajectory` writes them): each has a `source` and an `action` or an `observation`."""
    return bool(rows) and all(
        "source" in row and (row.get("action") or row.get("observation")) for row in rows
    )


def _read_whole(file: Path) -> bytes:
    """The (decompressed) bytes of a JSON file read whole, up to `WHOLE_FILE_LIMIT`."""
    try:
        with pa.input_stream(str(file), compression=compression_of(file)) as stream:
            data = stream.read(WHOLE_FILE_LIMIT + 1)
    except (OSError, pa.ArrowException) as exc:
        raise SourceError(f"cannot read {file}: {exc}") from exc
    if len(data) > WHOLE_FILE_LIMIT:
        raise SourceError(
            f"{file}: a JSON file (one list of rows) over {WHOLE_FILE_LIMIT // 2**20} MB is not "
            "read: it would be read whole; convert it to JSON Lines (one row object a line), "
            "which is streamed (docs/formats.md)"
        )
    return bytes(data)


def _json_rows(file: Path, data: bytes) -> list[dict[str, Any]]:
    """The row objects of a JSON file holding one value (a list of rows, or one row)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{file} is not UTF-8 text: {exc}") from exc
    try:
        try:
            value = json.loads(text)
        except RecursionError:
            value = _shallow_rows(text)  # a row nested too deep: see `TooDeep`
    except json.JSONDecodeError as exc:
        raise SourceError(
            f"{file}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}"
        ) from exc
    rows: list[Any] = value if isinstance(value, list) else [value]
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            kind = type(row).__name__
            raise SourceError(f"{file}: row {index} is a {kind}, expected a JSON object")
    return rows


def rows_schema(rows: Sequence[Mapping[str, Any]]) -> pa.Schema:
    """The schema `rows` fit (`jsontypes`), columns in order of first appearance."""
    return jsontypes.schema_of(jsontypes.type_of(dict(row)) for row in rows)


def rows_to_table(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """An Arrow table of `rows` (columns in order of first appearance, missing keys null),
    typed as `jsontypes` says."""
    return jsontypes.to_table([dict(row) for row in rows], rows_schema(rows))


# ---------------------------------------------------------------------------------------------
# rows nested deeper than the parser goes


def _row(text: str) -> Any:
    """`json.loads(text)`; a row object too deep for it has its too-deep values kept as text."""
    try:
        return json.loads(text)
    except RecursionError:
        return _shallow_object(text)


_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def _shallow_object(text: str) -> dict[str, Any]:
    """The members of the JSON object `text`, each parsed, or `_TooDeep` where too deep."""
    out: dict[str, Any] = {}
    at = _skip(text, 0)
    if text[at : at + 1] != "{":
        raise json.JSONDecodeError("Expecting '{'", text, at)
    at = _skip(text, at + 1)
    while text[at : at + 1] != "}" or out:
        key, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at : at + 1] != ":" or not isinstance(key, str):
            raise json.JSONDecodeError("Expecting ':' after a key", text, at)
        at = _skip(text, at + 1)
        try:
            out[key], at = _DECODER.raw_decode(text, at)
        except RecursionError:
            end = _value_end(text, at)
            out[key], at = _TooDeep(text[at:end]), end
        at, more = _after_item(text, at, "}")
        if not more:
            break
    if text[_skip(text, at + 1) :]:
        raise json.JSONDecodeError("Extra data", text, at + 1)
    return out


def _shallow_rows(text: str) -> list[Any]:
    """The values of the JSON list `text` (or the one value it is), each read by `_row`."""
    at = _skip(text, 0)
    if text[at : at + 1] != "[":
        return [_row(text)]
    rows: list[Any] = []
    at = _skip(text, at + 1)
    while text[at : at + 1] != "]" or rows:
        end = _value_end(text, at)
        rows.append(_row(text[at:end]))
        at, more = _after_item(text, end, "]")
        if not more:
            break
    return rows


def _after_item(text: str, at: int, close: str) -> tuple[int, bool]:
    """Past the `,` after an item of a list or object (and True: another item follows), or at
    its `close` (and False)."""
    at = _skip(text, at)
    if text[at : at + 1] == close:
        return at, False
    if text[at : at + 1] != ",":
        raise json.JSONDecodeError(f"Expecting ',' or '{close}'", text, at)
    return _skip(text, at + 1), True


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _value_end(text: str, at: int) -> int:
    """Where the JSON value starting at `at` ends, found without recursion: brackets counted
    outside strings. (Whether it is valid JSON is for the cleaner's parse to say.)"""
    depth = 0
    index = at
    while index < len(text):
        char = text[index]
        if char == '"':
            index += 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return index + 1
        elif depth == 0 and char in ",:" + _SPACE:
            return index
        index += 1
    if depth:
        raise json.JSONDecodeError("Unterminated value", text, at)
    return index

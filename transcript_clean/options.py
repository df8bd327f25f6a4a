"""The options `clean`, `audit` and the command line share: how to read a source, how to run.

One frozen object per concern, so the three places pass one value instead of repeating a dozen
arguments each: `SourceOptions` (what to read and how: the source, its split / subset /
revision, format, column, batch size in rows and bytes, limit) and `EngineOptions` (where the
blocks run: the local engine's workers or Ray).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import weakref
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from transcript_clean.errors import FormatError, SourceError, option, option_name
from transcript_clean.formats.base import Format
from transcript_clean.sources import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_ROW_BYTES,
    Source,
    hidden_columns,
    json_columns,
    open_source,
)

__all__ = ["EngineOptions", "SourceOptions", "resolve_format", "split_options"]

Engine = Literal["local", "ray"]

log = logging.getLogger("transcript_clean")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    """What to read and how: `spec` names the source (a path, glob, URI or Hub id, or an open
    `Source`); the rest is as for `open_source` and `resolve_format`."""

    spec: str | os.PathLike[str] | Source
    format: str | Format = "auto"
    column: str | None = None
    split: str | None = None
    subset: str | None = None
    revision: str | None = None
    streaming: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE
    limit: int | None = None
    """Read only the first `limit` rows (all by default)."""
    batch_bytes: int = DEFAULT_BATCH_BYTES
    """A batch holds at most this many bytes of rows (or one row), as well as `batch_size` rows.
    The files written do not depend on it."""
    storage_options: Mapping[str, Any] = field(default_factory=dict)
    """Options of the filesystem of a URI SOURCE and OUTPUT (`--storage-option KEY=VALUE`): an
    endpoint URL, a region, anonymous access. Credentials come from the environment."""
    tools_column: str | None = None
    """The column holding each row's declared tools, when not the format's own (`tools`)."""
    dataset_type: str = "auto"
    """`conversation` (one column), a type of `shapes.KINDS`, or `auto` (from the columns)."""
    prompt_column: str | None = None
    candidates: tuple[str, ...] | None = None
    """With `dataset_type`: the prompt's column (or path) and the candidates', if not the
    type's usual ones."""
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES
    """A JSON Lines line longer than this is a `malformed_row` reject, skipped as it is read:
    never held whole (`--max-row-bytes`)."""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if self.batch_bytes < 1:
            raise ValueError("batch_bytes must be at least 1")
        if self.max_row_bytes < 1:
            raise ValueError("max_row_bytes must be at least 1")

    def open(self) -> Source:
        """The source `spec` names (itself when it is one already)."""
        if isinstance(self.spec, Source):
            return self.spec
        return open_source(
            os.fspath(self.spec),
            split=self.split,
            subset=self.subset,
            revision=self.revision,
            streaming=self.streaming,
            storage_options=self.storage_options,
            max_row_bytes=self.max_row_bytes,
        )

    def resolve(self) -> tuple[Source, Format]:
        """The source, opened, and its format (as named, or detected)."""
        source = self.open()
        return source, self.format_of(source)

    def format_of(self, source: Source) -> Format:
        """The format of `source`, opened: as named, or detected (with its dataset type), reading
        declared tools from `tools_column` when given."""
        _log_source(source)
        try:
            if self.dataset_type not in ("auto", "conversation"):
                fmt = resolve_shaped(source, self)
            elif self.prompt_column is not None or self.candidates is not None:
                raise SourceError(
                    f"{option_name('prompt_column')} and {option_name('candidates')} go with "
                    f"{option_name('dataset_type', flag='--type')}"
                )
            else:
                shaped = self.dataset_type == "auto"
                fmt = resolve_format(source, self.format, self.column, shaped=shaped)
        except FormatError as err:  # every such error names the file or dataset it is about
            if str(err).startswith(f"{source.name}: "):
                raise
            raise FormatError(f"{source.name}: {err}") from err
        if self.tools_column is not None:
            fmt = with_tools_column(source, fmt, self.tools_column)
        log.info("%s: format %s, column %r", source.name, fmt.name, fmt.column)
        return fmt

    def rows_total(self, source: Source) -> int | None:
        """How many rows a run over `source` reads, when that is known ahead."""
        if self.limit is None or source.num_rows is None:
            return source.num_rows
        return min(self.limit, source.num_rows)


def _log_source(source: Source) -> None:
    """What was opened, for `-v` (its columns for `-vv`)."""
    if not log.isEnabledFor(logging.INFO):
        return  # counting a large folder's parts is not free
    rows = "an unknown number of" if source.num_rows is None else f"{source.num_rows:,}"
    parts = len(source.parts())
    log.info("%s: %s rows in %d part(s) (%s)", source.name, rows, parts, source.kind)
    log.debug("%s: columns %s", source.name, ", ".join(source.schema.names))


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """Where the blocks run: `local` (this process, and `workers` - 1 more) or `ray` (Ray Data
    tasks on the cluster at `ray_address`, else `RAY_ADDRESS`, else a new local Ray)."""

    engine: Engine = "local"
    workers: int = 1
    ray_address: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in ("local", "ray"):
            raise ValueError(f"engine must be 'local' or 'ray', not {self.engine!r}")
        if self.workers < 1:
            raise ValueError("workers must be at least 1")


_SOURCE_FIELDS = frozenset(f.name for f in fields(SourceOptions)) - {"spec"}
_ENGINE_FIELDS = frozenset(f.name for f in fields(EngineOptions))


def split_options(
    source: str | os.PathLike[str] | Source | SourceOptions,
    engine: EngineOptions | Engine,
    options: dict[str, Any],
) -> tuple[SourceOptions, EngineOptions]:
    """`clean`'s and `audit`'s arguments as the two options objects: `source` and `engine` (each
    an options object, or what its first field takes), with `options`, the keyword arguments,
    naming other fields of either."""
    unknown = sorted(set(options) - _SOURCE_FIELDS - _ENGINE_FIELDS)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    read = {k: v for k, v in options.items() if k in _SOURCE_FIELDS}
    run = {k: v for k, v in options.items() if k in _ENGINE_FIELDS}
    return (
        replace(source, **read)
        if isinstance(source, SourceOptions)
        else SourceOptions(source, **read),
        replace(engine, **run)
        if isinstance(engine, EngineOptions)
        else EngineOptions(engine, **run),
    )


def resolve_format(
    source: Source, format: str | Format = "auto", column: str | None = None, *, shaped: bool = True
) -> Format:
    """The source's format: as named, or detected from its columns and first rows (with
    `shaped`, a dataset type's too: `shapes`)."""
    from transcript_clean.formats import get_format
    from transcript_clean.shapes.detect import detect_format

    names = _data_columns(source)
    if not names:  # a JSON Lines file with no line: only the columns the reader adds
        raise SourceError(f"{source.name}: no rows: nothing to clean")
    if isinstance(format, Format):
        fmt = format
    elif format == "auto":
        sample = _sample(source)
        fmt = detect_format(names, sample, column=column, shaped=shaped, source=source.name)
    elif column is None and shaped and (found := _shaped(source, format)) is not None:
        fmt = found
    elif column is None and shaped:
        from transcript_clean.shapes.detect import prompt_set

        fmt = get_format(format)
        fmt = prompt_set(fmt, source.schema.names, _sample(source)) or fmt
    else:
        fmt = get_format(format, column=column)
    if fmt.column not in names:
        raise SourceError(
            f"{source.name}: no column {fmt.column!r} for format {fmt.name}; the columns are "
            f"{', '.join(names)}; {_other_format(source, names, given=column is not None)}"
        )
    return fmt


def format_hint(source: Source, fmt: Format) -> str | None:
    """What to pass when the format named (`fmt`, one conversation column) does not read most
    rows of the detection sample while the format `auto` picks reads them: a named format is
    run as asked, but a run that rejects most rows as `unknown_role` should say why."""
    from transcript_clean.shapes import ShapedFormat

    if isinstance(fmt, ShapedFormat):
        return None
    sample = _sample(source)
    misread = _unread(fmt, sample)
    if not sample or misread * 2 <= len(sample):
        return None
    from transcript_clean.formats import detect_conversation_format, get_format

    try:
        found = detect_conversation_format(_data_columns(source), sample)
    except FormatError:
        return None
    if found.name == fmt.name or _unread(found, sample) * 2 >= len(sample):
        return None
    use = option("format", found.name)
    if found.column != get_format(found.name).column:
        use += f" {option('column', found.column)}"
    return (
        f"{misread} of the first {len(sample)} rows do not read as {fmt.name}; they read as "
        f"{found.name} (column {found.column!r}): pass {use}"
    )


def _unread(fmt: Format, rows: list[dict[str, Any]]) -> int:
    """How many of `rows` `fmt` cannot decode (each would be a `malformed_row` or
    `unknown_role` reject)."""
    from transcript_clean.formats.base import DecodeError

    unread = 0
    for row in rows:
        try:
            fmt.decode(row)
        except (DecodeError, RecursionError):
            unread += 1
    return unread


def _data_columns(source: Source) -> list[str]:
    """The source's columns without those its reader adds (a JSON Lines line and its error),
    which no user named and no format reads."""
    hidden = hidden_columns(source.schema)
    return [name for name in source.schema.names if name not in hidden]


def _other_format(source: Source, names: list[str], *, given: bool) -> str:
    """What to do when the format named has no column: the format the rows read as, if one
    does (the format was the mistake, not the column), else name the column."""
    from transcript_clean.formats import detect_conversation_format, get_format

    if not given:
        try:
            found = detect_conversation_format(names, _sample(source))
        except FormatError:
            pass
        else:
            use = option("format", found.name)
            if found.column != get_format(found.name).column:
                use += f" {option('column', found.column)}"
            return f"it reads as {found.name} (column {found.column!r}): use {use}"
    return f"choose the conversation column with {option_name('column')}"


def with_tools_column(source: Source, fmt: Format, column: str) -> Format:
    """A copy of `fmt` that reads each row's declared tools from `column`."""
    if column not in source.schema.names:
        raise SourceError(
            f"{source.name}: no column {column!r} for {option_name('tools_column')}; the columns "
            f"are {', '.join(_data_columns(source))}"
        )
    fmt = copy.copy(fmt)
    fmt.tools_column = column
    return fmt


def _sample(source: Source) -> list[dict[str, Any]]:
    """The first rows of `source`, as detection reads them: read once per source and kept
    (reading them decodes a row group's first pages and dictionaries, 2-10 ms on the bench's
    files, and a run with a format named asks up to three times). Not to be changed."""
    sample = _SAMPLES.get(source)
    if sample is None:
        sample = _SAMPLES[source] = _first_rows(source)
    return sample


_SAMPLES: weakref.WeakKeyDictionary[Source, list[dict[str, Any]]] = weakref.WeakKeyDictionary()


def _first_rows(source: Source) -> list[dict[str, Any]]:
    from transcript_clean.utf8 import python_rows

    parts = source.parts()
    sample = next(iter(source.read(parts[0], 0, 20, 20)), None) if parts else None
    rows = python_rows(sample) if sample is not None else []
    return _json_decoded(rows, source)


def _shaped(source: Source, format: str) -> Format | None:
    """The source's dataset type, read in the format named, if its columns make it one."""
    from transcript_clean.shapes.detect import detect_shape, shaped_format

    rows = _sample(source)
    shape = detect_shape(source.schema.names, rows)
    return None if shape is None else shaped_format(shape, source.schema.names, rows, format)


def resolve_shaped(source: Source, read: SourceOptions) -> Format:
    """The format of a source whose dataset type is named (`--type`), with its columns."""
    from transcript_clean.shapes import make_shape
    from transcript_clean.shapes.detect import shaped_format

    names = _data_columns(source)
    shape = make_shape(
        read.dataset_type, names, prompt=read.prompt_column, candidates=read.candidates
    )
    format = read.format.name if isinstance(read.format, Format) else read.format
    return shaped_format(shape, names, _sample(source), format)


def _json_decoded(rows: list[dict[str, Any]], source: Source) -> list[dict[str, Any]]:
    """Rows with their JSON-text columns parsed, so detection sees their keys."""
    columns = json_columns(source.schema)
    if not columns:
        return rows
    out = []
    for row in rows:
        row = dict(row)
        for name in columns:
            with suppress(json.JSONDecodeError, RecursionError):  # the cleaner rejects it
                row[name] = json.loads(row[name]) if isinstance(row[name], str) else row[name]
        out.append(row)
    return out

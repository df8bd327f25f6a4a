"""Inputs: Parquet files, JSON files, `datasets` folders and Hub datasets, as Arrow record batches.

Parquet is also read over URIs (`s3://`, `gs://`, `file://`, and whatever else pyarrow or fsspec
reach), so that a cluster's workers can read the same input.

`open_source(spec)` works out what `spec` names and returns a `Source`: one schema, a list of
independently readable `Part`s, and `read(part, start, stop)` for any row range of a part, in
bounded memory. Sources and parts pickle, so worker processes can read their own ranges.

One module per kind: `parquet` (local and over URIs), `json` (JSON and JSON Lines files) and `hf`
(`datasets` folders and the Hub); `base` holds the `Source` ABC and what the kinds share.
"""

from __future__ import annotations

import glob
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.errors import SourceError
from transcript_clean.lazy import lazy_names
from transcript_clean.sources.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    DEFAULT_MAX_ROW_BYTES,
    GLOB_CHARS,
    JSON_COLUMNS_KEY,
    LINE_ERROR,
    RAW_LINE,
    Part,
    Source,
    hidden,
    hidden_columns,
    is_json_file,
    is_json_name,
    json_columns,
    output_schema,
    output_table,
)
from transcript_clean.sources.parquet import ParquetSource, UriParquetSource, open_uri

if TYPE_CHECKING:
    from transcript_clean.sources.hf import (
        DataFiles,
        DatasetSource,
        StreamingSource,
        load_hub,
    )
    from transcript_clean.sources.json import JsonSource, rows_to_table

# Imported when first asked for: a Parquet run needs neither the JSON readers nor `datasets`'.
_LAZY: Final = {
    "DataFiles": "hf",
    "DatasetSource": "hf",
    "StreamingSource": "hf",
    "load_hub": "hf",
    "JsonSource": "json",
    "rows_to_table": "json",
}

__getattr__ = lazy_names(__name__, _LAZY)


__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_ROW_BYTES",
    "JSON_COLUMNS_KEY",
    "LINE_ERROR",
    "RAW_LINE",
    "DataFiles",
    "DatasetSource",
    "JsonSource",
    "ParquetSource",
    "Part",
    "Source",
    "StreamingSource",
    "UriParquetSource",
    "hidden_columns",
    "json_columns",
    "load_hub",
    "open_source",
    "output_schema",
    "output_table",
    "reads_itself",
    "rows_to_table",
]

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def open_source(
    spec: str,
    *,
    split: str | None = None,
    subset: str | None = None,
    revision: str | None = None,
    streaming: bool = False,
    data_files: DataFiles | None = None,
    storage_options: Mapping[str, Any] | None = None,
    max_row_bytes: int | None = DEFAULT_MAX_ROW_BYTES,
) -> Source:
    """Open what `spec` names, checked in this order:

    - with `data_files`: `datasets.load_dataset(spec, data_files=...)` (see `load_hub`);
    - a file: JSON when its name ends in `.json`, `.jsonl` or `.ndjson` (each maybe `.gz` or
      `.zst`),
      Parquet when in `.parquet`, and otherwise as its first bytes say (`is_json_file`);
    - a folder: a `DatasetDict` saved by `save_to_disk` (has `dataset_dict.json`; needs `split`
      unless it holds one), a `Dataset` saved by it (has `state.json`), else every `*.parquet`
      file below it, sorted by path, skipping names that start with `.` or `_`; with none, its
      JSON and JSON Lines files so;
    - a glob (`data/*.parquet`, `**` allowed): its files, sorted, all Parquet or all JSON;
    - a URI (`s3://bucket/data/`, `gs://...`, `file:///...`, any scheme pyarrow or fsspec
      knows): a Parquet file, a folder of them or a glob, read through that filesystem;
    - a Hub id (`owner/name` or `name`): `load_hub`.

    `split`, `subset`, `revision` and `streaming` apply to the Hub; `split` also picks the split of
    a `DatasetDict` folder; `storage_options` to the filesystem of a URI; `max_row_bytes` to JSON
    Lines files (a longer line is a reject, never read whole). Raises `SourceError` for anything
    it cannot open.
    """
    if data_files is not None:
        from transcript_clean.sources.hf import load_hub

        return load_hub(
            spec, subset=subset, split=split, revision=revision, streaming=streaming,
            data_files=data_files,
        )  # fmt: skip
    if _URI.match(spec):
        return open_uri(spec, storage_options)
    path = Path(os.path.expanduser(spec))
    if path.is_file():
        return _open_files(spec, [path], path, max_row_bytes)
    if path.is_dir():
        if _saved_by_datasets(path):
            from transcript_clean.sources.hf import open_datasets_folder

            return open_datasets_folder(spec, path, split)
        files = _folder_files(path, "*.parquet", lambda name: True)
        # A folder of JSON Lines (or JSON) files reads as the glob of them does; Parquet goes
        # first, so that the JSON metadata beside a folder of Parquet files is not read as rows.
        files = files or _folder_files(path, "*", is_json_name)
        if not files:
            raise SourceError(f"no Parquet files in folder {spec}, nor JSON or JSON Lines files")
        return _open_files(spec, files, path, max_row_bytes)
    if GLOB_CHARS.search(spec):
        matches = glob.glob(os.path.expanduser(spec), recursive=True)
        files = sorted(Path(match) for match in matches if os.path.isfile(match))
        if not files:
            raise SourceError(f"no files match {spec}")
        return _open_files(spec, files, _glob_root(path), max_row_bytes)
    if _HUB_ID.fullmatch(spec) and not is_json_name(spec) and not spec.endswith(".parquet"):
        return _open_hub_id(
            spec, subset=subset, split=split, revision=revision, streaming=streaming
        )
    raise SourceError(f"no such file or folder: {spec}")


def _folder_files(folder: Path, pattern: str, wanted: Callable[[str], bool]) -> list[Path]:
    """The files below `folder` matching `pattern` whose names are `wanted`, sorted by path,
    hidden ones left out."""
    return sorted(
        file
        for file in folder.rglob(pattern)
        if wanted(file.name) and file.is_file() and not hidden(file.relative_to(folder))
    )


def reads_itself(spec: str, *, data_files: DataFiles | None = None) -> bool:
    """Whether `open_source(spec)` opens files this process reads itself (a file, a folder of
    Parquet files, a glob, a URI), not a dataset `datasets` loads (a saved folder, the Hub):
    the sources that never hand pyarrow a pandas object (`Source.uses_pandas`). Known before
    the source is opened, which for JSON files already converts rows (`pandas_free`)."""
    if data_files is not None:
        return False
    if _URI.match(spec):
        return True
    path = Path(os.path.expanduser(spec))
    if path.is_dir():
        return not _saved_by_datasets(path)
    return path.is_file() or bool(GLOB_CHARS.search(spec))


def _saved_by_datasets(folder: Path) -> bool:
    """A folder `save_to_disk` wrote: a `DatasetDict`, or a `Dataset`."""
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


HUB_PROBE_TIMEOUT = 10.0
"""Seconds the Hub has to say whether it has a dataset, for a SOURCE that could be a Hub id and
names no local file or folder."""


def _open_hub_id(
    spec: str, *, subset: str | None, split: str | None, revision: str | None, streaming: bool
) -> Source:
    """A spec shaped like a Hub id that names no local file or folder: maybe a mistyped local
    name. The Hub is asked once, briefly, whether it has such a dataset, before `load_dataset`
    (which, the Hub unreachable, retries for half a minute); offline (HF_HUB_OFFLINE), only its
    cache can have it. Failing, the error says both: not a local path, and not on the Hub."""
    from huggingface_hub import constants

    from transcript_clean.sources.hf import load_hub

    started = time.monotonic()
    offline = bool(constants.HF_HUB_OFFLINE)
    problem = None if offline else _hub_problem(spec, revision)
    if problem is None:
        try:
            return load_hub(
                spec, subset=subset, split=split, revision=revision, streaming=streaming
            )
        except SourceError as err:
            if not offline:
                raise  # the Hub has it: what went wrong is about the dataset, not the name
            problem = f"not in the cache, and HF_HUB_OFFLINE keeps the Hub out of reach ({err})"
    seconds = time.monotonic() - started
    raise SourceError(
        f"no such file or folder: {spec}; as a dataset on the Hub: {problem} "
        f"(gave up after {seconds:.1f} s)"
    )


def _hub_problem(spec: str, revision: str | None) -> str | None:
    """Why the Hub has no dataset `spec`, asked once; None when it may have it."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        HfApi().dataset_info(spec, revision=revision, timeout=HUB_PROBE_TIMEOUT)
    except GatedRepoError:
        return None  # it exists: load_dataset says what access it needs
    except RepositoryNotFoundError:
        return "no dataset of that name (or a private one this machine has no token for)"
    except HfHubHTTPError:
        return None  # the Hub answered: load_dataset says the rest
    except Exception as err:  # the network: no name resolution, refused, timed out
        return (
            f"not reachable ({type(err).__name__}: {err}); a dataset in the local cache loads "
            "with HF_HUB_OFFLINE=1"
        )
    return None


def _glob_root(pattern: Path) -> Path:
    """The folder a glob's matches are named relative to: its parts before the first wildcard."""
    root = Path()
    for part in pattern.parts:
        if GLOB_CHARS.search(part):
            break
        root = root / part
    return root


def _open_files(
    spec: str, files: list[Path], root: Path, max_row_bytes: int | None = DEFAULT_MAX_ROW_BYTES
) -> Source:
    """A Parquet or JSON source over `files`, which lie in `root` (or are `root`)."""
    json_files = [file for file in files if is_json_file(file)]
    if not json_files:
        return ParquetSource(spec, files, root)
    if len(json_files) == len(files):
        from transcript_clean.sources.json import JsonSource
        from transcript_clean.sources.jsonl import is_json_lines
        from transcript_clean.sources.sessions import SessionSource, is_session_file

        if all(is_json_lines(file) and is_session_file(file) for file in files):
            return SessionSource(spec, files, root)
        return JsonSource(spec, files, root, max_row_bytes)
    other = next(file for file in files if file not in json_files)
    raise SourceError(f"{spec} mixes JSON files ({json_files[0]}) with others ({other})")

"""A file written to a temporary name beside it and moved into place, so that a killed run never
leaves a file that looks complete: what every shard (Parquet or JSON Lines) is built on."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import TracebackType
from typing import Self

import pyarrow as pa

from transcript_clean.errors import OutputError


def temp_path(path: Path) -> Path:
    """Where `path` is written before it is moved into place: beside it, ending in `.tmp`."""
    return path.with_name(path.name + ".tmp")


class AtomicFile:
    """A file written to `temp_path(path)`: `close()` finishes it (`_finish`), fsyncs it and
    moves it into place; `abort()`, or leaving a `with` block by an exception, closes it as it
    can (`_discard`) and deletes it."""

    path: Path
    _temp: Path
    _done: bool

    def _finish(self) -> None:
        """Write what is pending and close the temporary file."""
        raise NotImplementedError

    def _discard(self) -> None:
        """Let go of the temporary file without finishing it."""
        raise NotImplementedError

    def close(self) -> None:
        """Finish the file and move it into place."""
        if self._done:
            return
        try:
            self._finish()
            _fsync(self._temp)
            os.replace(self._temp, self.path)
        except (pa.ArrowException, OSError) as exc:
            self.abort()
            raise OutputError(f"cannot write {self.path}: {exc}") from exc
        except BaseException:
            self.abort()
            raise
        self._done = True
        fsync_folder(self.path.parent)

    def abort(self) -> None:
        """Drop the file: delete the temporary file, leave no `path`. Does nothing after close."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(Exception):  # already failing: the temp file is what matters
            self._discard()
        self._temp.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """Make a rename durable; some systems cannot open a folder, and then there is nothing to do."""
    with contextlib.suppress(OSError):
        _fsync(folder)

"""The audit's report file: Markdown or HTML, by the name's suffix."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from transcript_clean.audit.run import AuditResult
from transcript_clean.errors import OutputError, option
from transcript_clean.sinks import write_text_atomic
from transcript_clean.storage import is_uri

__all__ = ["REPORT_SUFFIXES", "check_report", "write_report"]

REPORT_SUFFIXES = (".md", ".markdown", ".html", ".htm")
_HTML = (".html", ".htm")


def check_report(
    path: str | os.PathLike[str], *, overwrite: bool = False, roots: Sequence[Path] = ()
) -> None:
    """Refuse, before an audit runs, a report that could not or must not be written: a name
    that says neither Markdown nor HTML, a place where no file can be made, a file that is
    there already (without `overwrite`), or one of the source's (`roots`, its local files and
    folders: never, whatever `overwrite` says)."""
    if is_uri(os.fspath(path)):
        raise OutputError(f"report {path}: the report is written to a local file; give its path")
    if Path(path).suffix.lower() not in REPORT_SUFFIXES:
        raise OutputError(f"report {path}: the name must end in .md or .html")
    real = Path(path).resolve()  # `..` and links resolved: where it would really land
    for root in (root.resolve() for root in roots):
        if real == root:
            raise OutputError(f"report {path} is the source {root}: choose another file")
        if real.is_relative_to(root):
            raise OutputError(f"report {path} is inside the source {root}: choose another file")
    if os.path.lexists(path):
        if Path(path).is_dir():
            raise OutputError(f"report {path} is a folder: give a file's path")
        if not overwrite:
            raise OutputError(f"report {path} exists: pass {option('overwrite')} to replace it")
    folder = Path(path).absolute().parent
    # A real try, as the write will be: permission bits do not stop root, a read-only file
    # system or a path below a file does.
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise OutputError(f"cannot write report {path}: {folder}: {err.strerror or err}") from None


def write_report(
    result: AuditResult, path: str | os.PathLike[str], *, overwrite: bool = False
) -> None:
    """The report in `path`: HTML for .html / .htm, Markdown for .md / .markdown; a file there
    already is replaced only with `overwrite`."""
    check_report(path, overwrite=overwrite)
    target = Path(path)
    if target.suffix.lower() in _HTML:
        from transcript_clean.audit.html import render_html

        write_text_atomic(target, render_html(result))
    else:
        from transcript_clean.audit.render import render_markdown

        write_text_atomic(target, render_markdown(result))

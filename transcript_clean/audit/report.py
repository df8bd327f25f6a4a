"""The audit's report file: Markdown or HTML, by the name's suffix."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from transcript_clean.audit.run import AuditResult
from transcript_clean.errors import OutputError
from transcript_clean.sinks import write_text_atomic
from transcript_clean.storage import is_uri

__all__ = ["REPORT_SUFFIXES", "check_report", "write_report"]

REPORT_SUFFIXES = (".md", ".markdown", ".html", ".htm")
_HTML = (".html", ".htm")


def check_report(path: str | os.PathLike[str]) -> None:
    """Refuse, before an audit runs, a report that could not be written: a name that says
    neither Markdown nor HTML, or a place where no file can be made."""
    if is_uri(os.fspath(path)):
        raise OutputError(f"report {path}: the report is written to a local file; give its path")
    if Path(path).suffix.lower() not in REPORT_SUFFIXES:
        raise OutputError(f"report {path}: the name must end in .md or .html")
    folder = Path(path).absolute().parent
    # A real try, as the write will be: permission bits do not stop root, a read-only file
    # system or a path below a file does.
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise OutputError(f"cannot write report {path}: {folder}: {err.strerror or err}") from None


def write_report(result: AuditResult, path: str | os.PathLike[str]) -> None:
    """The report in `path`: HTML for .html / .htm, Markdown for .md / .markdown."""
    check_report(path)
    target = Path(path)
    if target.suffix.lower() in _HTML:
        from transcript_clean.audit.html import render_html

        write_text_atomic(target, render_html(result))
    else:
        from transcript_clean.audit.render import render_markdown

        write_text_atomic(target, render_markdown(result))

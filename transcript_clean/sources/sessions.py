"""Claude Code sessions: JSON Lines files of one event a line, read as one row per conversation.

A session file (`~/.claude/projects/*/*.jsonl`) holds events: `user` and `assistant` lines
whose `message` is in Anthropic's shape, `system` lines, `summary` lines (a title, with the
`leafUuid` it names), file-history snapshots. Each event with a `uuid` names its parent
(`parentUuid`), so the events make trees. A conversation is one path of a tree:

- each root (an event whose parent is null, or not in the file) starts a tree; a sub-agent's
  events (`isSidechain: true`) start trees of their own, so each sidechain is its own row;
- a compaction starts a new root (a `compact_boundary` system event with a null parent, then
  the summary as a user message, `isCompactSummary`): the conversation after it is a row of its
  own, which opens with the summary, as the model saw it; the one before it is another row;
- a branch (the user rewound and edited a message: two children of one event) keeps the
  path to the last leaf written, what the session went on with; the events of the abandoned
  branches are not in any row, and each row says how many there were (`abandoned`).

Lines without a `uuid` (titles, snapshots) are in no row. Memory stays bounded: opening a file
reads each line's ids alone (`_plan`: the tree, no content kept), and reading it again keeps
the events of the conversations not finished yet, each row handed on at its last line. Rows
are numbered in the order their last lines come; each says the lines it came from (`lines`,
numbered from 1 as an editor does), which the rejects keep too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
import pyarrow as pa

from transcript_clean.errors import SourceError
from transcript_clean.jsontext import strict_loads
from transcript_clean.sources import jsontypes
from transcript_clean.sources.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_SIZE,
    FileSource,
    Part,
    digest,
    label,
    row_range,
)
from transcript_clean.sources.jsonl import compression_of

EVENTS_COLUMN: Final = "events"
SCHEMA: Final = pa.schema(
    [
        pa.field("sessionId", pa.string()),
        pa.field("thread", pa.string()),
        pa.field("sidechain", pa.bool_()),
        pa.field("lines", pa.list_(pa.int64())),
        pa.field("abandoned", pa.int64()),
        pa.field(EVENTS_COLUMN, jsontypes.JSON),
    ]
)
"""A session row: the session, the uuid of its first event, whether it is a sub-agent's, the
lines its events come from, how many events of its tree are on abandoned branches, and the
events themselves, each as its line holds it."""

_SNIFF_LINES: Final = 20
_SNIFF_BYTES: Final = 2**20


def is_session_file(path: Path) -> bool:
    """Whether a JSON Lines file is a Claude Code session: among the lines of its first
    `_SNIFF_BYTES` (never more: a file's first line may be of any length), an event with
    `sessionId`, `uuid`, a `parentUuid` key and a `message`."""
    try:
        with pa.input_stream(str(path), compression=compression_of(path)) as stream:
            head = stream.read(_SNIFF_BYTES)
    except (OSError, pa.ArrowException):
        return False
    for raw in head.split(b"\n")[:_SNIFF_LINES]:
        try:
            event = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue  # blank, cut short by the head, or not JSON
        if (
            isinstance(event, dict)
            and "parentUuid" in event
            and isinstance(event.get("sessionId"), str)
            and isinstance(event.get("uuid"), str)
            and isinstance(event.get("message"), dict)
        ):
            return True
    return False


def _lines(path: Path, limit: int | None = None) -> Iterator[tuple[int, Any]]:
    """Each non-blank line's number (from 1) and its JSON value (None where it is not JSON),
    streamed."""
    for number, raw in _raw_lines(path, limit):
        try:
            value = strict_loads(raw)  # orjson's reading, but a huge integer exactly
        except (ValueError, RecursionError):
            value = None
        yield number, value


def _raw_lines(path: Path, limit: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Each non-blank line's number (from 1) and its bytes, white space around it left out,
    streamed."""
    with pa.input_stream(str(path), compression=compression_of(path)) as stream:
        for number, raw in enumerate(_read_lines(stream), start=1):
            line = raw.strip()
            if line:
                yield number, line
            if limit is not None and number >= limit:
                return


def _read_lines(stream: Any) -> Iterator[bytes]:
    rest = b""
    while chunk := stream.read(2**20):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


@dataclass(frozen=True, slots=True)
class _Thread:
    """One conversation of a session file: its lines in order, and what the row says of it."""

    session: str | None
    root: str
    sidechain: bool
    lines: tuple[int, ...]
    abandoned: int


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """A session file's conversations, in the order their last lines come."""

    path: Path
    threads: tuple[_Thread, ...]
    digest: str


def _plan(path: Path) -> SessionPlan:
    """The conversations of a session file, from one pass that keeps each event's ids alone."""
    parent: dict[str, str | None] = {}
    line_of: dict[str, int] = {}
    side: dict[str, bool] = {}
    session: dict[str, str | None] = {}
    order: list[str] = []
    sha = hashlib.sha256()
    for number, event in _lines(path):
        sha.update(jsontypes.dumps([number, event]).encode())
        if not isinstance(event, dict) or not isinstance(event.get("uuid"), str):
            continue
        uuid = event["uuid"]
        if uuid in line_of:
            continue  # a line written twice (a resumed session): the first one counts
        up = event.get("parentUuid")
        parent[uuid] = up if isinstance(up, str) else None
        line_of[uuid] = number
        side[uuid] = event.get("isSidechain") is True
        session[uuid] = event.get("sessionId") if isinstance(event.get("sessionId"), str) else None
        order.append(uuid)
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    for uuid in order:
        up = parent[uuid]
        if up is None or up not in line_of or side[up] != side[uuid]:
            roots.append(uuid)
        else:
            children.setdefault(up, []).append(uuid)
    threads = []
    for root in roots:
        tree = _tree(root, children)
        leaves = [u for u in tree if u not in children]
        last = max(leaves, key=line_of.__getitem__)
        path_ids = []
        node: str | None = last
        while node is not None:
            path_ids.append(node)
            node = None if node == root else parent[node]
        lines = tuple(sorted(line_of[u] for u in path_ids))
        threads.append(_Thread(session[root], root, side[root], lines, len(tree) - len(path_ids)))
    threads.sort(key=lambda t: t.lines[-1])
    return SessionPlan(path, tuple(threads), sha.hexdigest())


def _tree(root: str, children: dict[str, list[str]]) -> list[str]:
    out, stack = [], [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(children.get(node, ()))
    return out


class SessionSource(FileSource):
    """Claude Code session files, one part each, one row per conversation (see the module)."""

    kind = "claude-code"

    def __init__(self, name: str, files: Sequence[Path], root: Path) -> None:
        self._root = root
        self._parts = []
        digests = []
        for file in files:
            try:
                plan = _plan(file)
            except (OSError, pa.ArrowException) as exc:
                raise SourceError(f"cannot read {file}: {exc}") from exc
            self._parts.append(Part(str(file), len(plan.threads), plan))
            digests.append((label(file, root), plan.digest))
        self._fingerprint = digest("claude-code", digests)
        super().__init__(name, SCHEMA)
        rows = sum(len(p.key.threads) for p in self._parts)
        sidechains = sum(t.sidechain for p in self._parts for t in p.key.threads)
        self.note = (
            f"Claude Code session events grouped into {rows} conversation(s), "
            f"{sidechains} of them sub-agent sidechains"
        )

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
        plan: SessionPlan = part.key
        wanted = plan.threads[start:stop]
        # Which threads each line belongs to, and the events kept until a thread's last line.
        owners: dict[int, list[int]] = {}
        for k, thread in enumerate(wanted):
            for line in thread.lines:
                owners.setdefault(line, []).append(k)
        # Each event is kept as its line's text: the lines in a row parsed when the plan was
        # made (the others are in none), and the row's events are the JSON text of a list of
        # them, which the cleaner parses once (parsing and writing it again here took most of
        # the read).
        kept: dict[int, bytes] = {}
        rows: list[dict[str, Any]] = []
        done = 0
        for number, event in _raw_lines(plan.path):
            if number not in owners:
                continue
            kept[number] = event
            while done < len(wanted) and wanted[done].lines[-1] <= number:
                thread = wanted[done]
                rows.append(_row(thread, [kept[line] for line in thread.lines]))
                done += 1
                for line in thread.lines:  # what no open thread needs goes
                    if owners[line][-1] < done:
                        kept.pop(line, None)
                if len(rows) >= batch_size:
                    yield _batch(rows)
                    rows = []
            if done == len(wanted):
                break
        if rows:
            yield _batch(rows)

    def fingerprint(self) -> str:
        return self._fingerprint


def _batch(rows: list[dict[str, Any]]) -> pa.RecordBatch:
    columns = [
        pa.array([row[f.name] for row in rows], pa.string()).cast(f.type)
        if f.name == EVENTS_COLUMN
        else jsontypes.to_array([row[f.name] for row in rows], f.type)
        for f in SCHEMA
    ]
    return pa.RecordBatch.from_arrays(columns, schema=SCHEMA)


def _row(thread: _Thread, events: list[bytes]) -> dict[str, Any]:
    return {
        "sessionId": thread.session,
        "thread": thread.root,
        "sidechain": thread.sidechain,
        "lines": list(thread.lines),
        "abandoned": thread.abandoned,
        EVENTS_COLUMN: (b"[" + b",".join(events) + b"]").decode(),
    }

"""Claude Code sessions (sources/sessions.py, formats/claude_code): lines grouped into one row
per conversation, sidechains and compactions as rows of their own, an interrupted tool call
repaired by R5, and `--to openai` from a session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from transcript_clean.formats import get_format
from transcript_clean.model import AssistantMessage, Text, ToolCall, ToolResult, UserMessage
from transcript_clean.options import SourceOptions
from transcript_clean.policy import DEFAULT, config_from_dict
from transcript_clean.rows import clean_row
from transcript_clean.run import clean
from transcript_clean.sources import open_source
from transcript_clean.sources.sessions import SessionSource
from transcript_clean.utf8 import python_rows

DATA = Path(__file__).parent / "data" / "claude_code"
FORMAT = get_format("claude-code")
INTERRUPT = "[Request interrupted by user for tool use]"


def event(
    uuid: str, parent: str | None, type_: str, message: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {"parentUuid": parent, "isSidechain": False, "sessionId": "s", "type": type_,
            "uuid": uuid, "message": message, **extra}  # fmt: skip


def session() -> list[dict[str, Any]]:
    """A session: a title line, an answer streamed as two lines (one message id), a tool call
    the user interrupted (no result), a sub-agent's sidechain, and the end."""
    side = {"isSidechain": True}
    return [
        {"type": "summary", "summary": "Run the tests", "leafUuid": "a3"},
        event("u1", None, "user", {"role": "user", "content": "Run the tests."}),
        event("a1", "u1", "assistant", {"id": "m1", "role": "assistant", "content": [
            {"type": "thinking", "thinking": "Run pytest.", "signature": "sig"}]}),
        event("a1b", "a1", "assistant", {"id": "m1", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}]}),
        event("u2", "a1b", "user", {"role": "user", "content": [
            {"type": "text", "text": INTERRUPT}]}),
        event("u3", "u2", "user", {"role": "user", "content": "Use a sub-agent."}),
        event("a2", "u3", "assistant", {"id": "m2", "role": "assistant", "content": [
            {"type": "tool_use", "id": "t2", "name": "Task", "input": {"prompt": "run tests"}}]}),
        event("s1", None, "user", {"role": "user", "content": "run tests"}, **side),
        event("s2", "s1", "assistant", {"id": "m9", "role": "assistant", "content": [
            {"type": "text", "text": "All 3 pass."}]}, **side),
        event("u4", "a2", "user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "All 3 pass."}]}),
        {"type": "system", "subtype": "turn_duration", "uuid": "x1", "parentUuid": "u4",
         "isSidechain": False, "sessionId": "s"},
        event("a3", "x1", "assistant", {"id": "m3", "role": "assistant", "content": [
            {"type": "text", "text": "The tests pass."}]}),
    ]  # fmt: skip


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def rows_of(path: Path) -> list[dict[str, Any]]:
    source = open_source(str(path))
    assert isinstance(source, SessionSource)
    part = source.parts()[0]
    return [row for batch in source.read(part) for row in python_rows(batch)]


def test_lines_become_one_row_per_thread(tmp_path: Path) -> None:
    rows = rows_of(write(tmp_path / "s.jsonl", session()))
    # the sidechain ends first (line 9), the main thread at its last line (12)
    assert [(r["thread"], r["sidechain"], r["lines"]) for r in rows] == [
        ("s1", True, [8, 9]),
        ("u1", False, [2, 3, 4, 5, 6, 7, 10, 11, 12]),
    ]
    assert [e["uuid"] for e in rows[1]["events"]] == [
        "u1",
        "a1",
        "a1b",
        "u2",
        "u3",
        "a2",
        "u4",
        "x1",
        "a3",
    ]


def test_a_row_range_reads_alone(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", session())
    source = open_source(str(path))
    part = source.parts()[0]
    assert part.num_rows == 2
    (second,) = python_rows(next(source.read(part, 1, 2)))
    assert second["thread"] == "u1"


def test_the_decoder_merges_a_streamed_answer(tmp_path: Path) -> None:
    rows = rows_of(write(tmp_path / "s.jsonl", session()))
    messages = get_format("claude-code").decode(rows[1]).messages
    kinds = [type(m).__name__ for m in messages]
    assert kinds == ["UserMessage", "AssistantMessage", "UserMessage", "UserMessage",
                     "AssistantMessage", "UserMessage", "AssistantMessage"]  # fmt: skip
    first = messages[1]
    assert isinstance(first, AssistantMessage)
    assert [type(p).__name__ for p in first.content] == ["Reasoning", "ToolCall"]


def test_branches_and_compaction_of_a_real_session() -> None:
    """claude-code-log's fixture: a rewind (two attempts after "Ready") and a compaction."""
    rows = rows_of(DATA / "dag_compact_after_rewind.jsonl")
    assert [(r["thread"], r["lines"], r["abandoned"]) for r in rows] == [
        ("u1", [1, 2, 5, 6, 7, 8], 2),  # the first attempt (lines 3, 4) abandoned
        ("cb", [9, 10, 11, 12], 0),  # after the compaction: the summary first
    ]
    after = get_format("claude-code").decode(rows[1]).messages
    assert isinstance(after[0], UserMessage)
    assert after[0].content[0].text.startswith("This session is being continued")  # type: ignore[union-attr]


def test_sidechains_of_a_real_session() -> None:
    rows = rows_of(DATA / "sidechain_integrated.jsonl")
    assert [(r["sidechain"], r["lines"]) for r in rows] == [
        (True, [3, 4]),
        (True, [5]),  # its parent is not in the excerpt: a root of its own
        (False, [1, 2, 6]),
    ]


def test_auto_says_what_it_read(tmp_path: Path) -> None:
    path = write(tmp_path / "s.jsonl", session())
    source, fmt = SourceOptions(str(path)).resolve()
    assert fmt.name == "claude-code" and fmt.column == "events"
    assert source.note == (
        "Claude Code session events grouped into 2 conversation(s), 1 of them sub-agent sidechains"
    )


@pytest.mark.parametrize("interrupted_call", [None, "auto", "error_result", "cut"])
def test_an_interrupted_call_is_repaired_by_r5(
    tmp_path: Path, interrupted_call: str | None
) -> None:
    """By default (`auto`), as Claude Code's loop records a call it interrupted: R5's error
    result; a config that says `cut` cuts, which leaves this session no assistant turn."""
    path = write(tmp_path / "s.jsonl", session())
    repair = {} if interrupted_call is None else {"interrupted_call": interrupted_call}
    config = config_from_dict({"repair": repair})
    result = clean(path, tmp_path / "out", config=config, output_format="jsonl")
    lines = (tmp_path / "out" / "data" / "part-00000.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["sidechain"] is True  # the sub-agent's thread, a row of its own
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    card = (tmp_path / "out" / "README.md").read_text()
    if interrupted_call == "cut":
        # cut before the interrupted turn, nothing with an assistant turn is left
        assert result.stats.rows_rejected == 1 and len(rows) == 1
        assert summary["config"]["repair"]["interrupted_call"] == "cut"
        assert "Unanswered tool calls were repaired" not in card
        return
    assert result.stats.rows_repaired == 1
    # the summary says what `auto` was settled as, the card what it did and why
    assert summary["config"]["repair"]["interrupted_call"] == "error_result"
    assert (
        "Unanswered tool calls were repaired (R5): each unanswered call answered with the error "
        'result "The tool call was interrupted before a result was produced.", as the agent loop '
        "that recorded these claude-code rows answers a call it interrupted"
        in " ".join(card.split())
    )
    main = rows[1]
    messages = get_format("claude-code").decode(main).messages
    answer = messages[2]
    assert isinstance(answer, UserMessage)
    results = [p for p in answer.content if isinstance(p, ToolResult)]
    assert [(r.call, r.status) for r in results] == [("t1", "error")]
    # the two lines of the streamed answer are one event now; the others keep their uuids
    uuids = [e.get("uuid") for e in main["events"]]
    assert uuids == ["u1", "a1", "u2", "u3", "a2", "u4", "x1", "a3"]
    calls = [
        p
        for m in messages
        if isinstance(m, AssistantMessage)
        for p in m.content
        if isinstance(p, ToolCall)
    ]
    assert [c.id for c in calls] == ["t1", "t2"]


def test_two_answers_in_a_row_are_merged_by_r4() -> None:
    """Two assistant messages (two message ids) one after the other: R4 joins the second into
    the first, as for any format; the events' uuids, parents and times are where each sits."""
    ask = event("u1", None, "user", {"role": "user", "content": "Hi."}, timestamp="t1")
    one = event("a1", "u1", "assistant", {"id": "m1", "role": "assistant", "content": [
        {"type": "text", "text": "Hello."}]}, timestamp="t2")  # fmt: skip
    two = event("a2", "a1", "assistant", {"id": "m2", "role": "assistant", "content": [
        {"type": "text", "text": "How can I help?"}]}, timestamp="t3")  # fmt: skip
    verdict = clean_row({"events": [ask, one, two]}, FORMAT, DEFAULT)
    assert verdict.status == "repaired" and verdict.codes == ["consecutive_assistant"]
    assert verdict.row is not None
    events = verdict.row["events"]
    assert [e["uuid"] for e in events] == ["u1", "a1"]
    blocks = [{"type": "text", "text": "Hello."}, {"type": "text", "text": "How can I help?"}]
    assert events[1] == {**one, "message": {**one["message"], "content": blocks}}


def test_to_openai_from_a_session(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    path = write(tmp_path / "s.jsonl", session())
    config = config_from_dict({"repair": {"interrupted_call": "error_result"}})
    result = clean(path, tmp_path / "out", config=config, output_format="jsonl", to="openai")
    assert result.stats.rows_kept == 2
    files = [str(tmp_path / "out" / "data" / "part-00000.jsonl")]
    loaded = datasets.load_dataset(
        "json", data_files=files, split="train", cache_dir=str(tmp_path / "c")
    )
    main = loaded[1]["messages"]
    roles = ["user", "assistant", "tool", "user", "user", "assistant", "tool", "assistant"]
    assert [m["role"] for m in main] == roles
    assert main[1]["tool_calls"][0]["function"]["name"] == "Bash"
    assert main[2]["tool_call_id"] == "t1"
    assert loaded[1]["lines"] == [2, 3, 4, 5, 6, 7, 10, 11, 12]


def real_interrupted(tmp_path: Path) -> Path:
    """claude-code-log's sidechain session with its `Task` call interrupted: the user line that
    answered it (line 2) holding, in place of its `tool_result`, only the text Claude Code
    writes when the user interrupts a tool call, as a session killed before the result was
    written leaves it (claude-code#473, #8484)."""
    lines = (DATA / "sidechain_integrated.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert events[1]["message"]["content"][0]["type"] == "tool_result"
    events[1]["message"]["content"] = [{"type": "text", "text": INTERRUPT}]
    return write(tmp_path / "interrupted.jsonl", events)


def test_a_real_session_with_an_interrupted_call(tmp_path: Path) -> None:
    """The default repairs the main thread as the agent loop records an interrupted call, and
    the sub-agent's sidechains are rows of their own, each cleaned alone."""
    result = clean(real_interrupted(tmp_path), tmp_path / "out", output_format="jsonl")
    kept = [
        json.loads(line)
        for line in (tmp_path / "out" / "data" / "part-00000.jsonl").read_text().splitlines()
    ]
    main = [r for r in kept if not r["sidechain"]]
    assert [r["lines"] for r in main] == [[1, 2, 6]]
    messages = get_format("claude-code").decode(main[0]).messages
    assert [type(m).__name__ for m in messages] == [
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    answer = messages[1]
    assert isinstance(answer, UserMessage)
    (result_part,) = [p for p in answer.content if isinstance(p, ToolResult)]
    assert result_part.call == "toolu_01JA2mLseQCAW3MdwPE4qWEk" and result_part.status == "error"
    assert result_part.content == (
        Text("The tool call was interrupted before a result was produced."),
    )
    # where Claude Code puts it: the result before the text that says the user interrupted
    # (and Anthropic's API takes a user message's results only before its texts)
    assert answer.content[1:] == (Text(INTERRUPT),)
    written = next(
        e for e in main[0]["events"] if e.get("uuid") == "97965533-18f3-41b7-aa07-0c438f2a5893"
    )
    assert [b["type"] for b in written["message"]["content"]] == ["tool_result", "text"]
    assert written["message"]["content"][0]["is_error"] is True
    assert result.stats.codes[("unanswered_tool_call", "repaired")].rows == 1
    # the sidechains: every row of the session is accounted for, each on its own lines
    rejected = tmp_path / "out" / "rejects" / "part-00000.jsonl"
    rejects = (
        [json.loads(x) for x in rejected.read_text().splitlines()] if rejected.exists() else []
    )
    side = sorted(r["lines"] for r in [*kept, *rejects] if r["sidechain"])
    assert side == [[3, 4], [5]]
    assert result.stats.rows_in == 3


def test_explain_says_how_r5_repaired(tmp_path: Path) -> None:
    from transcript_clean.explain import explain_row, render_explanation
    from transcript_clean.policy import DEFAULT

    source, fmt = SourceOptions(str(real_interrupted(tmp_path))).resolve()
    main = next(i for i, t in enumerate(source.parts()[0].key.threads) if not t.sidechain)
    text = " ".join(render_explanation(explain_row(source, main, fmt, DEFAULT)).split())
    assert (
        "Repair unanswered_tool_call (- before, + after): how: each unanswered call answered"
        in text
    )
    assert 'what `interrupted_call = "auto"` does for them' in text
    assert text.endswith("Outcome: kept, repaired")

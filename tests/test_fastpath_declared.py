"""The fast path's declared-tools checks (`fastpath/declared.py`) on rows it cannot read."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from differential import assert_fast_and_slow_agree

from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT, STRICT, Config

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]


def called(function: dict[str, Any]) -> dict[str, Any]:
    """A row declaring `f` whose one call is to `function`, answered."""
    call = {"id": "c1", "type": "function", "function": function}
    return {
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ],
        "tools": TOOLS,
    }


@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_a_call_without_a_name_among_declared_tools_is_malformed_on_both_paths(
    config: Config,
) -> None:
    """A call with no function name, in a batch that declares tools, once raised IndexError in
    the fast path's name lookup (issue 27, finding 16): the decoder's verdict stands."""
    table = pa.Table.from_pylist(
        [called({"name": "f", "arguments": "{}"}), called({"arguments": "{}"})]
    )
    fmt = get_format("openai")
    verdicts = fast_verdicts(fmt, table.column("messages"), tools=[table.column("tools")])
    assert verdicts is not None and verdicts.clean.tolist() == [True, False]
    assert_fast_and_slow_agree(table, config, fmt)
    rejects = clean_batch(table, config, format=fmt, source="s").rejects.to_pylist()
    assert [(r["_source_row"], r["_reject_codes"]) for r in rejects] == [(1, ["malformed_row"])]
    assert rejects[0]["_reject_message"] == 'messages[1].tool_calls[0].function: missing "name"'

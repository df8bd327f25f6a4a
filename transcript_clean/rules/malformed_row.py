"""malformed_row (R0): the row cannot be decoded from its format.

Found by the format's decoder (`DecodeError`), which names the field: the row has no other code.
"""

from __future__ import annotations

from typing import Final

from transcript_clean.errors import MALFORMED_ROW
from transcript_clean.rules.base import Rule

CODE: Final = MALFORMED_ROW

RULE = Rule(
    CODE,
    order=0,
    summary=(
        "the row cannot be decoded; the "
        'message names the field (`messages[3].tool_calls[0].function: missing "name"`)'
    ),
    actions_help="R0: the row cannot be decoded from its format. Only `reject` is possible.",
    allowed=frozenset({"reject"}),
    default="reject",
    stage="decode",
)

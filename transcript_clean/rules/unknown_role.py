"""unknown_role (R0): a message has a role (or ShareGPT tag) the format does not know.

Found by the format's decoder, like `malformed_row`: the row has no other code.
"""

from __future__ import annotations

from typing import Final

from transcript_clean.errors import UNKNOWN_ROLE
from transcript_clean.rules.base import Rule

CODE: Final = UNKNOWN_ROLE

RULE = Rule(
    CODE,
    order=0.1,
    summary="a role or tag the format does not know",
    actions_help=(
        "R0: a message has a role (or ShareGPT tag) the format does not know. Only `reject`."
    ),
    allowed=frozenset({"reject"}),
    default="reject",
    stage="decode",
)

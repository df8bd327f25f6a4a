"""lossy_conversion: a kept row that the format asked for (`--to`) cannot hold without losing a
part of it: reasoning where the format has no place for it, an image in a format of text, a
call's arguments it cannot write.

Found when a kept row is written in the other format (`convert.py`): the row written is read
back in that format and compared with the transcript it came from; any part that does not come
back is this code, and the row is rejected rather than written without it. Only `reject`: a
conversion that drops parts silently is what the code exists to prevent. With `--to`, every row
takes the per-row path, so the fast path needs no check.
"""

from __future__ import annotations

from typing import Final

from transcript_clean.rules.base import Rule

CODE: Final = "lossy_conversion"


RULE = Rule(
    CODE,
    order=7.5,
    summary="a kept row --to cannot write whole",
    actions_help=(
        "A kept row that the format of --to cannot hold without losing a part (reasoning, an "
        "image). Only `reject`."
    ),
    allowed=frozenset({"reject"}),
    default="reject",
    stage="encode",
    enabled=lambda config: config.to is not None,
    optional=True,
)

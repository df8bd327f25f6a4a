"""unencodable_row (R7): a repaired row that cannot be written back in its format or schema.

Found when the repaired row is encoded; a row the fast path keeps is never re-encoded, and the
rows it repairs are written in the input's own Arrow type, so Arrow clears every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import numpy as np

from transcript_clean.rules.base import Rule

if TYPE_CHECKING:
    from transcript_clean.fastpath.base import ArrowView, Mask

CODE: Final = "unencodable_row"


def _never(view: ArrowView) -> Mask:
    return np.zeros(view.rows, dtype=bool)


RULE = Rule(
    CODE,
    order=7,
    summary="a repaired row no longer fits the input's Arrow schema",
    actions_help="A repaired row that no longer fits the input's Arrow schema. Only `reject`.",
    allowed=frozenset({"reject"}),
    default="reject",
    stage="encode",
    arrow={"*": _never},
)

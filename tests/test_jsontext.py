"""`jsontext`: JSON text read and written as the standard library does, faster."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from transcript_clean.jsontext import dumps

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(_VALUES.filter(lambda v: not isinstance(v, str)))
def test_dumps_writes_what_json_dumps_writes(value: Any) -> None:
    """One encoder made once writes each value as `json.dumps(value, ensure_ascii=False)`:
    NaN and infinities as `NaN` / `Infinity`, text unescaped, keys in their order."""
    assert dumps(value) == json.dumps(value, ensure_ascii=False)

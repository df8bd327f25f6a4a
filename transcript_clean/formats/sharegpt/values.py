"""What ShareGPT's turn values hold, read as its decoder reads them: the calls of a
`function_call` value, and the texts of an observation holding one JSON list for several calls.
The codec and the flattener both read values with these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from transcript_clean.formats.base import parse_arguments
from transcript_clean.jsontext import dumps, loads

__all__ = ["calls_of", "parse_call_objects", "read_calls", "split_list"]


def parse_call_objects(value: str) -> list[Any] | None:
    """The objects of a `function_call` value, or None when it is not JSON."""
    try:
        data = loads(value)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, list) else [data]


def read_calls(value: object) -> list[tuple[Any, ...]] | None:
    """What `_calls` reads from a turn's value, to tell whether calls changed since."""
    return calls_of(parse_call_objects(value) if isinstance(value, str) else None)


def calls_of(objects: list[Any] | None) -> list[tuple[Any, ...]] | None:
    """`read_calls` of a value already parsed (`parse_call_objects`): each call's name and
    `parse_arguments` of its arguments; None where a call is no object."""
    if objects is None or not all(isinstance(o, Mapping) for o in objects):
        return None
    return [(o.get("name"), *parse_arguments(o.get("arguments"))) for o in objects]


def split_list(value: object, count: int) -> list[str] | None:
    """The texts of an observation value that is a JSON list of `count` items, else None."""
    if not isinstance(value, str) or not value.lstrip().startswith("["):
        return None
    try:
        items = loads(value)
    except (ValueError, RecursionError):
        return None
    if not isinstance(items, list) or len(items) != count:
        return None
    return [i if isinstance(i, str) else dumps(i) for i in items]

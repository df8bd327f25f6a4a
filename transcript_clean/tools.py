"""The tools a row declares, and its calls checked against them (issue 17).

Every format reads its declarations the same way, from a column of the row (`tools`, and
OpenAI's legacy `functions`; `--tools-column` names another): a list, or its JSON text (as
glaive and LLaMA-Factory write it), of entries in any of the providers' shapes:

    {"type": "function", "function": {"name", "parameters"}}   OpenAI (and rig's, nested)
    {"name", "parameters"}                                     OpenAI's legacy `functions`,
                                                               LLaMA-Factory, rig's ToolDefinition
    {"name", "input_schema"}                                   Anthropic
    {"type": "custom", "custom": {"name", "format"}}           OpenAI custom tools: raw input
    {"type": "code_interpreter"}                               a built-in tool: raw input

A raw-input tool takes arguments that are not JSON by design (`code_interpreter`'s Python,
a custom tool's free text or grammar): its calls are neither `invalid_tool_arguments` nor
checked against a schema. A row without declarations is not checked at all.

Arguments are validated against a tool's parameters with `fastjsonschema` (about 8x faster
than `jsonschema` per call on the bench's calls: `scripts/bench_schemas.py`), and words for
a failure come from `jsonschema`, which also checks that a declaration's schema is one. A
simple schema (`simple_schema`: properties of scalar types, which are required), what most
tools declare, is one by its shape: a run whose tools declare only such schemas does not
import `jsonschema` (40-70 ms) until some arguments fail.
Validators are compiled once per distinct schema, cached by its canonical JSON, and each
distinct (schema, arguments) pair is checked once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import orjson

from transcript_clean.jsontext import loads

__all__ = [
    "RAW_INPUT_NAMES",
    "Declared",
    "SimpleSchema",
    "Tool",
    "arguments_error",
    "calls_per_tool",
    "canonical",
    "fast_validator",
    "json_loads",
    "read_declarations",
    "read_row_declarations",
    "simple_schema",
]

RAW_INPUT_NAMES: Final = {"code_interpreter": ("code_interpreter", "python")}
"""Built-in tools and the names their calls go by (functionary calls `code_interpreter`
`python`)."""


@dataclass(slots=True, frozen=True)
class Tool:
    """One declared tool: its name, its arguments' JSON Schema (None when it declares none, or
    when its schema is no JSON Schema), and whether it takes raw input."""

    name: str
    schema_key: str | None = None
    """The canonical JSON of its parameters schema: the key of the validator cache."""
    raw: bool = False


@dataclass(slots=True, frozen=True)
class Declared:
    """A row's declared tools by name, and the declarations that are not valid, in words."""

    tools: Mapping[str, Tool]
    problems: tuple[str, ...] = ()

    def names(self) -> list[str]:
        return sorted(self.tools)


def read_row_declarations(row: Mapping[str, Any], columns: Sequence[str]) -> Declared | None:
    """The declarations in the first of `columns` the row holds something in (OpenAI's `tools`
    before its legacy `functions`); None when it declares nothing."""
    for column in columns:
        value = row.get(column)
        if value is not None and value != "" and value != []:
            return read_declarations(value, column)
    return None


def read_declarations(value: Any, column: str = "tools") -> Declared | None:
    """A declarations value as a row holds it: a list of entries or its JSON text. None when it
    declares nothing (null, empty, `[]`)."""
    key = value if isinstance(value, str) else None
    if key is not None:
        return _read_text(key, column)
    return _read(value, column)


@lru_cache(maxsize=4096)
def _read_text(text: str, column: str) -> Declared | None:
    # Rows of one dataset mostly repeat a few declarations: each is read once.
    if not text.strip():
        return None
    try:
        value = json_loads(text)
    except ValueError:
        return Declared({}, (f"{column}: not JSON text",))
    return _read(value, column)


def _read(value: Any, column: str) -> Declared | None:
    if value is None:
        return None
    if isinstance(value, Mapping):
        value = [value]
    if not isinstance(value, list):
        return Declared({}, (f"{column}: expected a list of tools",))
    if not value:
        return None
    tools: dict[str, Tool] = {}
    problems: list[str] = []
    for place, entry in enumerate(value):
        path = f"{column}[{place}]"
        found, problem = _entry(_without_nulls(entry), path)
        if problem is not None:
            problems.append(problem)
        for tool in found:
            tools.setdefault(tool.name, tool)
    return Declared(tools, tuple(problems))


def _without_nulls(value: Any) -> Any:
    """The value with every null-valued key dropped: an Arrow struct gives every object all the
    keys its column has, null where the source had none, which no schema means."""
    if isinstance(value, Mapping):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _entry(entry: Any, path: str) -> tuple[list[Tool], str | None]:
    """The tools one declaration declares, and what is wrong with it, if anything."""
    if not isinstance(entry, Mapping):
        return [], f"{path}: expected an object"
    kind = entry.get("type")
    if kind in RAW_INPUT_NAMES and "name" not in entry:
        return [Tool(n, None, True) for n in RAW_INPUT_NAMES[kind]], None
    inner = entry.get(kind) if isinstance(kind, str) else None
    if kind == "function" or kind == "custom":
        if not isinstance(inner, Mapping):
            inner = entry  # the flat shape: {"type": "function", "name", "parameters"}
        entry = inner
    elif isinstance(entry.get("function"), Mapping):
        entry = entry["function"]
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        if isinstance(kind, str) and kind not in ("function", "custom"):
            # A built-in tool (`file_search`, `web_search`...): declared, its input its own.
            return [Tool(kind, None, True)], None
        return [], f"{path}: the tool has no name"
    if kind == "custom":
        return [Tool(name, None, True)], None
    schema = entry.get("parameters", entry.get("input_schema"))
    if schema is None:
        return [Tool(name)], None
    key = canonical(schema)
    problem = schema_problem(key)
    if problem is not None:
        return [Tool(name)], f"{path} {name!r}: its parameters are not a JSON Schema: {problem}"
    return [Tool(name, key)], None


def canonical(value: Any) -> str:
    """The canonical JSON text of a value: the cache key of a schema or of arguments."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:  # what orjson cannot write (a huge integer, a lone surrogate)
        import json

        return json.dumps(value, sort_keys=True, separators=(",", ":"))


@lru_cache(maxsize=4096)
def schema_problem(key: str) -> str | None:
    """Why the schema whose canonical JSON is `key` is no JSON Schema, or None."""
    schema = json_loads(key)
    if not isinstance(schema, dict | bool):
        return f"expected an object, got {type(schema).__name__}"
    if simple_schema(key) is not None:
        return None  # a Draft 7 schema by its shape (every simple one compiles)
    from jsonschema.exceptions import SchemaError

    try:
        _words_validator(key).check_schema(schema)
        fast_validator(key)
    except SchemaError as err:
        return err.message
    except Exception as err:  # fastjsonschema cannot compile it: its own words
        return str(err)
    return None


SimpleSchema = tuple[tuple[tuple[str, str], ...], frozenset[str]]
"""A simple schema: its typed properties (name, JSON type) and its required keys."""

_SCALARS: Final = frozenset({"string", "integer", "number", "boolean"})
_WORDS: Final = frozenset({"description", "title"})
_OBJECT_KEYS: Final = frozenset({"type", "properties", "required"}) | _WORDS


@lru_cache(maxsize=1024)
def simple_schema(key: str) -> SimpleSchema | None:
    """The schema whose canonical JSON is `key`, if it is simple: an object's properties, each
    of a JSON scalar type (`string`, `integer`, `number`, `boolean`) or of any, which keys are
    required (each once), titles and descriptions (text); else None. Such a schema is a valid
    Draft 7 one (`schema_problem`), and the declared-tools checks tell arguments against it
    without the compiled validator (`fastpath.struct_schemas`)."""
    schema = json_loads(key)
    if not _simple_node(schema, _OBJECT_KEYS) or schema.get("type", "object") != "object":
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required) or len(set(required)) < len(required):
        return None
    typed = []
    for name, sub in properties.items():
        if not _simple_node(sub, {"type"} | _WORDS):
            return None
        if "type" not in sub:
            continue  # any value passes
        if not isinstance(sub["type"], str) or sub["type"] not in _SCALARS:
            return None
        typed.append((name, sub["type"]))
    return tuple(typed), frozenset(required)


def _simple_node(node: Any, keys: Iterable[str]) -> bool:
    """Whether `node` is an object of no other keys than `keys`, its words (a title, a
    description) text."""
    if not isinstance(node, dict) or not set(node) <= set(keys):
        return False
    return all(isinstance(node[word], str) for word in _WORDS if word in node)


@lru_cache(maxsize=1024)
def fast_validator(key: str) -> Any:
    import fastjsonschema

    return fastjsonschema.compile(json_loads(key))


@lru_cache(maxsize=1024)
def _words_validator(key: str) -> Any:
    from jsonschema import Draft7Validator
    from jsonschema.validators import validator_for

    schema = json_loads(key)
    # Draft 7 unless the schema names its own: what fastjsonschema assumes too.
    return validator_for(schema, default=Draft7Validator)(schema)


def arguments_error(schema_key: str, arguments: Any) -> str | None:
    """The first error of `arguments` against the schema whose canonical JSON is
    `schema_key`, in words, or None when they validate."""
    return _arguments_error(schema_key, canonical(arguments))


@lru_cache(maxsize=65536)
def _arguments_error(schema_key: str, arguments_key: str) -> str | None:
    import fastjsonschema
    from jsonschema.exceptions import best_match

    arguments = json_loads(arguments_key)
    try:
        fast_validator(schema_key)(arguments)
        return None
    except fastjsonschema.JsonSchemaValueException:
        pass
    error = best_match(_words_validator(schema_key).iter_errors(arguments))
    # Where the two disagree, jsonschema's reading (the reference) stands.
    return None if error is None else str(error.message)


def json_loads(text: str) -> Any:
    """`json.loads(text)`, faster (`jsontext.loads`: a huge integer read exactly)."""
    return loads(text)


def calls_per_tool(names: Iterable[str]) -> dict[str, int]:
    """How many calls each tool had."""
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return counts

"""The dataset card: the README.md of a cleaned dataset (SPEC section 7).

Its YAML header is the Hub's own card data (`huggingface_hub.DatasetCardData`): the licence,
the size category, the shards in data/ as the `default` config's train split and those in
rejects/ as the `rejects` config's, and the columns' features, for the Hub and `datasets`.
Every text that comes from the data goes through `transcript_clean.markdown`, so that no tool
or file name can become markup when the card is rendered.

The header is written here as `DatasetCardData.to_yaml()` writes it (PyYAML's block style), for
headers whose every text is a plain scalar; any other header is the Hub's own. A run then
imports neither `huggingface_hub` nor `yaml` (nor the `filelock` the Hub brings): about a tenth
of a small run's wall time (docs/performance.md). `tests/test_card.py` holds the two to each
other on drawn headers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from transcript_clean.markdown import code, printable
from transcript_clean.stats import render_table

if TYPE_CHECKING:
    import pyarrow as pa

SIZE_CATEGORIES = (
    (1_000, "n<1K"),
    (10_000, "1K<n<10K"),
    (100_000, "10K<n<100K"),
    (1_000_000, "100K<n<1M"),
    (10_000_000, "1M<n<10M"),
    (100_000_000, "10M<n<100M"),
    (1_000_000_000, "100M<n<1B"),
)
"""The Hub's size categories up to a billion rows, each with the row count it stays below."""


def dataset_card(
    summary: Mapping[str, Any],
    records: list[dict[str, Any]],
    data_files: str = "data/*.parquet",
    schema: pa.Schema | None = None,
) -> str:
    """The README.md of a cleaned dataset: what was cleaned, how, and the stats table.
    `data_files` is the shards' glob, which tells `datasets` how to read them (the rejects'
    is the same in rejects/); `schema`, the data shards', gives the features."""
    counts = summary["counts"]
    return printable(f"""---
{header_yaml(card_header(summary, data_files, schema))}
---

# Cleaned conversations

Cleaned by [transcript-clean](https://pypi.org/project/transcript-clean/)
{summary["versions"]["transcript_clean"]} from {code(summary["source"])} (format
{code(summary["format"])}, config {code(summary["config"]["name"])}).

Every row was decoded to the canonical transcript model; empty assistant turns were dropped;
each row was validated (consecutive assistant messages, unanswered tool calls, orphan tool results,
tool arguments that are not a JSON object) and repaired or rejected as the config says. Every kept
row passes validation. Rejected rows are in `rejects/` (the `rejects` config, when there are
any), as they came in, with their codes. The licence is the source's: `unknown` above until
it is set.

{_conversion(summary)}{_arguments(summary)}{_interrupted(summary, records)}| | rows |
|---|---:|
| in | {counts["rows_in"]:,} |
| kept | {counts["rows_kept"]:,} |
| of which repaired | {counts["rows_repaired"]:,} |
| rejected | {counts["rows_rejected"]:,} |

Messages in: {counts["messages_in"]:,}; messages out: {counts["messages_out"]:,}; empty assistant
turns dropped: {counts["empty_turns_dropped"]:,}.

## Error stats

{render_table(records, markdown=True) if records else "No violations were found."}
{tools_section(summary.get("tools"))}{profile_section(summary.get("profile"))}
Input fingerprint: `{summary["fingerprint"]}`.
""")


def card_header(
    summary: Mapping[str, Any], data_files: str, schema: pa.Schema | None
) -> dict[str, Any]:
    """The card's YAML header as the Hub's `DatasetCardData(**header).to_dict()` gives it: the
    `rejects` config only when there are rejects."""
    globs = {"default": data_files}
    if summary["counts"]["rows_rejected"]:  # `datasets` fails on a config of no rows
        globs["rejects"] = "rejects/" + data_files.removeprefix("data/")
    configs = [
        {"config_name": name, "data_files": [{"split": "train", "path": path}]}
        for name, path in globs.items()
    ]
    header: dict[str, Any] = {
        "license": "unknown",  # the source's, which a run does not know
        "size_categories": [size_category(summary["counts"]["rows_kept"])],
        "configs": configs,
    }
    features = None if schema is None else schema_features(schema)
    if features is not None:
        header["dataset_info"] = {"features": features}
    return header


def header_yaml(header: Mapping[str, Any]) -> str:
    """`header` as `DatasetCardData(**header).to_yaml()` writes it: by `block_yaml` when every
    text in it is plain, else by the Hub's own code."""
    text = block_yaml(header)
    if text is not None:
        return text
    from huggingface_hub import DatasetCardData

    return str(DatasetCardData(**header).to_yaml())


_PLAIN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_./*<>\[\]-]*")
"""Texts PyYAML writes as they are, unquoted, when no implicit type reads them: ASCII, with
none of YAML's indicators at the start, no `:`, `#`, space or comma anywhere."""

_IMPLICIT: Final = {"yes", "no", "true", "false", "on", "off", "null"}
"""Words that PyYAML reads as a boolean or null (in some cases: any case is left to it)."""

_PLAIN_CATEGORIES: Final = {name for _, name in SIZE_CATEGORIES} | {"n>1B"}
"""The size categories, plain for PyYAML though some start with a digit."""


class _NotPlain(Exception):
    """A header `block_yaml` does not write: the Hub's code writes it."""


def block_yaml(header: Mapping[str, Any]) -> str | None:
    """`header`, a mapping of texts, lists and mappings, in PyYAML's block style as
    `yaml.dump(header, sort_keys=False, allow_unicode=True).strip()` writes it; None when a
    text is not plain (`_PLAIN`) or a value is of another kind."""
    lines: list[str] = []
    try:
        _block_mapping(header, 0, "", lines)
    except _NotPlain:
        return None
    return "\n".join(lines)


def _block_mapping(mapping: Mapping[str, Any], indent: int, lead: str, lines: list[str]) -> None:
    """Each `key: value` at `indent`; the first after `lead` (`- ` of a list's item) if any."""
    if not mapping:
        raise _NotPlain
    for i, (key, value) in enumerate(mapping.items()):
        head = (lead if i == 0 and lead else " " * indent) + _plain(key) + ":"
        if isinstance(value, str):
            lines.append(f"{head} {_plain(value)}")
        elif isinstance(value, list) and not value:
            lines.append(head + " []")
        elif isinstance(value, list):  # a list in a mapping is not indented
            lines.append(head)
            _block_sequence(value, indent, lines)
        elif isinstance(value, Mapping) and value:
            lines.append(head)
            _block_mapping(value, indent + 2, "", lines)
        else:
            raise _NotPlain


def _block_sequence(items: list[Any], indent: int, lines: list[str]) -> None:
    lead = " " * indent + "- "
    for item in items:
        if isinstance(item, str):
            lines.append(lead + _plain(item))
        elif isinstance(item, Mapping):
            _block_mapping(item, indent + 2, lead, lines)
        else:
            raise _NotPlain


def _plain(text: Any) -> str:
    if not isinstance(text, str):
        raise _NotPlain
    if text in _PLAIN_CATEGORIES:
        return text
    if _PLAIN.fullmatch(text) is None or text.lower() in _IMPLICIT:
        raise _NotPlain
    return text


def size_category(rows: int) -> str:
    """The Hub's size category of a split of `rows` rows."""
    return next((name for below, name in SIZE_CATEGORIES if rows < below), "n>1B")


def schema_features(schema: pa.Schema) -> list[dict[str, Any]] | None:
    """The columns as the card's `features` (the form `datasets` writes), or None when a type
    has no such form (a map, a union): no features is better than wrong ones."""
    try:
        return [{"name": f.name, **_feature(f.type)} for f in schema]
    except TypeError:
        return None


_DTYPES = {"bool": "bool", "halffloat": "float16", "float": "float32", "double": "float64"}


def _feature(t: pa.DataType) -> dict[str, Any]:
    """`{"dtype": ...}`, `{"list": ...}`, `{"large_list": ...}` or `{"struct": [...]}`."""
    import pyarrow as pa

    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.json":
            return {"dtype": "json"}
        return _feature(t.storage_type)
    if pa.types.is_dictionary(t):
        return _feature(t.value_type)
    if pa.types.is_struct(t):
        return {"struct": [{"name": f.name, **_feature(f.type)} for f in t]}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        kind = "list" if pa.types.is_list(t) else "large_list"
        inner = _feature(t.value_type)
        ((key, value),) = inner.items()
        return {kind: value if key in ("dtype", "struct") else inner}
    if pa.types.is_map(t) or pa.types.is_union(t) or pa.types.is_fixed_size_list(t):
        raise TypeError(f"no features for {t}")
    return {"dtype": _DTYPES.get(str(t), str(t))}


def tools_section(tools: Mapping[str, Any] | None) -> str:
    """The card's tools section: the tools rows declare, the calls per tool, and the
    declared-tools codes; nothing when no row declares its tools."""
    if not tools or not tools["rows_declaring_tools"]:
        return ""
    table = tools["table"]
    lines = [
        "",
        "## Declared tools",
        "",
        f"{tools['rows_declaring_tools']:,} rows declare their tools, "
        f"{tools['distinct_tools']:,} distinct tools. Calls per tool (the most called first):",
        "",
        "| tool | calls | rows declaring it |",
        "|---|---:|---:|",
    ]
    for name, calls, declaring in table["tools"]:
        lines.append(f"| {code(name)} | {calls:,} | {declaring:,} |")
    other = table["other"]
    if other["tools"]:
        lines.append(
            f"| other ({other['tools']:,} tools) | {other['calls']:,} | {other['declarations']:,} |"
        )
        lines += ["", "`other` sums the rest: a row that declares two of them counts twice."]
    lines += ["", "Rows with each declared-tools code:", ""]
    lines += [f"- `{name}`: {rows:,}" for name, rows in tools["codes"].items()]
    return "\n".join(lines) + "\n"


def profile_section(profile: Mapping[str, Any] | None) -> str:
    """The card's profile: what the rows are, as they came in (`transcript_clean.profile`)."""
    if not profile:
        return ""
    lines = [
        "",
        "## Profile",
        "",
        f"Of {profile['rows']:,} rows in, {profile['rows_measured']:,} were read; "
        f"{100 * profile['system_share']:.2f}% have a system message. Quantiles are exact below "
        f"{profile['exact_below']} and within {100 * profile['relative_error']:g}% above.",
        "",
        "| distribution | count | mean | p5 | p50 | p95 | max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for where, section in (("row", "per_row"), ("assistant turn", "per_assistant_turn")):
        for name, d in profile[section].items():
            lines.append(
                f"| {name} per {where} | {d['count']:,} | {d['mean']:,.1f} | {d['p5']:,} | "
                f"{d['p50']:,} | {d['p95']:,} | {d['max']:,} |"
            )
    lines += ["", "| assistant turns | turns | share |", "|---|---:|---:|"]
    for name, n in profile["turns"].items():
        lines.append(f"| {name} | {n:,} | {100 * profile['turn_shares'][name]:.2f}% |")
    if profile["calls_per_tool"]:
        calls = ", ".join(f"{code(name)} {n:,}" for name, n in profile["calls_per_tool"].items())
        lines += ["", f"Calls per tool: {calls}."]
    return "\n".join(lines) + "\n"


def _conversion(summary: Mapping[str, Any]) -> str:
    """What `--to` did, where it was given: a paragraph before the counts."""
    to = summary.get("to")
    if to is None:
        return ""
    kind = summary.get("type", "conversation")
    what = (
        "each row's transcript, after cleaning"
        if kind == "conversation"
        else f"each {kind} row in TRL's layout of it (`prompt`, then each candidate after the "
        "prompt as its own column), after cleaning"
    )
    return (
        f"The kept rows were written in the {code(to)} format (`--to`): {what}, encoded as "
        f"{code(to)}, its declared tools in the `tools` column; the source's other columns are "
        "kept as they were. A row that format cannot hold whole (reasoning with no place in "
        "it, an image) was rejected as `lossy_conversion`, never written with a part missing."
        "\n\n"
    )


def _interrupted(summary: Mapping[str, Any], records: list[dict[str, Any]]) -> str:
    """How R5 repaired unanswered calls, where it repaired any: a paragraph before the counts."""
    from transcript_clean.formats import get_format
    from transcript_clean.policy import interrupted_words
    from transcript_clean.rules import TRAILING_TOOL_CALL, UNANSWERED_TOOL_CALL

    codes = (UNANSWERED_TOOL_CALL, TRAILING_TOOL_CALL)
    if not any(r["code"] in codes and r["action"] == "repaired" for r in records):
        return ""
    how = summary.get("config", {}).get("repair", {}).get("interrupted_call", "cut")
    words = interrupted_words(how, get_format(summary["format"]))
    return f"Unanswered tool calls were repaired (R5): {words}.\n\n"


def _arguments(summary: Mapping[str, Any]) -> str:
    """How the kept rows' calls' arguments are written (`--arguments-as`), where it was given
    to rows that take a form."""
    form = summary.get("arguments_written")
    if form is None:
        return ""
    template = summary.get("config", {}).get("chat_template", "")
    how = (
        "JSON objects (in Parquet, typed as JSON: `datasets` reads each back as the object it is)"
        if form == "object"
        else "JSON text"
    )
    return (
        f"Calls' arguments are written as {how}, the form the chat template "
        f"{code(str(template))} was rendered with (`--arguments-as`).\n\n"
    )

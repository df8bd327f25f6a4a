"""What every format module provides: a decoder to the canonical model and an encoder back."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from transcript_clean.errors import MALFORMED_ROW, UNKNOWN_ROLE, TranscriptCleanError
from transcript_clean.jsontext import strict_loads
from transcript_clean.model import (
    AssistantMessage,
    Encrypted,
    Message,
    Reasoning,
    ReasoningPiece,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.tools import Declared, read_row_declarations

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from transcript_clean.columnar.arrays import Counts, Mask
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits, Merges

Row = dict[str, Any]
"""One dataset row as Python values: column name -> value (what `pyarrow` `to_pylist` gives)."""


class DecodeError(TranscriptCleanError):
    """A row its format cannot read. Not a crash: the cleaner rejects the row with `code`.

    `path` names the field (`messages[3].tool_calls[0].function`); `str(err)` is
    `path: what is wrong`, e.g. `messages[3].tool_calls[0].function: missing "name"`.
    """

    def __init__(self, code: str, path: str, problem: str) -> None:
        self.code = code
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


@dataclass(slots=True)
class Decoded:
    """A decoded row: its canonical messages and what the encoder needs to write it back."""

    messages: list[Message]
    row: Row
    minted: frozenset[str] = field(default_factory=frozenset)
    """Call ids the decoder made up from positions; the encoder never writes them back."""
    format: str | None = None
    """The name of the format that decoded the row. Another format's encoder ignores the
    messages' `origin` (source objects of a different shape) and writes them fresh."""


ArgumentsForm = Literal["object", "string"]
"""How calls' arguments are written (`--arguments-as`): JSON values, or JSON text."""


class Format:
    """A conversation format. Subclasses set `name` and `default_column` and implement the rest.

    `decode` never raises anything but `DecodeError`; `encode(decode(row))` rebuilds `row`,
    value for value, keys it does not use included (they travel in the parts' `origin`).
    """

    name: ClassVar[str]
    default_column: ClassVar[str]
    joins_text: ClassVar[bool] = True
    """Whether an assistant message's content is one string, so merged texts join with a blank
    line (SPEC R4)."""
    tools_columns: ClassVar[tuple[str, ...]] = ("tools",)
    """The columns a row declares its tools in: the first that holds something is read."""
    tools_column: str | None = None
    """A column named by `--tools-column`, read in place of `tools_columns`."""
    plain_text: bool = False
    """Whether the conversation column holds plain text, never JSON text to parse first (hh's
    transcripts, Alpaca's strings; a dataset type reads its parts' JSON text itself)."""
    agent_trace: bool = False
    """Whether the rows are an agent loop's own record (Claude Code sessions, OpenHands
    trajectories), whose loop answers a call it interrupted with an error result: there, R5's
    `[repair] interrupted_call = "auto"` writes that result (`policy.for_format`) rather than
    cutting the transcript."""
    words: str | None = None
    """What the format understands of a row, for the "reading X as ..." line, where its name
    alone does not say it (Hermes: calls as tags inside the assistant's text; OpenAI rows with
    other role names: the names it reads as which role)."""

    def __init__(self, column: str | None = None) -> None:
        self.column = column or self.default_column

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        raise NotImplementedError

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        """The row with its conversation (and any column the format reads, such as `system`)
        rewritten from `messages`; every other column unchanged."""
        raise NotImplementedError

    def written_schema(self, schema: pa.Schema) -> pa.Schema | None:
        """The schema kept rows of `schema` are written in, where it is not `schema` (then
        every kept row is written anew: `convert.ConvertingFormat`, calls' arguments as
        objects in a column typed as text); None: the input's."""
        return None

    def with_arguments(self, form: ArgumentsForm) -> Format | None:
        """This format writing every call's arguments in `form`, or None where the format has
        one form of its own (Anthropic's `input` is an object, ShareGPT's calls are text)."""
        return None

    def message_count(self, row: Mapping[str, Any]) -> int:
        """How many messages the row holds, for the stats: its conversation column's items (a
        format of plain strings counts what its decoder reads)."""
        value = row.get(self.column)
        return len(value) if isinstance(value, list) else 0

    def message_counts(self, table: pa.Table) -> npt.NDArray[np.int64]:
        """Per row of a batch, its messages as `message_count` counts them (for the stats of
        the rows the fast path settles)."""
        import pyarrow.compute as pc

        column = table.column(self.column)
        counts: npt.NDArray[np.int64] = pc.fill_null(pc.list_value_length(column), 0).to_numpy()
        return counts

    def settled_message_counts(self, conversations: Conversations) -> Counts | None:
        """Per row of the batch `conversations` was flattened from, its messages as
        `message_counts` counts them, for the rows the fast path settles, read from the view
        (a format whose messages are what its flattener splits, not its column's items): so
        the batch is not read again to count them. None: `message_counts` counts them."""
        return None

    def declared_tools(self, row: Mapping[str, Any]) -> Declared | None:
        """The tools the row declares (`transcript_clean.tools`); None when it declares none."""
        return read_row_declarations(row, self.declaring_columns)

    def declaration_entries(self, row: Mapping[str, Any]) -> list[Any] | None:
        """The row's declarations as a list of entries, where the format keeps them somewhere
        other than a column of its own (OpenHands: in the trajectory's `system` event); None
        where they are in `declaring_columns`, as with most formats."""
        return None

    @property
    def declaring_columns(self) -> tuple[str, ...]:
        return (self.tools_column,) if self.tools_column else self.tools_columns

    side_columns: ClassVar[tuple[str, ...]] = ()
    """The batch's other columns the decoder reads (and the encoder writes) with the
    conversation, besides the declarations (a `system` column): what the fast path hands the
    flattener beside it, where the batch has them; a row written in another format (`--to`)
    leaves them out."""

    def side(self, table: pa.Table) -> dict[str, pa.Array]:
        """The batch's columns of `side_columns` that it has, each in one chunk: what `flatten`
        is handed beside the conversation column."""
        from transcript_clean.columnar.arrays import whole

        names = table.schema.names
        return {n: whole(table.column(n)) for n in self.side_columns if n in names}

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        """A batch's conversation column as the columnar view every format flattens into
        (`transcript_clean.columnar`): what the decoder would make of each row, for the rules'
        Arrow checks; rows it cannot read so are marked unread. `side` holds the batch's columns
        of `side_columns` that it has. None when this format, or this column's Arrow type, has
        no flattener."""
        return None

    reads_json_leaves: ClassVar[bool] = False
    """Whether `flatten` refuses by itself (None) a column holding `pa.json_()` fields where
    the decoder reads (such a field holds values of several types, which a flattener would not
    read as the decoder does), so that a column holding them only where the decoder does not
    look (OpenHands' `args.outputs`, a tool's `parameters`) is flattened still; for any other
    format, the fast path leaves every column holding one to the per-row path."""

    merged_field: ClassVar[str | None] = None
    """The field of a message's item that holds what it says, where R4's merges are written
    (`columnar.edits.write_merged`: the texts joined where it is text, ShareGPT's `value`; the
    parts appended where it is a list, rig's `content`); None where `write` writes no merges
    (rows whose repair merges messages take the per-row path)."""

    def merges_join_texts(self, column: pa.Array) -> bool | None:
        """How `write` writes R4's merges (`Edits.merges`) in `column`: by joining texts (True:
        only a message that is one text grows, `consecutive_assistant.merges` with
        `plain_first`), by appending parts (False), or not at all (None: rows whose repair
        merges messages take the per-row path). From `merged_field`, unless a format writes
        merges in a layout of its own (an agent trace's events)."""
        if self.merged_field is None:
            return None
        from transcript_clean.columnar.edits import joins_texts

        return joins_texts(column, self.merged_field)

    def unmerged(
        self, column: pa.Array, conversations: Conversations, merges: Merges
    ) -> Mask | None:
        """Per row of `column`, whether `write` cannot write the merges `merges` makes there as
        `encode` does (a row where the encoder moves other events too): those rows' merges are
        left to the per-row path. None: it writes them all."""
        return None

    renders_messages: ClassVar[bool] = False
    """Whether `write` writes a repaired row anew from its kept messages, whatever its layout
    (hh's transcripts, one text rendered as the encoder renders it): messages dropped (R1, R5's
    cut) and merged (R4) are then written in Arrow as for a flattener that gives
    `item_message`."""

    edits_lines: ClassVar[bool] = False
    """Whether a JSON Lines row's line is its conversation's items, each written by the encoder
    as it came in but for the text a merge sets in `merged_field` (OpenAI's messages): then a
    line repaired in Arrow is its line with the edits made (`pipeline.lines`), not the row
    re-encoded."""

    edits_line_value: ClassVar[bool] = False
    """Whether a JSON Lines row's repaired line is its line with the conversation column's value
    set to the one `write` wrote, the rest as it came (the encoder writes nothing else: hh's one
    text): then a line repaired in Arrow is edited so (`pipeline.lines`), not re-encoded."""

    writes_results: ClassVar[bool] = False
    """Whether `write` writes results made by a repair (R5's error result) into the messages
    `result_holders` gives; False: rows whose repair makes one take the per-row path."""

    def result_holders(
        self, column: pa.Array, conversations: Conversations, messages: Counts
    ) -> Mask | None:
        """Of the messages at `messages` (positions in `conversations`, the view of `column`),
        whether `write` writes a result made by a repair (R5's error result,
        `columnar.edits.Inserts`) as `encode` does:
        for a user message, into it after the results it opens with; for an assistant message,
        as a new user message right after it. None: it writes none in this column (those rows
        take the per-row path). Read only where `writes_results`."""
        return None

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        """The rows of `edits` (a batch's conversation column, as the flattener read it, and
        what the repairs change over its `Conversations`) written anew in this format's own
        layout, as `encode` writes the repaired rows; None where it cannot (those rows then
        take the per-row path): whole items dropped, for a flattener that gives
        `item_message`, and merges into `merged_field`. A format that writes new results
        (`result_holders`) overrides it."""
        if edits.conversations.item_message is None or edits.inserting:
            return None
        if edits.answers is not None and len(edits.answers.result):
            return None  # results written anew: a format that writes them says so
        from transcript_clean.columnar.edits import write_merged, written

        if edits.merges is None or not edits.merges.joined.any():
            return written(column, edits)
        if self.merged_field is None:
            return None
        return write_merged(column, edits, self.merged_field)

    def unwritten(self, roles: Sequence[str]) -> str | None:
        """Why `encode` cannot write a transcript whose turns (the system prompt aside) have
        these roles (`user`, `assistant`), in its words, or None where it can or cannot tell:
        what lets the fast path reject, as the per-row path does, a row that R1 would leave
        unwritable (the string formats that hold alternating pairs)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(column={self.column!r})"


# ---------------------------------------------------------------------------------------------
# helpers the format modules share: reading a row without letting anything but DecodeError out,
# and writing values back so that an unchanged value leaves the source object as it was


class _Missing:
    """The value of a key a source object does not have (unlike None, which it may hold)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

TEXT_JOINER = "\n\n"
"""What joins several text parts written into a format whose content is one string (SPEC R4)."""


def join_texts(texts: Iterable[str]) -> str:
    """The texts joined with a blank line, leaving out the blank ones (white space only): a
    blank side adds nothing a reader could use, so it must not add a blank line either (a
    reasoning turn's `""` merged with "It is 4." is "It is 4."). All blank: joined as they are,
    so that one text is always itself."""
    texts = list(texts)
    said = [text for text in texts if text.strip()]
    return TEXT_JOINER.join(said) if said else "".join(texts)


def kind_of(value: object) -> str:
    """How an error message names the type of a JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def malformed(path: str, problem: str) -> DecodeError:
    return DecodeError(MALFORMED_ROW, path, problem)


"""`rules.unknown_role`'s code, named here so that a codec reports it without importing the
rules above it (a test holds the two equal)."""


def unknown_role(path: str, problem: str) -> DecodeError:
    return DecodeError(UNKNOWN_ROLE, path, problem)


def expect_object(value: object, path: str) -> Mapping[str, Any]:
    if type(value) is dict:  # the common case, without the cost of an ABC check
        return value
    if not isinstance(value, Mapping):
        raise malformed(path, f"expected an object, got {kind_of(value)}")
    return value


def expect_list(value: object, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise malformed(path, f"expected a list, got {kind_of(value)}")
    return value


def required_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    """`obj[key]`, a string; a missing key and None are both `missing`."""
    value = obj.get(key)
    if value is None:
        raise malformed(path, f'missing "{key}"')
    if not isinstance(value, str):
        raise malformed(f"{path}.{key}", f"expected a string, got {kind_of(value)}")
    return value


def optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise malformed(f"{path}.{key}", f"expected a string or null, got {kind_of(value)}")
    return value


def parse_arguments(value: object) -> tuple[Any, str | None]:
    """`(arguments, raw_arguments)` of a call: a string is kept verbatim as the raw arguments and
    parsed when it is strict JSON (else None: `strict_loads`); any other value is the arguments
    themselves."""
    if not isinstance(value, str):
        return value, None
    try:
        return strict_loads(value), value
    except (ValueError, RecursionError):
        return None, value


def put(out: dict[str, Any], key: str, value: Any) -> None:
    """Sets `out[key] = value` unless it already holds it; a missing key holds None, so writing
    None leaves a missing key missing (and an unchanged value leaves the source as it was)."""
    if out.get(key) != value:
        out[key] = value


class IdMinter:
    """Makes up stable call ids from positions for a row whose source has none.

    `taken` is called once, at the first mint, for the ids the row really holds, so that a
    minted id never collides with one of them.
    """

    __slots__ = ("_taken", "_used", "minted")

    def __init__(self, taken: Callable[[], Iterable[str]]) -> None:
        self._taken = taken
        self._used: set[str] | None = None
        self.minted: set[str] = set()

    def __call__(self, base: str) -> str:
        if self._used is None:
            self._used = set(self._taken())
        minted = base
        while minted in self._used:
            minted += "_"
        self._used.add(minted)
        self.minted.add(minted)
        return minted


def without_origins(messages: Sequence[Message]) -> list[Message]:
    """The messages with every `origin` dropped, for an encoder writing another format's rows."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append(SystemMessage(message.content))
        elif isinstance(message, UserMessage):
            out.append(UserMessage(tuple(_bare(p) for p in message.content)))
        else:
            out.append(AssistantMessage(tuple(_bare(p) for p in message.content), message.id))
    return out


def _bare(part: Any) -> Any:
    if isinstance(part, ToolResult):
        return replace(part, content=tuple(_bare(p) for p in part.content), origin=None)
    if isinstance(part, Text | ToolCall):
        return replace(part, origin=None)
    return part


# ---------------------------------------------------------------------------------------------
# reasoning fields of an assistant message (SPEC section 8)

REASONING_KEYS: Final = ("reasoning_content", "reasoning", "thinking")
"""Where providers and chat templates put an assistant message's reasoning: DeepSeek and vLLM
`reasoning_content`, several providers' APIs `reasoning` (a string, or an object with `text` /
`summary`), gpt-oss and Hugging Face chat templates `thinking`."""


def read_reasoning(obj: Mapping[str, Any], path: str) -> list[Reasoning]:
    """The reasoning parts of an assistant message object, one per field it holds."""
    parts = []
    for key in REASONING_KEYS:
        value = obj.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            parts.append(Reasoning((ReasoningText(value),)))
        elif key == "reasoning" and isinstance(value, Mapping):
            parts.append(Reasoning(tuple(_reasoning_pieces(value, f"{path}.{key}"))))
        else:
            expected = "a string, an object or null" if key == "reasoning" else "a string or null"
            raise malformed(f"{path}.{key}", f"expected {expected}, got {kind_of(value)}")
    return parts


def _reasoning_pieces(value: Mapping[str, Any], path: str) -> list[ReasoningPiece]:
    """`{text, summary, encrypted_content}` as providers send a reasoning object; a summary is
    a string or a list of strings or `{text}` objects."""
    pieces: list[ReasoningPiece] = []
    text = optional_str(value, "text", path)
    if text is not None:
        pieces.append(ReasoningText(text))
    summary = value.get("summary")
    items = summary if isinstance(summary, list) else [] if summary is None else [summary]
    for k, item in enumerate(items):
        if isinstance(item, Mapping):
            item = required_str(item, "text", f"{path}.summary[{k}]")
        if not isinstance(item, str):
            raise malformed(f"{path}.summary[{k}]", f"expected text, got {kind_of(item)}")
        pieces.append(ReasoningText(item, "summary"))
    encrypted = optional_str(value, "encrypted_content", path)
    if encrypted is not None:
        pieces.append(Encrypted(encrypted))
    return pieces


def write_reasoning(
    out: dict[str, Any], parts: Sequence[Reasoning], origin: Mapping[str, Any] | None
) -> None:
    """Writes an assistant message's reasoning back into `out` (a copy of `origin`): as it was
    when unchanged, each in its own field; else the texts joined into the first field the
    message had (`reasoning_content` for a fresh one), its other fields emptied."""
    try:
        was = read_reasoning(origin, "message") if origin is not None else []
    except DecodeError:
        was = []
    if list(parts) == was:
        return
    keys = [k for k in REASONING_KEYS if out.get(k) is not None]
    for key in keys:
        out[key] = None
    if parts:
        texts = (x.text for r in parts for x in r.content if isinstance(x, ReasoningText))
        out[(keys or ["reasoning_content"])[0]] = join_texts(texts)

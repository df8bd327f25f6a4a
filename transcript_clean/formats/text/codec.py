"""Codecs of conversations held as plain strings (the package doc names them).

Each reads its strings into canonical messages (a user turn and an assistant turn per pair, a
system prompt where the row has one) and writes a repaired conversation back into the same
columns: a row with nothing to repair is written as it came, byte for byte. A conversation
the columns cannot hold (two user turns in a row, a reasoning part) raises, which the cleaner
rejects as `unencodable_row`; `--to` writes such rows as `messages` instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from transcript_clean.formats.base import (
    Decoded,
    Format,
    Row,
    expect_object,
    join_texts,
    kind_of,
    malformed,
    put,
)
from transcript_clean.formats.text.hh import (
    parse_guanaco,
    parse_hh,
    render_guanaco,
    render_hh,
)
from transcript_clean.model import (
    AssistantMessage,
    Message,
    SystemMessage,
    Text,
    UserMessage,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from transcript_clean.columnar.arrays import Counts
    from transcript_clean.columnar.conversations import Conversations
    from transcript_clean.columnar.edits import Edits

__all__ = [
    "AlpacaFormat",
    "CompletionFormat",
    "DollyFormat",
    "GuanacoFormat",
    "HHFormat",
    "PairsFormat",
    "QueryResponseFormat",
    "turn_texts",
]


def _user(text: str) -> UserMessage:
    return UserMessage((Text(text),))


def _assistant(text: str) -> AssistantMessage:
    return AssistantMessage((Text(text),))


def turn_texts(messages: Sequence[Message], where: str) -> list[tuple[str, str]]:
    """The messages as (role, text), for a layout of plain strings: a system prompt is
    `("system", text)`; any part but text raises `ValueError` naming it and `where`."""
    out = []
    for message in messages:
        if isinstance(message, SystemMessage):
            out.append(("system", message.content))
            continue
        role = "user" if isinstance(message, UserMessage) else "assistant"
        texts = []
        for part in message.content:
            if not isinstance(part, Text):
                what = type(part).__name__.lower()
                raise ValueError(f"a {what} part has no place in {where}")
            texts.append(part.text)
        out.append((role, join_texts(texts)))
    return out


def _pairs(turns: list[tuple[str, str]], where: str) -> list[tuple[str, str]]:
    """(user, assistant) pairs of turns that alternate, a user turn first."""
    problem = unpaired([role for role, _ in turns], where)
    if problem is not None:
        raise ValueError(problem)
    return [(turns[k][1], turns[k + 1][1]) for k in range(0, len(turns), 2)]


def unpaired(roles: Sequence[str], where: str) -> str | None:
    """Why turns of these roles are not pairs of a user and an assistant turn (`where` names
    the layout), or None where they are."""
    if len(roles) % 2 == 0 and all(
        role == ("user" if k % 2 == 0 else "assistant") for k, role in enumerate(roles)
    ):
        return None
    said = " ".join(roles) or "no turn"
    return f"{where} hold pairs of a user and an assistant turn, not: {said}"


def _text(row: Mapping[str, Any], key: str, *, required: bool = True) -> str | None:
    value = row.get(key)
    if value is None:
        if required:
            raise malformed(key, "missing")
        return None
    if not isinstance(value, str):
        raise malformed(key, f"expected a text, got {kind_of(value)}")
    return value


class _TextFormat(Format):
    """What the string formats share: their messages counted as the decoder reads them."""

    plain_text = True

    def message_count(self, row: Mapping[str, Any]) -> int:
        from transcript_clean.formats.base import DecodeError

        try:
            return len(self.decode(row).messages)
        except DecodeError:
            return 0

    def settled_message_counts(self, conversations: Conversations) -> Counts | None:
        """The messages the flattener splits each row into: the decoder's, for a row it reads;
        none for a row it does not, which the fast path settles only by rejecting it while
        decoding (0 messages, as `message_count` counts it)."""
        import numpy as np

        c = conversations
        counts: Counts = np.bincount(c.message_row, minlength=c.rows).astype(np.int64)
        return counts


class HHFormat(_TextFormat):
    """One column of `\\n\\nHuman: ... \\n\\nAssistant: ...` transcripts (hh-rlhf)."""

    name = "hh"
    default_column = "text"
    words = "one text of Human: / Assistant: turns"
    markers: ClassVar[str] = "Human: / Assistant:"
    fresh_lead: ClassVar[str] = "\n\n"
    renders_messages = True
    edits_line_value = True

    @staticmethod
    def parse(text: str) -> list[tuple[str, str]]:
        return parse_hh(text)

    @staticmethod
    def render(turns: list[tuple[str, str]], lead: str) -> str:
        return render_hh(turns, lead=lead)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.text.hh_flatten import flatten_hh

        return flatten_hh(column)

    def merges_join_texts(self, column: pa.Array) -> bool | None:
        return True  # a turn is one text: R4 joins the texts

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        """The repaired rows rendered anew from the turns they keep (`hh_flatten.write_hh`)."""
        if edits.inserting or (edits.answers is not None and len(edits.answers.result)):
            return None  # (a transcript has no calls: never asked)
        from transcript_clean.formats.text.hh_flatten import write_hh

        return write_hh(column, edits)

    def message_counts(self, table: pa.Table) -> npt.NDArray[np.int64]:
        """The turns of each row as the flattener splits them, the rows it leaves unread
        counted by the decoder."""
        import numpy as np

        from transcript_clean.columnar.arrays import whole
        from transcript_clean.formats.text.hh_flatten import hh_turn_counts

        column = whole(table.column(self.column))
        found = hh_turn_counts(column)
        if found is None:
            values = column.to_pylist()
            return np.array([self.message_count({self.column: v}) for v in values], np.int64)
        unread, counts = found
        at = np.flatnonzero(unread)
        for k, value in zip(at.tolist(), column.take(at).to_pylist(), strict=True):
            counts[k] = self.message_count({self.column: value})
        return counts

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        value = row.get(self.column)
        if not isinstance(value, str):
            problem = "missing" if value is None else f"expected a text, got {kind_of(value)}"
            raise malformed(self.column, f"{problem} (a transcript of {self.markers} turns)")
        try:
            turns = self.parse(value)
        except ValueError as err:
            raise malformed(self.column, str(err)) from None
        messages: list[Message] = [
            _user(said) if role == "user" else _assistant(said) for role, said in turns
        ]
        return Decoded(messages, dict(row), format=self.name)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        where = f"a {self.markers} transcript"
        turns = turn_texts(messages, where)
        if any(role == "system" for role, _ in turns):
            raise ValueError(f"a system prompt has no place in {where}")
        was = decoded.row.get(self.column)
        lead = was[: len(was) - len(was.lstrip())] if isinstance(was, str) else self.fresh_lead
        out = dict(decoded.row)
        out[self.column] = self.render(turns, lead)
        return out


class GuanacoFormat(HHFormat):
    """One column of `### Human: ...### Assistant: ...` transcripts (Guanaco's, from
    OpenAssistant's conversations), read and written as hh-rlhf's; rows take the per-row path."""

    name = "guanaco"
    words = "one text of ### Human: / ### Assistant: turns"
    markers = "### Human: / ### Assistant:"
    fresh_lead = ""
    renders_messages = False
    edits_line_value = False

    @staticmethod
    def parse(text: str) -> list[tuple[str, str]]:
        return parse_guanaco(text)

    @staticmethod
    def render(turns: list[tuple[str, str]], lead: str) -> str:
        return render_guanaco(turns, lead=lead)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        return None

    def merges_join_texts(self, column: pa.Array) -> bool | None:
        return None

    def write(self, column: pa.Array, edits: Edits) -> pa.Array | None:
        return None

    def message_counts(self, table: pa.Table) -> npt.NDArray[np.int64]:
        import numpy as np

        values = table.column(self.column).to_pylist()
        return np.array([self.message_count({self.column: v}) for v in values], np.int64)


class _FieldsFormat(_TextFormat):
    """A row of string fields: the user's text (the `user_fields` joined by a line break, the
    first one required), the assistant's (`output_field`), an optional system prompt and an
    optional history of earlier [user, assistant] pairs."""

    user_fields: ClassVar[tuple[str, ...]]
    output_field: ClassVar[str]
    system_field: ClassVar[str | None] = "system"
    history_field: ClassVar[str | None] = "history"
    where: ClassVar[str]

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.text.flatten import flatten_fields

        return flatten_fields(self, column, side or {})

    def message_counts(self, table: pa.Table) -> npt.NDArray[np.int64]:
        from transcript_clean.formats.text.flatten import field_message_counts

        column = table.column(self.column).combine_chunks()
        counts = field_message_counts(self, column, self.side(table))
        return super().message_counts(table) if counts is None else counts

    @property
    def _user_fields(self) -> tuple[str, ...]:
        return (self.column, *self.user_fields[1:])

    def unwritten(self, roles: Sequence[str]) -> str | None:
        return unpaired(roles, self.where)

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        first, *rest = self._user_fields
        texts = [_text(row, first)] + [_text(row, name, required=False) for name in rest]
        user_text = "\n".join(t for k, t in enumerate(texts) if t is not None and (t or not k))
        output = _text(row, self.output_field)
        assert output is not None
        messages: list[Message] = []
        if self.system_field is not None:
            system = _text(row, self.system_field, required=False)
            if system:
                messages.append(SystemMessage(system))
        for query, response in self._history(row):
            messages += [_user(query), _assistant(response)]
        messages += [_user(user_text), _assistant(output)]
        return Decoded(messages, dict(row), format=self.name)

    def _history(self, row: Mapping[str, Any]) -> list[tuple[str, str]]:
        if self.history_field is None:
            return []
        value = row.get(self.history_field)
        if value is None:
            return []
        if not isinstance(value, list):
            raise malformed(self.history_field, f"expected a list of pairs, got {kind_of(value)}")
        pairs = []
        for k, pair in enumerate(value):
            if not (
                isinstance(pair, list | tuple)
                and len(pair) == 2
                and all(isinstance(t, str) for t in pair)
            ):
                raise malformed(
                    f"{self.history_field}[{k}]",
                    f"expected a pair [query, response] of texts, got {kind_of(pair)}",
                )
            pairs.append((pair[0], pair[1]))
        return pairs

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        turns = turn_texts(messages, self.where)
        system = None
        if turns and turns[0][0] == "system":
            system = turns.pop(0)[1]
            if self.system_field is None:
                raise ValueError(f"a system prompt has no place in {self.where}")
        pairs = _pairs(turns, self.where)
        if not pairs:
            raise ValueError(f"{self.where} hold at least one pair")
        out = dict(decoded.row)
        *history, (user_text, output) = pairs
        try:
            was = self.decode(decoded.row).messages
            before = turn_texts(was, self.where)[-2][1]
        except Exception:  # the source row is another format's: write it whole
            before = None
        first, *rest = self._user_fields
        if user_text != before:
            out[first] = user_text
            for name in rest:
                if out.get(name):
                    out[name] = ""
        put(out, self.output_field, output)
        if self.system_field is not None and system is not None:
            put(out, self.system_field, system)
        if self.history_field is not None:
            new = [[q, r] for q, r in history]
            old = out.get(self.history_field)
            if new != [list(p) for p in old or ()] or (new and old is None):
                out[self.history_field] = new
        return out


class AlpacaFormat(_FieldsFormat):
    """Alpaca rows as LLaMA-Factory and ms-swift read them: `instruction` and `input` joined
    by a line break are the user's turn, `output` the assistant's."""

    name = "alpaca"
    default_column = "instruction"
    user_fields = ("instruction", "input")
    output_field = "output"
    side_columns = ("input", "output", "system", "history")
    words = "instruction + input the user's turn, output the assistant's, history pairs before"
    where = "Alpaca rows"


class DollyFormat(_FieldsFormat):
    """databricks-dolly-15k's rows: `instruction` and `context` joined by a line break are the
    user's turn (as LLaMA-Factory reads the set: `context` its `query`), `response` the
    assistant's; `category` and any other column kept."""

    name = "dolly"
    default_column = "instruction"
    user_fields = ("instruction", "context")
    output_field = "response"
    system_field = None
    history_field = None
    side_columns = ("context", "response")
    words = "instruction + context the user's turn, response the assistant's"
    where = "Dolly rows"


class QueryResponseFormat(_FieldsFormat):
    """ms-swift's `query` / `response` rows, with `history` and `system`."""

    name = "query-response"
    default_column = "query"
    user_fields = ("query",)
    output_field = "response"
    side_columns = ("response", "system", "history")
    words = "query the user's turn, response the assistant's, history pairs before"
    where = "query / response rows"


class CompletionFormat(_FieldsFormat):
    """TRL's standard prompt-completion rows: `prompt` and `completion` strings."""

    name = "completion"
    default_column = "prompt"
    user_fields = ("prompt",)
    output_field = "completion"
    system_field = None
    history_field = None
    side_columns = ("completion",)
    words = "prompt and completion strings: a user turn and the assistant's"
    where = "prompt / completion rows"


class PairsFormat(_TextFormat):
    """ms-swift's `{"conversation": [{"human": ..., "assistant": ...}, ...]}`: a list of
    pairs, each a user turn and the assistant's; a `system` column before them."""

    name = "pairs"
    default_column = "conversation"
    side_columns = ("system",)
    words = "a list of {human, assistant} pairs"
    where = "human / assistant pairs"

    def unwritten(self, roles: Sequence[str]) -> str | None:
        return unpaired(roles, self.where)

    def flatten(
        self,
        column: pa.Array,
        schema: pa.Schema | None = None,
        side: Mapping[str, pa.Array] | None = None,
    ) -> Conversations | None:
        from transcript_clean.formats.text.pairs_flatten import flatten_pairs

        return flatten_pairs(column, side or {})

    def message_counts(self, table: pa.Table) -> npt.NDArray[np.int64]:
        """Each row's messages as the flattener has them, the rows it leaves unread counted
        by the decoder."""
        import numpy as np

        from transcript_clean.columnar.arrays import whole

        column = whole(table.column(self.column))
        names = table.column_names
        side = self.side(table)
        view = self.flatten(column, table.schema, side)
        rows = table.select([n for n in (self.column, *side) if n in names])
        if view is None:
            return np.array([self.message_count(r) for r in rows.to_pylist()], np.int64)
        counts = np.bincount(view.message_row, minlength=view.rows).astype(np.int64)
        at = np.flatnonzero(view.unread)
        for k, row in zip(at.tolist(), rows.take(at).to_pylist(), strict=True):
            counts[k] = self.message_count(row)
        return counts

    def decode(self, row: Mapping[str, Any]) -> Decoded:
        value = row.get(self.column)
        if not isinstance(value, list):
            problem = "missing" if value is None else f"expected a list, got {kind_of(value)}"
            raise malformed(self.column, problem)
        messages: list[Message] = []
        system = _text(row, "system", required=False)
        if system:
            messages.append(SystemMessage(system))
        if not value:
            raise malformed(self.column, "no pair")
        for k, item in enumerate(value):
            path = f"{self.column}[{k}]"
            pair = expect_object(item, path)
            for key in ("human", "assistant"):
                said = pair.get(key)
                if said is None:
                    raise malformed(path, f'missing "{key}"')
                if not isinstance(said, str):
                    raise malformed(f"{path}.{key}", f"expected a text, got {kind_of(said)}")
            messages += [_user(pair["human"]), _assistant(pair["assistant"])]
        return Decoded(messages, dict(row), format=self.name)

    def encode(self, decoded: Decoded, messages: Sequence[Message]) -> Row:
        turns = turn_texts(messages, self.where)
        out = dict(decoded.row)
        if turns and turns[0][0] == "system":
            put(out, "system", turns.pop(0)[1])
        was = decoded.row.get(self.column)
        old = was if isinstance(was, list) else []
        new = []
        for k, (human, assistant) in enumerate(_pairs(turns, self.where)):
            item = dict(old[k]) if k < len(old) and isinstance(old[k], Mapping) else {}
            put(item, "human", human)
            put(item, "assistant", assistant)
            new.append(item)
        out[self.column] = new
        return out

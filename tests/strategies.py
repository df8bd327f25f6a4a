"""Hypothesis strategies for the canonical model (SPEC section 1) and for transcripts (section 3).

Three families, for any test module to reuse:

- model values (`messages`, `assistant_parts`, ...): any value of the model, valid or not as a
  transcript, shaped so that `parse_messages(dump_messages(m)) == m`;
- canonical JSON (`json_messages`): section 1's JSON with every key `dump_messages` writes,
  generated independently of the model so a round trip through it tests both directions;
- transcripts: `valid_transcripts` (no violation, by construction) and `planted_transcripts`
  (a valid transcript with one planted defect, and the violations it must yield).
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from hypothesis import strategies as st

from transcript_clean.model import (
    MEDIA_KINDS,
    AssistantMessage,
    AssistantPart,
    Encrypted,
    Media,
    Message,
    Reasoning,
    ReasoningText,
    SystemMessage,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
    UserPart,
)

Draw: TypeAlias = Callable[[st.SearchStrategy[Any]], Any]

# Short values keep examples fast; white space is in the alphabet so blank texts turn up.
texts = st.text(alphabet=string.ascii_letters + string.digits + ' \t\n{}":,é漢', max_size=10)
ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=8)
names = st.sampled_from(["get_weather", "search", "python", "lookup_user"])
maybe_texts = st.none() | texts

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(texts, json_values, max_size=3)
# A media part's extra keys: anything but "type", which names its kind.
media_fields = st.dictionaries(texts.filter(lambda k: k != "type"), json_values, max_size=2)

USER_MEDIA_KINDS = sorted(MEDIA_KINDS)


# ---------------------------------------------------------------------------------------------
# model values


def media(kinds: Sequence[str] = ("image",)) -> st.SearchStrategy[Media]:
    return st.builds(Media, st.sampled_from(kinds), media_fields)


plain_texts = st.builds(Text, texts)
assistant_texts = st.builds(Text, texts, st.none() | json_objects)
reasoning_pieces = st.builds(ReasoningText, texts, st.sampled_from(["text", "summary"])) | (
    st.builds(Encrypted, texts)
)
reasonings = st.builds(
    Reasoning,
    content=st.lists(reasoning_pieces, max_size=3).map(tuple),
    id=st.none() | ids,
    signature=maybe_texts,
)


def tool_calls(call_ids: st.SearchStrategy[str] = ids) -> st.SearchStrategy[ToolCall]:
    return st.builds(
        ToolCall,
        id=call_ids,
        name=names,
        arguments=json_values,
        raw_arguments=maybe_texts,
        signature=maybe_texts,
        additional_params=st.none() | json_objects,
    )


tool_result_parts = plain_texts | media()


def tool_results(call_ids: st.SearchStrategy[str] = ids) -> st.SearchStrategy[ToolResult]:
    return st.builds(
        ToolResult,
        call=call_ids,
        content=st.lists(tool_result_parts, max_size=2).map(tuple),
        name=st.none() | names,
        status=st.sampled_from(["success", "error"]),
    )


user_parts: st.SearchStrategy[UserPart] = plain_texts | tool_results() | media(USER_MEDIA_KINDS)
assistant_parts: st.SearchStrategy[AssistantPart] = (
    assistant_texts | tool_calls() | reasonings | media()
)

system_messages = st.builds(SystemMessage, texts)
user_messages = st.builds(UserMessage, st.lists(user_parts, max_size=3).map(tuple))
assistant_messages = st.builds(
    AssistantMessage, st.lists(assistant_parts, max_size=3).map(tuple), id=st.none() | ids
)
messages: st.SearchStrategy[Message] = system_messages | user_messages | assistant_messages


# ---------------------------------------------------------------------------------------------
# canonical JSON, written out independently of `dump_messages`


def _json_media(kinds: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda kind, extra: {"type": kind, **extra}, st.sampled_from(kinds), media_fields
    )


def _obj(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(fields)


_json_text = _obj(type=st.just("text"), text=texts)
_json_tool_result = _obj(
    type=st.just("tool_result"),
    call=ids,
    name=st.none() | names,
    content=st.lists(_json_text | _json_media(["image"]), max_size=2),
    status=st.sampled_from(["success", "error"]),
)
_json_reasoning_piece = _obj(type=st.sampled_from(["text", "summary"]), text=texts) | _obj(
    type=st.just("encrypted"), data=texts
)
_json_assistant_part = (
    _obj(type=st.just("text"), text=texts, additional_params=st.none() | json_objects)
    | _obj(
        type=st.just("tool_call"),
        id=ids,
        name=names,
        arguments=json_values,
        raw_arguments=maybe_texts,
        signature=maybe_texts,
        additional_params=st.none() | json_objects,
    )
    | _obj(
        type=st.just("reasoning"),
        id=st.none() | ids,
        signature=maybe_texts,
        content=st.lists(_json_reasoning_piece, max_size=3),
    )
    | _json_media(["image"])
)
json_messages = st.lists(
    _obj(role=st.just("system"), content=texts)
    | _obj(
        role=st.just("user"),
        content=st.lists(
            _json_text | _json_tool_result | _json_media(USER_MEDIA_KINDS), max_size=3
        ),
    )
    | _obj(
        role=st.just("assistant"),
        id=st.none() | ids,
        content=st.lists(_json_assistant_part, max_size=3),
    ),
    max_size=5,
)


# ---------------------------------------------------------------------------------------------
# valid transcripts
#
# Built turn by turn so that every rule of SPEC section 3 holds: an assistant message never follows
# an assistant message unless a system or user message comes between, and an assistant turn with
# calls is followed (after zero or more system messages, which keep pending calls) by one user
# message answering each distinct call id exactly once. Call ids are unique across the transcript
# ("call_0", "call_1", ...; a turn may repeat its own id), so a planted defect cannot be mistaken
# for the answer to some other call.

NEVER_CALLED = "never_called"
"""A call id no generated transcript uses."""

# The walk only looks at roles, call ids and result ids, so the other parts come from small fixed
# samples: rich values would slow every example down and test nothing more here.
_assistant_filler = st.sampled_from(
    [
        Text("Let me look."),
        Text(" "),
        Text("", additional_params={"citations": []}),
        Reasoning((ReasoningText("the user wants"),), signature="sig"),
        Reasoning(),
        Media("image", {"url": "https://example.com/a.png"}),
    ]
)
_user_filler = st.sampled_from(
    [Text("thanks"), Text(""), Media("document", {"data": "JVBERi0="}), Media("audio")]
)
_result_content = st.sampled_from(
    [(), (Text("18 C"),), (Text('{"ok": true}'),), (Text("see map"), Media("image"))]
)
_system_messages = st.sampled_from([SystemMessage("Be brief."), SystemMessage("")])


def _assistant_turn(draw: Draw, fresh: Iterator[str], min_calls: int) -> AssistantMessage:
    call_ids = [next(fresh) for _ in range(draw(st.integers(min_calls, 3)))]
    if call_ids and draw(st.booleans()):
        call_ids.append(draw(st.sampled_from(call_ids)))  # a repeated id is one pending id
    calls = [ToolCall(call_id, draw(names), {"n": n}) for n, call_id in enumerate(call_ids)]
    filler = draw(st.lists(_assistant_filler, max_size=2))
    content = draw(st.permutations(filler + calls))
    return AssistantMessage(tuple(content))


def _result(draw: Draw, call_id: str) -> ToolResult:
    status = draw(st.sampled_from(["success", "error"]))
    return ToolResult(call_id, draw(_result_content), name=draw(names), status=status)


def _answer(draw: Draw, turn: AssistantMessage) -> UserMessage:
    call_ids = list(dict.fromkeys(call.id for call in turn.tool_calls))
    results = [_result(draw, call_id) for call_id in call_ids]
    filler = draw(st.lists(_user_filler, max_size=2))
    return UserMessage(tuple(draw(st.permutations(results + filler))))


@st.composite
def valid_transcripts(draw: Draw, min_calls: int = 0, max_turns: int = 6) -> list[Message]:
    """A transcript with no violation; it holds an assistant call when `min_calls` > 0."""
    fresh = (f"call_{n}" for n in itertools.count())
    out: list[Message] = []
    after_assistant = False
    calls_made = 0

    def assistant_episode(min_calls_here: int) -> None:
        nonlocal after_assistant, calls_made
        turn = _assistant_turn(draw, fresh, min_calls_here)
        out.append(turn)
        after_assistant = not turn.tool_calls
        if turn.tool_calls:
            calls_made += 1
            out.extend(draw(st.lists(_system_messages, max_size=2)))
            out.append(_answer(draw, turn))

    for _ in range(draw(st.integers(0, max_turns))):
        kinds = ["system", "user"] if after_assistant else ["system", "user", "assistant"]
        kind = draw(st.sampled_from(kinds))
        if kind == "system":
            out.append(draw(_system_messages))
            after_assistant = False
        elif kind == "user":
            out.append(UserMessage(tuple(draw(st.lists(_user_filler, max_size=2)))))
            after_assistant = False
        else:
            assistant_episode(0)
    while calls_made < min_calls:
        if after_assistant:
            out.append(draw(_system_messages | st.just(UserMessage((Text("go on"),)))))
        assistant_episode(1)
    return out


# ---------------------------------------------------------------------------------------------
# planted defects

Violation: TypeAlias = tuple[str, int, str | None]
"""(code, index, call_id), as `TranscriptError` carries them."""

PLANTS = ("drop_result", "answer_twice", "answer_never_called", "consecutive", "move_result")


@dataclass(frozen=True)
class Planted:
    """A valid transcript with one defect planted, and the violations it yields in walk order."""

    plant: str
    messages: list[Message]
    expected: list[Violation]


@dataclass(frozen=True)
class _Answer:
    """A result in a valid transcript: the call at `call_at`, answered by part `part` of `at`."""

    call_at: int
    at: int
    part: int
    call_id: str


def _answers(transcript: Sequence[Message]) -> list[_Answer]:
    # In a valid transcript each result answers the last assistant message before it.
    out: list[_Answer] = []
    last_assistant = -1
    for index, message in enumerate(transcript):
        if isinstance(message, AssistantMessage):
            last_assistant = index
        elif isinstance(message, UserMessage):
            out.extend(
                _Answer(last_assistant, index, k, part.call)
                for k, part in enumerate(message.content)
                if isinstance(part, ToolResult)
            )
    return out


def _open_positions(transcript: Sequence[Message]) -> list[int]:
    """Where a new user message may go without touching any call's window: no call is pending."""
    closed = {p for a in _answers(transcript) for p in range(a.call_at + 1, a.at + 1)}
    return [p for p in range(len(transcript) + 1) if p not in closed]


def _with_part(message: UserMessage, part: UserPart, position: int) -> UserMessage:
    content = list(message.content)
    content.insert(position, part)
    return replace(message, content=tuple(content))


def _without_part(message: UserMessage, position: int) -> UserMessage:
    return replace(message, content=message.content[:position] + message.content[position + 1 :])


def _plant_result_elsewhere(draw: Draw, out: list[Message], result: ToolResult, after: int) -> int:
    """Put `result` in a user message after index `after`: an existing one or a new one. Returns
    the index of the message that holds it."""
    later_users = [i for i, m in enumerate(out) if i > after and isinstance(m, UserMessage)]
    new_at = [p for p in _open_positions(out) if p > after]
    target = draw(st.sampled_from([("old", i) for i in later_users] + [("new", p) for p in new_at]))
    where, index = target
    if where == "new":
        out.insert(index, UserMessage((result,)))
    else:
        message = out[index]
        assert isinstance(message, UserMessage)
        out[index] = _with_part(message, result, draw(st.integers(0, len(message.content))))
    return int(index)


@st.composite
def planted_transcripts(draw: Draw, plant: str | None = None) -> Planted:
    """A valid transcript with one defect of kind `plant` (any of PLANTS when None)."""
    plant = plant or draw(st.sampled_from(PLANTS))
    transcript: list[Message] = draw(valid_transcripts(min_calls=1))
    out = list(transcript)
    answers = _answers(transcript)

    if plant == "drop_result":
        answer = draw(st.sampled_from(answers))
        user = out[answer.at]
        assert isinstance(user, UserMessage)
        out[answer.at] = _without_part(user, answer.part)
        return Planted(plant, out, [("unanswered_tool_call", answer.call_at, answer.call_id)])

    if plant == "answer_twice":
        answer = draw(st.sampled_from(answers))
        user = out[answer.at]
        assert isinstance(user, UserMessage)
        copy = user.content[answer.part]
        out[answer.at] = _with_part(user, copy, draw(st.integers(0, len(user.content))))
        return Planted(plant, out, [("orphan_tool_result", answer.at, answer.call_id)])

    if plant == "answer_never_called":
        result = _result(draw, NEVER_CALLED)
        at = _plant_result_elsewhere(draw, out, result, after=-1)
        return Planted(plant, out, [("orphan_tool_result", at, NEVER_CALLED)])

    if plant == "consecutive":
        at = draw(
            st.sampled_from([i for i, m in enumerate(out) if isinstance(m, AssistantMessage)])
        )
        first = out[at]
        assert isinstance(first, AssistantMessage)
        second = AssistantMessage(tuple(draw(st.lists(_assistant_filler, max_size=2))))
        out.insert(at + 1, second)
        expected: list[Violation] = [("consecutive_assistant", at + 1, None)]
        # The second turn closes the first one's window: its calls go unanswered and their
        # results, now one message further on, answer nothing.
        expected += [
            ("unanswered_tool_call", at, call_id)
            for call_id in dict.fromkeys(c.id for c in first.tool_calls)
        ]
        expected += [
            ("orphan_tool_result", a.at + 1, a.call_id) for a in answers if a.call_at == at
        ]
        return Planted(plant, out, expected)

    if plant == "move_result":
        answer = draw(st.sampled_from(answers))
        user = out[answer.at]
        assert isinstance(user, UserMessage)
        result = user.content[answer.part]
        assert isinstance(result, ToolResult)
        out[answer.at] = _without_part(user, answer.part)
        at = _plant_result_elsewhere(draw, out, result, after=answer.at)
        return Planted(
            plant,
            out,
            [
                ("unanswered_tool_call", answer.call_at, answer.call_id),
                ("orphan_tool_result", at, answer.call_id),
            ],
        )

    raise ValueError(f"unknown plant {plant!r}; expected one of {PLANTS}")


def json_leaves(*more: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """JSON leaves of any kind (null, booleans, integers past 64 bits, floats with NaN and the
    infinities, which json writes and orjson refuses), with `more`: what a test's reader must
    tell apart (escapes, numbers spelled otherwise, its own separators)."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.integers(-9, 9),
        st.floats(),
        *more,
    )


def json_values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """JSON values of `leaves`, nested in lists and objects a few deep."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
        ),
        max_leaves=6,
    )

"""Conversations held as plain strings (issue 29): hh-rlhf transcripts, Alpaca, Dolly, ms-swift's
query / response rows and {human, assistant} pairs, TRL's prompt / completion strings, dataset
types whose parts are strings, and what detection says when nothing fits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st
from test_convert import trl_messages

from transcript_clean.cli import main
from transcript_clean.errors import FormatError
from transcript_clean.formats import get_format
from transcript_clean.formats.text import parse_hh, render_hh
from transcript_clean.formats.text.hh import parse_guanaco, render_guanaco
from transcript_clean.model import SystemMessage, Text, UserMessage
from transcript_clean.policy import DEFAULT
from transcript_clean.rows import clean_row
from transcript_clean.run import clean
from transcript_clean.shapes import ShapedFormat
from transcript_clean.shapes.detect import detect_format

DATA = Path(__file__).parent / "data" / "text"

HH_PAIRS = DATA / "hh_rlhf_harmless_rows.jsonl"
ALPACA = DATA / "alpaca_en_demo_rows.json"
SWIFT_ALPACA = DATA / "swift_alpaca.jsonl"
SWIFT_QUERY = DATA / "swift_multi.jsonl"
PROMPT_COMPLETION = DATA / "logic_trainer_prompt_completion.jsonl"
DOLLY = DATA / "dolly_15k_rows.jsonl"


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def rows_of(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".json":
        rows: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return rows
    return [json.loads(line) for line in lines(path)]


def texts(messages: Any) -> list[tuple[str, str]]:
    """(role, text) of canonical messages."""
    out = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append(("system", m.content))
        else:
            role = "user" if isinstance(m, UserMessage) else "assistant"
            out.append((role, "".join(p.text for p in m.content if isinstance(p, Text))))
    return out


def run(tmp_path: Path, source: Path, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["clean", str(source), str(out), *args])
    return result.exit_code, result.output, out


def written(out: Path, kind: str = "data") -> list[str]:
    return [line for p in sorted((out / kind).glob("*.jsonl")) for line in lines(p)]


# ---------------------------------------------------------------------------------------------
# hh-rlhf transcripts


def test_hh_text_parses_into_turns_and_renders_back() -> None:
    text = "\n\nHuman: Hi\n\nAssistant: Hello.\n\nHuman: Bye\n\nAssistant:"
    turns = parse_hh(text)
    assert turns == [("user", "Hi"), ("assistant", "Hello."), ("user", "Bye"), ("assistant", "")]
    assert render_hh(turns) == text
    assert parse_hh("\nHuman: a\n\nAssistant: b") == [("user", "a"), ("assistant", "b")]
    # a marker inside a turn, not after a blank line, is the turn's text
    assert parse_hh("Human: say Assistant: x\n\nAssistant: ok")[0] == ("user", "say Assistant: x")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "assistant"]),
            st.text(alphabet=st.sampled_from("ab :\nHumanAssistt"), max_size=30),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_transcript_of_any_turns_reads_back_as_written(turns: list[tuple[str, str]]) -> None:
    # A turn's text holding a marker after a blank line would open a turn of its own.
    assume(not any(m in t for _, t in turns for m in ("\n\nHuman:", "\n\nAssistant:")))
    assert parse_hh(render_hh(turns)) == turns


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("just some text", "no '\\n\\nHuman:' or '\\n\\nAssistant:' marker"),
        ("Preamble.\n\nHuman: hi\n\nAssistant: yo", "text before the first marker: 'Preamble.'"),
    ],
)
def test_a_text_that_is_no_transcript_is_a_reject_saying_why(text: str, words: str) -> None:
    result = clean_row({"text": text}, get_format("hh"))
    assert result.status == "rejected" and result.codes == ["malformed_row"]
    assert result.reject_message is not None and words in result.reject_message
    assert result.reject_message.startswith("text: ")
    number = clean_row({"text": 3}, get_format("hh"))
    assert number.reject_message == (
        "text: expected a text, got a number (a transcript of Human: / Assistant: turns)"
    )


def test_real_hh_rlhf_pairs_are_detected_and_written_back_byte_for_byte(tmp_path: Path) -> None:
    rows = rows_of(HH_PAIRS)
    fmt = detect_format(list(rows[0]), rows)
    assert isinstance(fmt, ShapedFormat)
    assert (fmt.shape.kind, fmt.shape.candidates, fmt.shape.texts) == (
        "implicit-preference",
        ("chosen", "rejected"),
        True,
    )
    decoded = fmt.decode(rows[0])
    assert texts(decoded.messages) == [
        ("user", "Is it possible to download a car?"),
        ("assistant", "I’m not sure what you mean. Can you clarify?"),
    ]
    code, output, out = run(tmp_path, HH_PAIRS, "--output-format", "jsonl")
    assert code == 0, output
    assert (
        f"reading {HH_PAIRS} as implicit-prompt preference rows: "
        "candidates `chosen`, `rejected` (each a text of Human: / Assistant: turns)"
    ) in output
    assert written(out) == lines(HH_PAIRS)


HI = "\n\nHuman: Hi"


def test_an_hh_pair_is_repaired_in_its_texts_and_a_bad_text_rejected(tmp_path: Path) -> None:
    source = tmp_path / "hh.jsonl"
    rows = [
        {
            "chosen": "\n\nHuman: Hi\n\nAssistant: Hello.",
            "rejected": "\n\nHuman: Hi\n\nAssistant: No.",
        },
        {
            "chosen": f"{HI}\n\nAssistant: One.\n\nAssistant: Two.\n\nHuman: Ok\n\nAssistant:",
            "rejected": "\n\nHuman: Hi\n\nAssistant: Go.",
        },
        {"chosen": "no turns at all", "rejected": "\n\nHuman: Hi\n\nAssistant: x"},
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, output, out = run(tmp_path, source, "--output-format", "jsonl")
    assert code == 0, output
    kept = [json.loads(line) for line in written(out)]
    assert kept[0] == rows[0]
    # R4 merges the two assistant turns, R1 drops the empty one: the text says so
    assert kept[1]["chosen"] == "\n\nHuman: Hi\n\nAssistant: One.\n\nTwo.\n\nHuman: Ok"
    assert kept[1]["rejected"] == rows[1]["rejected"]
    (reject,) = [json.loads(line) for line in written(out, "rejects")]
    assert reject["_reject_codes"] == ["malformed_row"]
    assert reject["_reject_message"] == (
        "chosen: no '\\n\\nHuman:' or '\\n\\nAssistant:' marker: not a transcript of turns"
    )


def test_one_column_of_hh_text_reads_as_hh_and_converts_to_openai(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    source = tmp_path / "hh.jsonl"
    rows = [{"id": k, "text": r["chosen"]} for k, r in enumerate(rows_of(HH_PAIRS))]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    fmt = detect_format(["id", "text"], rows)
    assert (fmt.name, fmt.column) == ("hh", "text")
    code, output, out = run(tmp_path, source, "--to", "openai")
    assert code == 0, output
    loaded = datasets.load_dataset(
        "parquet",
        data_files=[str(p) for p in (out / "data").glob("*.parquet")],
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert loaded.num_rows == 3 and {"id", "messages", "tools"} <= set(loaded.column_names)
    for row in loaded:
        trl_messages(row["messages"])
    assert loaded[0]["messages"] == [
        {"role": "user", "content": "Is it possible to download a car?"},
        {"role": "assistant", "content": "I’m not sure what you mean. Can you clarify?"},
    ]


def test_two_hh_columns_read_as_one_conversation_are_named_not_picked() -> None:
    rows = rows_of(HH_PAIRS)
    with pytest.raises(FormatError, match="several columns hold conversations: chosen, rejected"):
        detect_format(["chosen", "rejected"], rows, shaped=False)


# ---------------------------------------------------------------------------------------------
# Guanaco: `### Human: ...### Assistant: ...` in one text

# Rows in the layout of timdettmers/openassistant-guanaco (no copy of the set was found in a
# public repository: it is on the Hub): its first row, shortened here, ends on a question no
# assistant turn answers, as this one does.
GUANACO = [
    {
        "text": "### Human: What is monopsony?### Assistant: One buyer.\n\nSee: Bivens, J. (2013)."
        "### Human: Now explain it to a dog"
    },
    {"text": "### Human: Hi### Assistant: Hello.### Assistant: How can I help?"},
    {"text": "### Human: Hi### Assistant:"},
]


def test_guanaco_text_parses_into_turns_and_renders_back() -> None:
    text = GUANACO[0]["text"]
    turns = parse_guanaco(text)
    assert turns == [
        ("user", "What is monopsony?"),
        ("assistant", "One buyer.\n\nSee: Bivens, J. (2013)."),
        ("user", "Now explain it to a dog"),
    ]
    assert render_guanaco(turns) == text
    assert render_guanaco(parse_guanaco(" ### Human: a### Assistant:"), lead=" ") == (
        " ### Human: a### Assistant:"
    )
    with pytest.raises(ValueError, match="text before the first marker"):
        parse_guanaco("Question: ### Human: a")
    # hh-rlhf's markers are not Guanaco's, nor the other way round
    with pytest.raises(ValueError, match="no '### Human:' or '### Assistant:' marker"):
        parse_guanaco("\n\nHuman: a\n\nAssistant: b")
    with pytest.raises(ValueError, match="text before the first marker"):
        parse_hh("### Human: a\n\nAssistant: b")


def test_guanaco_rows_are_detected_cleaned_and_written_back(tmp_path: Path) -> None:
    source = tmp_path / "guanaco.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in GUANACO))
    assert detect_format(["text"], GUANACO).name == "guanaco"
    code, output, out = run(tmp_path, source, "--output-format", "jsonl")
    assert code == 0, output
    assert "as guanaco (column 'text'; one text of ### Human: / ### Assistant: turns)" in output
    assert "rows in 3 = kept 2 (repaired 1) + rejected 1" in output
    kept = written(out)
    # a question left unanswered at the end is no code of the SPEC's: kept as it came
    assert kept[0] == lines(source)[0]
    # two answers in a row merged (R4), in the same text
    assert json.loads(kept[1]) == {"text": "### Human: Hi### Assistant: Hello.\n\nHow can I help?"}
    (rejected,) = [json.loads(line) for line in written(out, "rejects")]
    assert rejected["_reject_codes"] == ["empty_assistant_turn", "no_assistant_turn"]


def test_guanaco_rows_convert_to_rows_trl_loads(tmp_path: Path) -> None:
    from test_convert import trl_dataset

    source = tmp_path / "guanaco.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in GUANACO))
    code, output, out = run(tmp_path, source, "--to", "openai", "--output-format", "jsonl")
    assert code == 0, output
    first, merged = trl_dataset(out, tmp_path / "cache")
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "user"]
    assert merged["messages"][1] == {"role": "assistant", "content": "Hello.\n\nHow can I help?"}


# ---------------------------------------------------------------------------------------------
# Alpaca, Dolly, ms-swift, TRL prompt / completion


@pytest.mark.parametrize(
    ("path", "name", "column"),
    [
        (ALPACA, "alpaca", "instruction"),
        (SWIFT_ALPACA, "alpaca", "instruction"),
        (DOLLY, "dolly", "instruction"),
        (SWIFT_QUERY, "query-response", "query"),
        (PROMPT_COMPLETION, "completion", "prompt"),
    ],
)
def test_real_string_rows_are_detected_and_written_back_byte_for_byte(
    tmp_path: Path, path: Path, name: str, column: str
) -> None:
    rows = rows_of(path)
    fmt = detect_format(sorted({k for r in rows for k in r}), rows)
    assert (fmt.name, fmt.column) == (name, column)
    code, output, out = run(tmp_path, path, "--output-format", "jsonl")
    assert code == 0, output
    assert f"as {name} (column '{column}'; " in output
    assert "rows in 3 = kept 3 (repaired 0) + rejected 0" in output
    if path.suffix == ".jsonl":
        assert written(out) == lines(path)
    else:  # a JSON array is written as JSON Lines: the same rows, value for value
        assert [json.loads(line) for line in written(out)] == rows


def test_alpaca_decodes_system_history_instruction_and_input() -> None:
    row = rows_of(SWIFT_ALPACA)[0]
    decoded = get_format("alpaca").decode(row)
    assert texts(decoded.messages) == [
        ("system", "system123"),
        ("user", "aaaaa"),
        ("assistant", "bbbbb"),
        ("user", "11111\n22222"),
        ("assistant", "33333"),
    ]
    swift = get_format("query-response").decode(rows_of(SWIFT_QUERY)[2])
    assert [r for r, _ in texts(swift.messages)] == ["user", "assistant"] * 3
    empty_input = get_format("alpaca").decode(rows_of(ALPACA)[0])
    assert texts(empty_input.messages)[0] == (
        "user",
        "Transform the following sentence using a synonym: The car sped quickly.",
    )


def test_dolly_decodes_instruction_and_context_as_the_users_turn() -> None:
    closed_qa, classification, open_qa = rows_of(DOLLY)
    fmt = get_format("dolly")
    user_text, answer = texts(fmt.decode(closed_qa).messages)
    assert user_text[1].startswith("When did Virgin Australia start operating?\nVirgin Australia,")
    assert answer == ("assistant", closed_qa["response"])
    # an empty context adds nothing to the instruction
    assert texts(fmt.decode(classification).messages) == [
        ("user", "Which is a species of fish? Tope or Rope"),
        ("assistant", "Tope"),
    ]
    assert texts(fmt.decode(open_qa).messages)[0][1].endswith(
        "what\u2019s the name of the third daughter?"
    )
    # a row repaired elsewhere keeps its category; a rewritten turn clears the context it joined
    decoded = fmt.decode(closed_qa)
    row = fmt.encode(decoded, [UserMessage((Text("Who?"),)), decoded.messages[1]])
    assert row == {**closed_qa, "instruction": "Who?", "context": ""}


@pytest.mark.parametrize(
    ("name", "row", "message"),
    [
        ("dolly", {"instruction": "q", "context": ""}, "response: missing"),
        ("alpaca", {"instruction": "q", "output": 3}, "output: expected a text, got a number"),
        ("alpaca", {"output": "r"}, "instruction: missing"),
        (
            "alpaca",
            {"instruction": "q", "output": "r", "history": [["only one"]]},
            "history[0]: expected a pair [query, response] of texts, got a list",
        ),
        ("query-response", {"query": "q", "response": None}, "response: missing"),
        ("completion", {"prompt": "p", "completion": ["x"]}, "completion: expected a text"),
        ("pairs", {"conversation": [{"human": "h"}]}, 'conversation[0]: missing "assistant"'),
        ("pairs", {"conversation": []}, "conversation: no pair"),
    ],
)
def test_a_bad_string_row_is_a_reject_naming_the_field(
    name: str, row: dict[str, Any], message: str
) -> None:
    result = clean_row(row, get_format(name), DEFAULT)
    assert result.status == "rejected" and result.codes == ["malformed_row"]
    assert result.reject_message is not None and result.reject_message.startswith(message)


def test_a_repair_the_columns_cannot_hold_is_unencodable_one_they_can_is_written() -> None:
    # An empty response in the history: R1 drops it, leaving two user turns in a row, which
    # query / response rows cannot hold.
    row = {"query": "q2", "response": "r2", "history": [["q1", ""]]}
    result = clean_row(row, get_format("query-response"), DEFAULT)
    assert result.status == "rejected"
    assert result.codes == ["empty_assistant_turn", "unencodable_row"]
    assert result.reject_message is not None
    assert (
        "pairs of a user and an assistant turn, not: user user assistant" in result.reject_message
    )
    # Two answers in a row in an hh transcript are merged (R4), which a transcript can hold.
    merged = clean_row(
        {"text": "\n\nHuman: q\n\nAssistant: a\n\nAssistant: b"}, get_format("hh"), DEFAULT
    )
    assert merged.status == "repaired" and merged.codes == ["consecutive_assistant"]
    assert merged.row == {"text": "\n\nHuman: q\n\nAssistant: a\n\nb"}
    assert (merged.messages_in, merged.messages_out) == (3, 2)


@pytest.mark.parametrize(
    ("name", "rows"),
    [
        (
            "query-response",
            [
                {"query": "q2", "response": "r2", "history": [["q1", ""]]},
                {"query": "q", "response": " ", "history": [["q1", "r1"]]},
                {"query": "q", "response": "", "history": []},
                {"query": "q", "response": "", "history": [["q1", "\n"]]},
                {"query": "q", "response": "r", "history": [["q1", "r1"]]},
            ],
        ),
        (
            "pairs",
            [
                {"system": "s", "conversation": [{"human": "a", "assistant": ""}]},
                {
                    "system": "",
                    "conversation": [
                        {"human": "a", "assistant": "x"},
                        {"human": "b", "assistant": ""},
                    ],
                },
                {
                    "system": "s",
                    "conversation": [
                        {"human": "a", "assistant": ""},
                        {"human": "b", "assistant": "y"},
                    ],
                },
            ],
        ),
    ],
)
def test_an_empty_turn_the_pairs_cannot_lose_is_rejected_in_arrow_as_per_row(
    name: str, rows: list[dict[str, Any]]
) -> None:
    # Dropping an empty answer (R1) leaves strings of pairs a user turn short: the row is
    # rejected for what is left (no assistant turn, or unencodable), R1 present, and the fast
    # path says so itself, in the per-row path's words and stats.
    import pyarrow as pa
    from differential import assert_fast_and_slow_agree

    from transcript_clean.pipeline import batch_verdicts
    from transcript_clean.policy import STRICT

    fmt = get_format(name)
    table = pa.Table.from_pylist(rows)
    slow = assert_fast_and_slow_agree(table, DEFAULT, fmt)
    assert_fast_and_slow_agree(table, STRICT, fmt)
    verdicts = batch_verdicts(table, DEFAULT, format=fmt)
    assert verdicts is not None
    rejected = slow.rejects.to_pylist()
    assert rejected and all("empty_assistant_turn" in r["_reject_codes"] for r in rejected)
    assert verdicts.handled.all()  # none left to the per-row path
    assert sorted(
        sorted([r.code, *r.present]) for r in verdicts.rejects for _ in range(int(r.rows.sum()))
    ) == sorted(r["_reject_codes"] for r in rejected)


@pytest.mark.parametrize("path", [ALPACA, SWIFT_ALPACA, DOLLY, SWIFT_QUERY, PROMPT_COMPLETION])
def test_to_openai_writes_messages_that_datasets_loads(tmp_path: Path, path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    result = clean(path, tmp_path / "out", to="openai")
    assert result.stats.rows_kept == 3
    loaded = datasets.load_dataset(
        "parquet",
        data_files=[str(p) for p in (tmp_path / "out" / "data").glob("*.parquet")],
        split="train",
        cache_dir=str(tmp_path / "cache"),
    )
    assert loaded.num_rows == 3
    # the string columns are replaced by the conversation
    assert not {"instruction", "input", "context", "output", "query", "response", "prompt"} & set(
        loaded.column_names
    )
    for row in loaded:
        trl_messages(row["messages"])
        assert row["messages"][-1]["role"] == "assistant"
    first = rows_of(path)[0]
    said = first.get("output", first.get("response", first.get("completion")))
    assert loaded[0]["messages"][-1]["content"] == said


def test_ms_swift_pairs_are_detected_and_converted() -> None:
    row = {
        "conversation": [
            {"human": "早上好", "assistant": "早上好！"},
            {"human": "What is 2 + 2?", "assistant": "4"},
        ]
    }
    fmt = detect_format(["conversation"], [row])
    assert fmt.name == "pairs"
    assert [r for r, _ in texts(fmt.decode(row).messages)] == ["user", "assistant"] * 2
    unchanged = clean_row(row, fmt, DEFAULT)
    assert unchanged.status == "unchanged"


# ---------------------------------------------------------------------------------------------
# dataset types over strings (TRL's standard formats)


def test_trl_standard_preference_and_unpaired_rows(tmp_path: Path) -> None:
    pref = [
        {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
        {"prompt": "2 + 2 =", "chosen": " 4", "rejected": ""},
    ]
    fmt = detect_format(list(pref[0]), pref)
    assert isinstance(fmt, ShapedFormat) and fmt.shape.kind == "preference"
    assert fmt.shape.texts
    assert texts(fmt.decode(pref[0]).messages) == [("user", "The sky is"), ("assistant", " blue.")]
    ok = clean_row(pref[0], fmt, DEFAULT)
    assert ok.status == "unchanged"
    bad = clean_row(pref[1], fmt, DEFAULT)
    assert bad.status == "rejected"
    assert bad.reject_message == "rejected: the transcript has no assistant turn"
    kto = [{"prompt": "Hi", "completion": "Hello", "label": True}]
    unpaired = detect_format(list(kto[0]), kto)
    assert isinstance(unpaired, ShapedFormat) and unpaired.shape.kind == "unpaired"
    # prompt / completion strings without a label are one conversation, which --to converts
    assert detect_format(["prompt", "completion"], [{"prompt": "a", "completion": "b"}]).name == (
        "completion"
    )
    # a string where a list of messages belongs, in rows of messages, is still malformed
    listed = {"prompt": [{"role": "user", "content": "q"}], "chosen": "x", "rejected": "y"}
    fmt = detect_format(list(listed), [{**listed, "chosen": [], "rejected": []}])
    assert isinstance(fmt, ShapedFormat) and not fmt.shape.texts
    assert clean_row(listed, fmt, DEFAULT).codes == ["malformed_row"]


def test_type_prompt_completion_on_strings_reads_them(tmp_path: Path) -> None:
    source = tmp_path / "pc.jsonl"
    source.write_text(json.dumps({"prompt": "What is 2+2?", "completion": "4"}) + "\n")
    code, output, _ = run(tmp_path, source, "--type", "prompt-completion")
    assert code == 0, output
    assert "(strings: the prompt a user turn, each completion an assistant turn)" in output
    assert "rows in 1 = kept 1 (repaired 0) + rejected 0" in output
    assert "__" not in output


# ---------------------------------------------------------------------------------------------
# when nothing fits


def test_a_language_modeling_set_stops_saying_what_it_is(tmp_path: Path) -> None:
    source = tmp_path / "lm.jsonl"
    source.write_text(json.dumps({"text": "Once upon a time"}) + "\n")
    code, output, _ = run(tmp_path, source)
    assert code == 2
    assert f"{source}: cannot tell the conversation format" in output
    assert "The column 'text' holds plain text: language-modeling rows, with no turns" in output


def test_nothing_fits_names_the_file_each_shape_tried_and_what_it_made_of_row_0(
    tmp_path: Path,
) -> None:
    source = tmp_path / "mixed.jsonl"
    rows = [
        {
            "messages": [{"role": "user", "content": "hi"}, {"role": "bot", "content": "yo"}],
            "chosen": "good",
            "rejected": "bad",
        }
    ]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, output, _ = run(tmp_path, source)
    assert code == 2
    assert f"{source}: cannot tell the conversation format of these rows" in output
    assert "openai on column 'messages': read 0 of 1 rows (row 0: messages[1].role:" in output
    assert "dataset types tried:" in output
    assert (
        "implicit-preference: row 0: `chosen` holds a text with no Human: turn; "
        "row 0: `rejected` holds a text with no Human: turn"
    ) in output
    assert "__" not in output


def test_an_alpaca_file_with_a_bad_first_row_is_tried_as_alpaca(tmp_path: Path) -> None:
    source = tmp_path / "a.jsonl"
    source.write_text(json.dumps({"instruction": "q", "output": 3}) + "\n")
    code, output, _ = run(tmp_path, source)
    assert code == 2
    assert (
        "alpaca on column 'instruction': read 0 of 1 rows "
        "(row 0: output: expected a text, got a number)"
    ) in output


def test_a_prompt_set_of_strings_and_a_named_format_over_string_parts(tmp_path: Path) -> None:
    rl = [{"prompt": "What is 2+2?", "answer": "4"}]
    fmt = detect_format(list(rl[0]), rl)
    assert isinstance(fmt, ShapedFormat) and fmt.shape.kind == "prompt"
    assert fmt.describe() == "prompt-only rows: prompt `prompt` (a string: the prompt a user turn)"
    assert clean_row(rl[0], fmt, DEFAULT).status == "unchanged"
    # --format hh over hh-rlhf pairs reads them as without it; a format of messages refuses
    code, output, _ = run(tmp_path, HH_PAIRS, "--format", "hh")
    assert code == 0, output
    assert "rows in 3 = kept 3 (repaired 0) + rejected 0" in output
    code, output, _ = run(tmp_path, HH_PAIRS, "--format", "sharegpt")
    assert code == 2
    assert "the parts are plain strings, not sharegpt messages" in output
    # --to writes the pairs as TRL's conversational implicit-prompt preference rows
    code, output, out = run(
        tmp_path, HH_PAIRS, "--to", "openai", "--output-format", "jsonl", "--overwrite"
    )
    assert code == 0, output
    given = [json.loads(line) for line in lines(HH_PAIRS)]
    rows = [json.loads(line) for line in written(out)]
    assert len(rows) == len(given) == 3
    for row, was in zip(rows, given, strict=True):
        for name in ("chosen", "rejected"):
            turns = [(m["role"], m["content"]) for m in row[name]]
            assert turns == parse_hh(was[name])
            trl_messages(row[name])


# ---------------------------------------------------------------------------------------------
# the columnar view of string rows: the fast path


def field_rows(count: int, seed: int) -> list[dict[str, Any]]:
    """Alpaca rows of every kind the decoder meets: inputs empty or not, systems empty, blank
    or not, histories empty, of pairs, with a blank response or a broken pair, null fields."""
    import random

    rng = random.Random(seed)
    texts = ["", " ", "q", "Explain it.", "é ü", "\n"]
    rows = []
    for _ in range(count):
        history: list[list[str | None]] | None = [
            [rng.choice(texts), rng.choice(texts)] for _ in range(rng.choice([0, 0, 1, 2]))
        ]
        if rng.random() < 0.05:
            history = [["one"]]
        elif rng.random() < 0.03:
            history = [["q", None]]
        elif rng.random() < 0.1:
            history = None
        rows.append(
            {
                "instruction": None if rng.random() < 0.03 else rng.choice(texts[1:]),
                "input": rng.choice([None, "", "more", " "]),
                "output": None if rng.random() < 0.03 else rng.choice(texts),
                "system": rng.choice([None, "", "Be brief.", "  "]),
                "history": history,
            }
        )
    return rows


def test_alpaca_rows_flatten_as_the_decoder_reads_them() -> None:
    import pyarrow as pa
    from flattened import assert_flattened_as_decoded

    table = pa.Table.from_pylist(field_rows(600, seed=3))
    view = assert_flattened_as_decoded(get_format("alpaca"), table)
    assert 0 < view.unread.sum() < 120
    for path in (SWIFT_ALPACA, SWIFT_QUERY, PROMPT_COMPLETION):
        rows = rows_of(path)
        fmt = get_format(
            {"query": "query-response", "prompt": "completion"}.get(next(iter(rows[0])), "alpaca")
        )
        real = assert_flattened_as_decoded(fmt, pa.Table.from_pylist(rows))
        assert not real.unread.any()


def dolly_rows(count: int, seed: int) -> list[dict[str, Any]]:
    """`field_rows` in Dolly's columns (no system prompt, no history), with its `category`."""
    return [
        {
            "instruction": r["instruction"],
            "context": r["input"],
            "response": r["output"],
            "category": "x",
        }
        for r in field_rows(count, seed)
    ]


def test_dolly_rows_flatten_as_the_decoder_reads_them_and_agree_on_both_paths() -> None:
    import pyarrow as pa
    from differential import assert_fast_and_slow_agree
    from flattened import assert_flattened_as_decoded

    from transcript_clean.policy import STRICT

    fmt = get_format("dolly")
    view = assert_flattened_as_decoded(fmt, pa.Table.from_pylist(dolly_rows(600, seed=3)))
    assert 0 < view.unread.sum() < 120
    assert not assert_flattened_as_decoded(fmt, pa.Table.from_pylist(rows_of(DOLLY))).unread.any()
    for config in (DEFAULT, STRICT):
        assert_fast_and_slow_agree(pa.Table.from_pylist(dolly_rows(600, seed=5)), config, fmt)


@pytest.mark.parametrize("config", ["default", "strict"])
def test_alpaca_batches_agree_on_both_paths(config: str) -> None:
    import pyarrow as pa
    from differential import assert_fast_and_slow_agree

    from transcript_clean.pipeline import batch_verdicts
    from transcript_clean.policy import STRICT

    rows = field_rows(600, seed=5)
    table = pa.Table.from_pylist(rows)
    chosen = DEFAULT if config == "default" else STRICT
    assert_fast_and_slow_agree(table, chosen, get_format("alpaca"))
    verdicts = batch_verdicts(table, chosen, format=get_format("alpaca"))
    # every row the per-row path keeps unchanged is found clean in Arrow
    unchanged = [clean_row(r, get_format("alpaca"), chosen).status == "unchanged" for r in rows]
    assert verdicts is not None and verdicts.clean.tolist() == unchanged
    assert sum(unchanged) > 100

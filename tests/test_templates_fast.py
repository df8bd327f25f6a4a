"""The shortcuts the chat-template check takes for speed give what the plain way gives.

The trained tokens of a rendered row (`templates.render.trained_ranges`), found with two binary
searches per generation span, against transformers' own rule: its loop over the tokens in
`apply_chat_template`, copied here for offsets it never meets in practice, and the function itself
on real templates with tokenizers whose tokens leave gaps (words) or share a character (bytes).
The forms of a text the drop check looks for, worked out without JSON for plain text, against
the four JSON forms."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

from template_bench import tokenizer_folder
from templated import transcripts

from transcript_clean.templates import check_transcript, load_template
from transcript_clean.templates.drops import _forms
from transcript_clean.templates.render import chat_messages, template_tools, trained_ranges

ZAVA = "openai/msfoundry_zava_toolsft_valid.jsonl"


def loop_mask(offsets: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[int]:
    """transformers 5's loop in `apply_chat_template(return_assistant_tokens_mask=True)`."""
    mask = [0] * len(offsets)
    span_idx = 0
    for token_id, (token_start, token_end) in enumerate(offsets):
        while span_idx < len(spans) and token_start >= spans[span_idx][1]:
            span_idx += 1
        if span_idx == len(spans):
            break
        if token_end > spans[span_idx][0]:
            mask[token_id] = 1
    return mask


class Offsets:
    """What `trained_ranges` reads of a tokenizers `Encoding`: its length and `token_to_chars`."""

    def __init__(self, offsets: list[tuple[int, int]]) -> None:
        self.offsets = offsets
        self.asked = 0

    def __len__(self) -> int:
        return len(self.offsets)

    def token_to_chars(self, i: int) -> tuple[int, int]:
        self.asked += 1
        return self.offsets[i]


def ranges_mask(n: int, ranges: list[tuple[int, int]]) -> list[int]:
    mask = [0] * n
    for start, end in ranges:
        assert 0 <= start < end <= n
        mask[start:end] = [1] * (end - start)
    return mask


@st.composite
def tokens_and_spans(draw: Any) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Tokens in order (starts and ends going up): with gaps between them (text no token
    covers), several on one character (a character's bytes), empty ones; spans in order, not
    overlapping, some empty, some between tokens."""
    offsets: list[tuple[int, int]] = []
    at = 0
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["next", "next", "gap", "same", "empty"]))
        if kind == "same" and offsets:
            offsets.append(offsets[-1])
        elif kind == "empty":
            offsets.append((at, at))
        else:
            start = at + (draw(st.integers(1, 3)) if kind == "gap" else 0)
            at = start + draw(st.integers(1, 3))
            offsets.append((start, at))
    cuts = sorted(draw(st.lists(st.integers(0, at + 3), max_size=12)))
    spans = [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts) - 1, 2)]
    return offsets, spans


@given(tokens_and_spans())
def test_the_trained_ranges_are_transformers_mask(
    drawn: tuple[list[tuple[int, int]], list[tuple[int, int]]],
) -> None:
    offsets, spans = drawn
    got = trained_ranges(Offsets(offsets), spans)
    assert ranges_mask(len(offsets), got) == loop_mask(offsets, spans)


def test_the_search_asks_for_few_tokens_offsets() -> None:
    # 10,000 one-character tokens, three spans: a pass would read all 10,000 offsets.
    offsets = [(i, i + 1) for i in range(10_000)]
    spans = [(100, 200), (5_000, 5_001), (9_990, 10_000)]
    encoding = Offsets(offsets)
    assert trained_ranges(encoding, spans) == [(100, 200), (5_000, 5_001), (9_990, 10_000)]
    assert encoding.asked < 3 * 2 * 15


# ---------------------------------------------------------------------------------------------
# real templates, real tokenizers


def _rows(shared_data: Path) -> list[dict[str, Any]]:
    """A few zava rows, and one whose assistant texts begin and end on characters of several
    bytes (a byte-level tokenizer gives them several tokens on one character)."""
    with (shared_data / ZAVA).open(encoding="utf-8") as lines:
        rows = [json.loads(line) for _, line in zip(range(6), lines, strict=False)]
    wide = {
        "messages": [
            {"role": "system", "content": "Répondez en français. 🙂"},
            {"role": "user", "content": "日本語で答えて 🌸"},
            {"role": "assistant", "content": "🌸 はい、わかりました 🌸"},
            {"role": "user", "content": "ok"},
            {"role": "assistant", "content": "é"},
        ]
    }
    return [*rows, wide]


def _byte_level(folder: Path, template: str, texts: list[str]) -> Path:
    return tokenizer_folder(folder, template, texts, vocab_size=600)


def _word_level(folder: Path, template: str, texts: list[str]) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # the spaces are in no token
    tok.train_from_iterator(texts[:2], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", chat_template=template)
    fast.save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("kind", ["bytes", "words"])
@pytest.mark.parametrize("name", ["qwen3_training", "gptoss_training"])
def test_the_mask_is_apply_chat_templates_token_for_token(
    shared_data: Path, templates: Path, tmp_path: Path, name: str, kind: str
) -> None:
    rows = _rows(shared_data)
    source = (templates / f"{name}.jinja").read_text(encoding="utf-8")
    texts = [json.dumps(row, ensure_ascii=False) for row in rows]
    build = _byte_level if kind == "bytes" else _word_level
    template = load_template(str(build(tmp_path / f"{name}-{kind}", source, texts)))
    shared = 0
    for messages, tools in transcripts(rows):
        checked = check_transcript(template, messages, tools, keep_mask=True)
        rendering = checked.rendering
        assert rendering.error is None
        expected = template.tokenizer.apply_chat_template(
            chat_messages(messages, template, "object").messages,
            tools=template_tools(tools),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        assert rendering.tokens == len(expected["input_ids"])
        assert rendering.mask == expected["assistant_masks"]
        assert rendering.trained == sum(expected["assistant_masks"]) > 0
        assert rendering.offsets == [
            tuple(o)
            for o in template.tokenizer(
                rendering.text, add_special_tokens=False, return_offsets_mapping=True
            )["offset_mapping"]
        ]
        starts = [a for a, _ in rendering.offsets]
        shared += len(starts) - len(set(starts))
    if kind == "bytes":
        assert shared > 0  # some character was cut into several tokens


# ---------------------------------------------------------------------------------------------
# the drop check's forms of a text


def _four_forms(text: str) -> tuple[str, ...]:
    """The forms of a text as the drop check looked for them before its shortcut: as is, in a
    JSON string without and with `ensure_ascii`, and twice inside one."""
    once = json.dumps(text, ensure_ascii=False)[1:-1]
    forms = [text, once, json.dumps(text)[1:-1], json.dumps(once, ensure_ascii=False)[1:-1]]
    return tuple(dict.fromkeys(forms))


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
def test_a_texts_forms_are_the_four_json_forms(text: str) -> None:
    assert _forms(text) == _four_forms(text)


@pytest.mark.parametrize("text", ["plain ~[x]", "a\x7fb", "é", "🌸 \u2028", 'say "hi"', "a\\b\n"])
def test_a_texts_forms_where_json_escapes_differ(text: str) -> None:
    assert _forms(text) == _four_forms(text)


# ---------------------------------------------------------------------------------------------
# an audit's blocks with a template: a few per worker


def test_an_audit_with_a_template_cuts_its_rows_for_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from transcript_clean.audit.run import audit_rows_per_block
    from transcript_clean.options import EngineOptions
    from transcript_clean.policy import DEFAULT
    from transcript_clean.run import DEFAULT_ROWS_PER_SHARD

    rendering = replace(DEFAULT, chat_template="t.jinja")
    two = EngineOptions(workers=2)
    assert audit_rows_per_block(None, rendering, two, 1_100) == 184  # 3 blocks a worker
    assert audit_rows_per_block(None, rendering, two, 10_000_000) == DEFAULT_ROWS_PER_SHARD
    assert audit_rows_per_block(None, rendering, two, 250) == 100  # not below 100 rows
    assert audit_rows_per_block(50, rendering, two, 1_100) == 50  # as asked
    assert audit_rows_per_block(None, DEFAULT, two, 1_100) == DEFAULT_ROWS_PER_SHARD
    assert audit_rows_per_block(None, rendering, EngineOptions(), 1_100) == DEFAULT_ROWS_PER_SHARD
    assert audit_rows_per_block(None, rendering, two, None) == DEFAULT_ROWS_PER_SHARD  # a stream
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert audit_rows_per_block(None, rendering, EngineOptions("ray"), 1_200) == 100
    assert audit_rows_per_block(None, rendering, EngineOptions("ray"), 6_000) == 500


def test_two_workers_audit_a_templates_blocks_as_one_process_does(
    shared_data: Path, templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import transcript_clean.engine.local as local
    from transcript_clean.audit import audit

    lines = (shared_data / ZAVA).read_text(encoding="utf-8").splitlines()
    source = tmp_path / "zava.jsonl"
    source.write_text("\n".join(lines * 6) + "\n", encoding="utf-8")  # 330 rows
    texts = lines[:2]
    template = (templates / "qwen3_training.jinja").read_text(encoding="utf-8")
    folder = str(_word_level(tmp_path / "tok", template, texts))
    planned: list[int] = []
    plan = local.plan_blocks

    def counted(*args: Any) -> Any:
        blocks = plan(*args)
        planned.append(len(blocks))
        return blocks

    monkeypatch.setattr(local, "plan_blocks", counted)
    one = audit(str(source), chat_template=folder)
    two = audit(str(source), chat_template=folder, workers=2)
    assert planned == [1, 4]  # 330 rows: 3 blocks a worker, of at least 100 rows
    assert one.stats.records() == two.stats.records()
    assert one.summary["profile"] == two.summary["profile"]
    assert one.summary["profile"]["rendered_rows"] == 330
    assert {c: [s.row for s in v] for c, v in one.samples.items()} == {
        c: [s.row for s in v] for c, v in two.samples.items()
    }

"""Rows rendered with a model's chat template (`--chat-template`), against the real templates in
../shared/data/chat_templates and the real zava file; a small tokenizer built here (no network)
gives masks and counts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")

from templated import transcripts

from transcript_clean.cli import main
from transcript_clean.errors import ConfigError
from transcript_clean.model import (
    AssistantMessage,
    Message,
    Text,
    ToolCall,
    ToolResult,
    UserMessage,
)
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import DEFAULT
from transcript_clean.templates import check_transcript, load_template
from transcript_clean.templates.render import chat_messages, template_tools

ZAVA = "openai/msfoundry_zava_toolsft_valid.jsonl"
TEMPLATE = {
    "template_error",
    "template_drops_content",
    "template_prunes_history",
    "no_trained_tokens",
}
SPECIAL = [
    "<|im_start|>", "<|im_end|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
    "<|call|>", "<|return|>", "<start_of_turn>", "<end_of_turn>", "<bos>",
]  # fmt: skip


@pytest.fixture(scope="module")
def zava(shared_data: Path) -> list[dict[str, Any]]:
    with (shared_data / ZAVA).open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def _tokenizer_folder(folder: Path, template: str) -> Path:
    """A word-level tokenizer over the zava rows' words, with `template` as its chat template,
    saved as a tokenizer folder (what `--chat-template DIR` loads)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        ["Hello there how can I help you today", "find user id by email order details"],
        trainers.WordLevelTrainer(special_tokens=["[UNK]", *SPECIAL]),
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", bos_token="<bos>", chat_template=template
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL})
    fast.save_pretrained(str(folder))
    return folder


def _codes(rows: list[dict[str, Any]], template: str, **config: Any) -> list[list[str]]:
    """Each zava row's template codes among its reject codes (empty when kept)."""
    import pyarrow as pa

    cfg = replace(DEFAULT, chat_template=template, **config)
    result = clean_batch(pa.Table.from_pylist(rows), cfg, format="openai")
    codes: list[list[str]] = [[] for _ in rows]
    for rejected in result.rejects.select(["_source_row", "_reject_codes"]).to_pylist():
        codes[rejected["_source_row"]] = [c for c in rejected["_reject_codes"] if c in TEMPLATE]
    return codes


# ---------------------------------------------------------------------------------------------
# the zava file with each real template (the done-when)


def test_gemma3_raises_on_every_zava_row_in_its_own_words(
    templates: Path, zava: list[dict[str, Any]]
) -> None:
    template = load_template(str(templates / "gemma3.jinja"))
    for messages, tools in transcripts(zava):
        checked = check_transcript(template, messages, tools)
        assert checked.rendering.error is not None
        assert "Conversation roles must alternate" in checked.rendering.error
        # the first `tool` message: a user message of the transcript holding a result
        at = checked.rendering.error_at
        assert at is not None and isinstance(messages[at], UserMessage)
        assert any(isinstance(p, ToolResult) for p in messages[at].content)
    assert _codes(zava, str(templates / "gemma3.jinja")) == [["template_error"]] * len(zava)


def test_deepseek_raises_on_a_turn_with_only_calls(
    templates: Path, zava: list[dict[str, Any]]
) -> None:
    template = load_template(str(templates / "deepseek_r1_distill.jinja"))
    for messages, tools in transcripts(zava):
        checked = check_transcript(template, messages, tools, "auto")
        assert checked.rendering.error == "'dict object' has no attribute 'content'"
        at = checked.rendering.error_at
        assert at is not None
        turn = messages[at]
        assert isinstance(turn, AssistantMessage) and turn.tool_calls
        assert not any(isinstance(p, Text) for p in turn.content)


def test_deepseek_drops_the_calls_of_a_turn_with_text(
    templates: Path, zava: list[dict[str, Any]]
) -> None:
    """Each zava turn with text and calls (one the repair of consecutive_assistant made),
    after the system message and the user text before it: the template renders the text and
    drops the calls. (In the whole rows it raises first, at a turn with only calls.)"""
    template = load_template(str(templates / "deepseek_r1_distill.jinja"))
    seen = 0
    for messages, tools in transcripts(zava):
        for at, turn in enumerate(messages):
            if not (isinstance(turn, AssistantMessage) and _has_text_and_call([turn])):
                continue
            asked = next(
                m
                for m in reversed(messages[:at])
                if isinstance(m, UserMessage) and isinstance(m.content[0], Text)
            )
            seen += 1
            cut = [messages[0], asked, turn]
            checked = check_transcript(template, cut, tools, "auto")
            assert checked.rendering.error is None
            dropped = [p.what.split("(")[0] for p in checked.drops.dropped]
            assert dropped == [f"the call {c.name}" for c in turn.tool_calls]
            codes = _codes([_openai_row(cut, tools)], template.spec, arguments_as="auto")
            assert codes == [["template_drops_content"]]
    assert seen == 25  # the 25 turns consecutive_assistant merged


def _openai_row(messages: list[Message], tools: Any) -> dict[str, Any]:
    from transcript_clean.formats.openai.codec import _encode_messages

    return {"messages": list(_encode_messages(messages, frozenset(), {})), "tools": tools}


def test_llama3_1_raises_on_two_calls_in_a_turn_and_drops_text_beside_a_call(
    templates: Path, zava: list[dict[str, Any]]
) -> None:
    path = str(templates / "llama3_1.jinja")
    template = load_template(path)
    codes = _codes(zava, path)
    merged = [i for i, (m, _) in enumerate(transcripts(zava)) if _has_text_and_call(m)]
    assert len(merged) == 20
    assert [i for i, c in enumerate(codes) if c] == merged
    assert all(codes[i] == ["template_drops_content"] for i in merged)
    # A turn with two calls: the row's last call made twice.
    for messages, tools in transcripts(zava)[:10]:
        last = messages[-1]
        assert isinstance(last, AssistantMessage) and len(last.tool_calls) == 1
        call = last.tool_calls[0]
        twice = replace(call, id=call.id + "_2")
        doubled = [*messages[:-1], AssistantMessage((*last.content, twice))]
        checked = check_transcript(template, doubled, tools)
        assert checked.rendering.error == "This model only supports single tool-calls at once!"
        assert checked.rendering.error_at == len(messages) - 1


def test_template_error_rejects_say_the_templates_words_and_where(
    templates: Path, zava: list[dict[str, Any]]
) -> None:
    """The rejects a run writes: Gemma 3 and DeepSeek-R1-Distill raise on all 55 zava rows, each
    reject saying the template's words and the message it raises at; Llama 3.1 raises on a
    row whose last turn makes two calls."""
    import pyarrow as pa

    written = transcripts(zava)
    for name, words in (
        ("gemma3", "Conversation roles must alternate user/assistant/user/assistant/..."),
        ("deepseek_r1_distill", "'dict object' has no attribute 'content'"),
    ):
        cfg = replace(DEFAULT, chat_template=str(templates / f"{name}.jinja"))
        result = clean_batch(pa.Table.from_pylist(zava), cfg, format="openai")
        rejects = result.rejects.select(["_source_row", "_reject_message"]).to_pylist()
        assert [r["_source_row"] for r in rejects] == list(range(len(zava)))
        template = load_template(cfg.chat_template or "")
        for r, (messages, tools) in zip(rejects, written, strict=True):
            at = check_transcript(template, messages, tools).rendering.error_at
            assert r["_reject_message"] == (
                f"message {at}: the chat template {name}.jinja raises: {words}"
            )
    # Llama 3.1: the first zava row with its last call made twice, as an OpenAI row.
    messages, tools = written[0]
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    call = last.tool_calls[0]
    doubled = [*messages[:-1], AssistantMessage((*last.content, replace(call, id=call.id + "_2")))]
    path = str(templates / "llama3_1.jinja")
    assert _codes([_openai_row(doubled, tools)], path) == [["template_error"]]


def _has_text_and_call(messages: list[Message]) -> bool:
    return any(
        isinstance(m, AssistantMessage)
        and m.tool_calls
        and any(isinstance(p, Text) for p in m.content)
        for m in messages
    )


@pytest.mark.parametrize("name", ["qwen3_training", "gptoss_training", "qwen2_5_training"])
def test_the_training_templates_give_masks_as_apply_chat_template_does(
    templates: Path, zava: list[dict[str, Any]], tmp_path: Path, name: str
) -> None:
    source = (templates / f"{name}.jinja").read_text(encoding="utf-8")
    folder = _tokenizer_folder(tmp_path / name, source)
    template = load_template(str(folder))
    assert template.marks_generation and template.tokenizer is not None
    for messages, tools in transcripts(zava)[:12]:
        checked = check_transcript(template, messages, tools)
        rendering = checked.rendering
        assert rendering.error is None and not checked.drops.dropped
        chat = chat_messages(messages, template, "object")
        expected = template.tokenizer.apply_chat_template(
            chat.messages,
            tools=template_tools(tools),
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        assert rendering.tokens == len(expected["input_ids"])
        assert rendering.trained == sum(expected["assistant_masks"]) > 0
        assert rendering.trained < rendering.tokens


def test_qwen3_prunes_earlier_reasoning_and_keeps_the_row(templates: Path) -> None:
    from transcript_clean.model import Reasoning, ReasoningText

    think = Reasoning((ReasoningText("first I look the order up"),))
    later = Reasoning((ReasoningText("now I can answer"),))
    messages: list[Message] = [
        UserMessage((Text("where is my order?"),)),
        AssistantMessage((think, Text("Let me look."))),
        UserMessage((Text("thanks, and the refund?"),)),
        AssistantMessage((later, Text("Refunded."))),
    ]
    checked = check_transcript(load_template(str(templates / "qwen3.jinja")), messages, None)
    assert [(p.index, p.what) for p in checked.drops.pruned] == [
        (1, "reasoning 'first I look the order up'")
    ]
    assert not checked.drops.dropped
    # DeepSeek-R1-Distill renders no reasoning at all: lost, not pruned.
    deepseek = load_template(str(templates / "deepseek_r1_distill.jinja"))
    dropped = check_transcript(deepseek, messages, None).drops.dropped
    assert [p.index for p in dropped] == [1, 3]


# ---------------------------------------------------------------------------------------------
# --arguments-as


def test_arguments_as_auto_renders_every_qwen_row(
    templates: Path, zava: list[dict[str, Any]]
) -> None:
    for name in ("qwen2_5", "qwen3"):
        path = str(templates / f"{name}.jinja")
        assert _codes(zava, path, arguments_as="auto") == [[]] * len(zava)
    # Qwen2.5 writes arguments given as text as a JSON string (tojson on a string): a loss,
    # which auto avoids by giving objects.
    strings = _codes(zava, str(templates / "qwen2_5.jinja"), arguments_as="string")
    assert strings == [["template_drops_content"]] * len(zava)


def test_arguments_as_auto_gives_text_to_a_template_that_concatenates(tmp_path: Path) -> None:
    path = tmp_path / "concat.jinja"
    path.write_text(
        "{% for m in messages %}{{ m.role }}: {{ m.content or '' }}"
        "{% for c in m.tool_calls or [] %}"
        "{{ c.function.name + '(' + c.function.arguments + ')' }}{% endfor %}\n{% endfor %}",
        encoding="utf-8",
    )
    call = ToolCall("c1", "get_order", {"order_id": "#W1"}, '{"order_id": "#W1"}')
    messages: list[Message] = [
        UserMessage((Text("my order?"),)),
        AssistantMessage((call,)),
        UserMessage((ToolResult("c1", (Text("shipped"),)),)),
        AssistantMessage((Text("It shipped."),)),
    ]
    template = load_template(str(path))
    as_object = check_transcript(template, messages, None, "object")
    assert as_object.rendering.error is not None and "str" in as_object.rendering.error
    assert as_object.rendering.error_at == 1
    auto = check_transcript(template, messages, None, "auto")
    assert auto.clean and auto.arguments_as == "string"
    assert 'get_order({"order_id": "#W1"})' in auto.rendering.text


# ---------------------------------------------------------------------------------------------
# no_trained_tokens, loading, the command line


def test_no_trained_tokens_under_a_template_that_trains_on_calls_only(tmp_path: Path) -> None:
    import pyarrow as pa

    path = tmp_path / "calls.jinja"
    path.write_text(
        "{% for m in messages %}{{ m.role }}: {% if m.tool_calls %}{% generation %}"
        "{{ m.tool_calls[0].function.name }}{% endgeneration %}{% endif %}"
        "{{ m.content or '' }}\n{% endfor %}",
        encoding="utf-8",
    )
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hi"}]},
        {
            "messages": [
                {"role": "user", "content": "order?"},
                {"role": "assistant", "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "get_order", "arguments": "{}"}}]},
            ]
        },
    ]  # fmt: skip
    cfg = replace(DEFAULT, chat_template=str(path))
    result = clean_batch(pa.Table.from_pylist(rows), cfg, format="openai")
    rejects = result.rejects.select(["_source_row", "_reject_codes"]).to_pylist()
    assert rejects == [{"_source_row": 0, "_reject_codes": ["no_trained_tokens"]}]


def test_a_template_is_loaded_from_a_folder_a_file_and_fails_offline_for_a_hub_id(
    templates: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sources_helpers import go_offline

    source = (templates / "qwen3_training.jinja").read_text(encoding="utf-8")
    folder = _tokenizer_folder(tmp_path / "tok", source)
    assert load_template(str(folder)).source == source
    assert load_template(str(templates / "qwen3_training.jinja")).tokenizer is None
    go_offline(monkeypatch, tmp_path)
    with pytest.raises(ConfigError, match="cannot load a tokenizer from the Hugging Face Hub"):
        load_template("transcript-clean-tests/no-such-model")
    with pytest.raises(ConfigError, match="no such file or folder, and not a Hub model id"):
        load_template(str(tmp_path / "missing.jinja"))
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for %}", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a template Jinja reads"):
        load_template(str(bad))


def test_the_command_line_says_once_that_a_template_marks_no_generation(
    shared_data: Path, templates: Path
) -> None:
    result = CliRunner().invoke(
        main,
        ["audit", str(shared_data / ZAVA), "--chat-template", str(templates / "llama3_1.jinja")],
    )
    assert result.exit_code == 0, result.output
    notes = [line for line in result.output.splitlines() if "marks no {% generation %}" in line]
    assert notes == [
        "note: the chat template llama3_1.jinja marks no {% generation %}: it gives no "
        "assistant mask, so trained tokens cannot be counted (no_trained_tokens is not "
        "looked for)"
    ]
    table = [line.split()[0] for line in result.output.splitlines() if line.strip()]
    assert "template_drops_content" in table and "no_trained_tokens" not in table


def test_arguments_as_needs_a_template() -> None:
    result = CliRunner().invoke(main, ["audit", "x.jsonl", "--arguments-as", "auto"])
    assert result.exit_code == 2
    assert "--arguments-as needs --chat-template" in result.output


def test_the_workers_render_as_this_process_does(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    from transcript_clean.audit import audit

    path = str(templates / "llama3_1.jinja")
    one = audit(str(shared_data / ZAVA), chat_template=path, rows_per_block=10)
    two = audit(str(shared_data / ZAVA), chat_template=path, rows_per_block=10, workers=2)
    assert one.stats.records() == two.stats.records()
    assert ("template_drops_content", "rejected") in one.stats.codes


def test_explain_shows_the_render_with_trained_spans_and_what_was_left_out(
    shared_data: Path, templates: Path
) -> None:
    zava = str(shared_data / ZAVA)
    llama = ["explain", zava, "--row", "0", "--chat-template", str(templates / "llama3_1.jinja")]
    result = CliRunner().invoke(main, llama)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Rendered with llama3_1.jinja (arguments as objects; it marks no" in out
    left = out.split("Left out by the template (never rendered):\n")[1].splitlines()[0]
    assert left.startswith("  message 6: the assistant text 'Thanks, Alex!")
    assert "⟦" not in out
    qwen = ["explain", zava, "--row", "0", "--chat-template"]
    result = CliRunner().invoke(main, [*qwen, str(templates / "qwen3_training.jinja")])
    assert result.exit_code == 0, result.output
    spans = result.output.split("⟦")[2:]  # the first is the header's
    assert len(spans) == 8 and all("⟧" in s for s in spans)  # the row's 8 assistant turns
    assert spans[-1].startswith("<think>") and "modify_pending_order_items" in spans[-1]
    assert "Nothing of the transcript is left out." in result.output


def test_max_tokens_counts_the_rendered_conversation(
    templates: Path, zava: list[dict[str, Any]], tmp_path: Path
) -> None:
    import pyarrow as pa

    source = (templates / "qwen3_training.jinja").read_text(encoding="utf-8")
    folder = str(_tokenizer_folder(tmp_path / "tok", source))
    template = load_template(folder)
    # As the cleaner reads them from Arrow: keys a row leaves out are there, null.
    rows = pa.Table.from_pylist(zava[:6]).to_pylist()
    tokens = [
        check_transcript(template, messages, tools).rendering.tokens
        for messages, tools in transcripts(rows)
    ]
    assert all(t is not None for t in tokens)
    limit = sorted(tokens)[2]  # type: ignore[type-var]
    cfg = replace(DEFAULT, chat_template=folder, max_tokens=limit, actions={"too_long": "reject"})
    result = clean_batch(pa.Table.from_pylist(rows), cfg, format="openai")
    rejects = result.rejects.select(["_source_row", "_reject_message"]).to_pylist()
    over = [i for i, t in enumerate(tokens) if t > limit]  # type: ignore[operator]
    assert [r["_source_row"] for r in rejects] == over, rejects
    for r in rejects:
        t = tokens[r["_source_row"]]
        assert r["_reject_message"].startswith(f"the rendered conversation has {t} tokens (")
        assert r["_reject_message"].endswith(f"trained), over the limit of {limit}")
    # A .jinja file alone has no tokens to count.
    with pytest.raises(ConfigError, match="counts the rendered tokens"):
        from transcript_clean.policy import with_template

        with_template(replace(DEFAULT, max_tokens=10), str(templates / "qwen3.jinja"), None)


def test_the_profile_and_the_audit_report_count_rendered_and_trained_tokens(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    from transcript_clean.audit import audit
    from transcript_clean.audit.render import render_markdown, render_text

    source = (templates / "qwen3_training.jinja").read_text(encoding="utf-8")
    folder = str(_tokenizer_folder(tmp_path / "tok", source))
    result = audit(str(shared_data / ZAVA), chat_template=folder, rows_per_block=20)
    profile = result.summary["profile"]
    assert profile["rendered_rows"] == 55
    rendered, trained = profile["per_row"]["rendered_tokens"], profile["per_row"]["trained_tokens"]
    assert rendered["count"] == trained["count"] == 55
    assert 0 < trained["mean"] < rendered["mean"]
    assert {"rendered_tokens_per_row", "trained_tokens_per_row"} <= set(profile["histograms"])
    text = render_text(result)
    assert f"chat template {folder}: rows rendered 55" in text
    assert "template_error 0 rows; template_drops_content 0 rows" in text
    assert "trained tokens per row kept: mean" in text
    assert "## Chat template" in render_markdown(result)
    # Without a template, none of it.
    plain = audit(str(shared_data / ZAVA))
    assert "rendered_rows" not in plain.summary["profile"]
    assert "chat template" not in render_text(plain)


def test_preference_rows_render_each_candidate_after_the_prompt(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    from transcript_clean.audit import audit

    dpo = str(shared_data / "preference" / "llamafactory_dpo_en_demo.json")
    source = (templates / "qwen3_training.jinja").read_text(encoding="utf-8")
    folder = str(_tokenizer_folder(tmp_path / "tok", source))
    result = audit(dpo, chat_template=folder)
    profile = result.summary["profile"]
    assert profile["rendered_rows"] == 300 == result.stats.rows_in
    assert profile["per_row"]["trained_tokens"]["count"] == 300
    assert not any(code.startswith("template") for code, _ in result.stats.codes)
    # A template that trains on calls only: each row's first candidate has no trained token.
    calls = tmp_path / "calls.jinja"
    calls.write_text(
        "{% for m in messages %}{{ m.role }}: {% if m.tool_calls %}{% generation %}"
        "{{ m.tool_calls[0].function.name }}{% endgeneration %}{% endif %}"
        "{{ m.content or '' }}\n{% endfor %}",
        encoding="utf-8",
    )
    rejected = audit(dpo, chat_template=str(calls))
    stat = rejected.stats.codes["no_trained_tokens", "rejected"]
    assert stat.rows == 300
    first = rejected.samples["no_trained_tokens"][0]
    assert first.reject_message is not None and first.reject_message.startswith("chosen: ")


def test_rendering_never_imports_torch(templates: Path, zava: list[dict[str, Any]]) -> None:
    import sys

    template = load_template(str(templates / "qwen3.jinja"))
    messages, tools = transcripts(zava[:1])[0]
    assert check_transcript(template, messages, tools).clean
    assert "torch" not in sys.modules

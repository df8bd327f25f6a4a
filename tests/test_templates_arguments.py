"""`--arguments-as`: the kept rows written with their calls' arguments in the form the chat
template takes, so that `datasets.load_dataset` (local files, no network) and
`apply_chat_template` take the cleaned set as it is. On the real zava file and the real
templates in ../shared/data/chat_templates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("transformers")
pytest.importorskip("datasets")

from transcript_clean import clean
from transcript_clean.cli import main
from transcript_clean.templates import load_template
from transcript_clean.templates.check import arguments_form

ZAVA = "openai/msfoundry_zava_toolsft_valid.jsonl"
GLAIVE = "sharegpt/glaive_toolcall_en_demo.json"
# A template that puts the arguments into its text with `+`, as DeepSeek's do: it raises on an
# object ("can only concatenate str"), and renders JSON text whole.
CONCAT = (
    "{% for m in messages %}{{ m.role }}: {{ m.content or '' }}"
    "{% for c in m.tool_calls or [] %}"
    "{{ '<call>' + c.function.name + ' ' + c.function.arguments + '</call>' }}{% endfor %}\n"
    "{% endfor %}"
)


@pytest.fixture(scope="module")
def zava_lines(shared_data: Path) -> list[str]:
    return (shared_data / ZAVA).read_text(encoding="utf-8").splitlines()


def _calls(messages: list[dict[str, Any]]) -> list[Any]:
    return [c["function"]["arguments"] for m in messages for c in (m.get("tool_calls") or [])]


def _tokenizer(folder: Path, template: str) -> Any:
    """A small word-level tokenizer with `template` as its chat template, saved and loaded
    back as a tokenizer folder (what a trainer loads)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        ["find order user"], trainers.WordLevelTrainer(special_tokens=["[UNK]"])
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", chat_template=template)
    fast.save_pretrained(str(folder))
    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def _load(output: Path, output_format: str) -> Any:
    """The cleaned set as a trainer loads it: `datasets.load_dataset` on the data shards."""
    from datasets import load_dataset

    files = sorted(str(p) for p in (output / "data").iterdir())
    builder = "parquet" if output_format == "parquet" else "json"
    return load_dataset(builder, data_files=files, split="train", cache_dir=str(output / "cache"))


def _render_all(tokenizer: Any, dataset: Any) -> list[str]:
    """Every row through `apply_chat_template`, its tools as `tools=`, as TRL's SFTTrainer
    renders a conversational row."""
    return [
        tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        for row in dataset
    ]


# ---------------------------------------------------------------------------------------------
# auto: one form per template


def test_auto_is_worked_out_once_from_the_template(templates: Path, tmp_path: Path) -> None:
    def form(name: str) -> str:
        return arguments_form(load_template(str(templates / name)), "auto")

    # Qwen2.5 writes text given as arguments as a JSON string (tojson on a string): objects.
    # Qwen3 renders both whole (`is string`): objects, what transformers documents.
    assert form("qwen2_5.jinja") == form("qwen2_5_training.jinja") == "object"
    assert form("qwen3.jinja") == form("llama3_1.jinja") == form("gptoss.jinja") == "object"
    concat = tmp_path / "concat.jinja"
    concat.write_text(CONCAT, encoding="utf-8")
    assert arguments_form(load_template(str(concat)), "auto") == "string"
    # Given, a form is the form; not given, objects.
    qwen3 = load_template(str(templates / "qwen3.jinja"))
    assert arguments_form(qwen3, "string") == "string"
    assert arguments_form(qwen3, None) == "object"


# ---------------------------------------------------------------------------------------------
# each direction, written, loaded back with datasets and rendered with apply_chat_template


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_auto_writes_objects_for_qwen2_5_and_every_row_renders(
    shared_data: Path, templates: Path, tmp_path: Path, output_format: str
) -> None:
    source = shared_data / ZAVA
    template = (templates / "qwen2_5.jinja").read_text(encoding="utf-8")
    out = tmp_path / "out"
    result = clean(
        source, out, chat_template=str(templates / "qwen2_5.jinja"), arguments_as="auto",
        output_format=output_format,
    )  # fmt: skip
    assert result.stats.rows_kept == 55
    assert result.summary["arguments_written"] == "object"
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "Calls' arguments are written as JSON objects" in card
    dataset = _load(out, output_format)
    wanted = [
        [json.loads(text) for text in _calls(json.loads(line)["messages"])]
        for line in source.read_text(encoding="utf-8").splitlines()
    ]
    # Each call's arguments come back as the object the row's text held: no key of another
    # row's call added (what a struct of every row's keys would give), nothing quoted.
    got = [_calls(row["messages"]) for row in dataset]
    assert got == wanted
    assert all(isinstance(a, dict) for calls in got for a in calls)
    if output_format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pq.read_schema(next((out / "data").iterdir()))
        call = schema.field("messages").type.value_type.field("tool_calls").type.value_type
        assert call.field("function").type.field("arguments").type == pa.json_()
    tokenizer = _tokenizer(tmp_path / "tok", template)
    texts = _render_all(tokenizer, dataset)
    assert len(texts) == 55
    # Written as objects, the template writes each call's arguments as JSON, not a JSON string.
    assert all('"arguments": {' in text for text in texts)
    assert not any('"arguments": "{' in text for text in texts)


def test_qwen2_5_with_string_arguments_would_train_quoted_json(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    """The other direction on the same template: JSON text, which Qwen2.5 quotes. The render
    check rejects every row (`template_drops_content`): nothing quoted is written."""
    out = tmp_path / "out"
    result = clean(
        shared_data / ZAVA, out, chat_template=str(templates / "qwen2_5.jinja"),
        arguments_as="string",
    )  # fmt: skip
    assert result.stats.rows_kept == 0
    assert result.stats.codes["template_drops_content", "rejected"].rows == 55


@pytest.mark.parametrize("output_format", ["parquet", "jsonl"])
def test_string_arguments_for_qwen3_are_written_as_text_and_render(
    shared_data: Path, templates: Path, tmp_path: Path, zava_lines: list[str], output_format: str
) -> None:
    template = (templates / "qwen3.jinja").read_text(encoding="utf-8")
    out = tmp_path / "out"
    result = clean(
        shared_data / ZAVA, out, chat_template=str(templates / "qwen3.jinja"),
        arguments_as="string", output_format=output_format,
    )  # fmt: skip
    assert result.stats.rows_kept == 55
    assert result.summary["arguments_written"] == "string"
    dataset = _load(out, output_format)
    wanted = [_calls(json.loads(line)["messages"]) for line in zava_lines]
    got = [_calls(row["messages"]) for row in dataset]
    assert got == wanted and all(isinstance(a, str) for calls in got for a in calls)
    texts = _render_all(_tokenizer(tmp_path / "tok", template), dataset)
    # Qwen3 writes text arguments as they are: each call's text is in its row's render.
    for text, calls in zip(texts, got, strict=True):
        assert all(f'"arguments": {arguments}' in text for arguments in calls)
    if output_format == "jsonl":
        # The zava rows hold arguments as text already: the 35 rows no repair touched are
        # written byte for byte (the 20 others had consecutive_assistant turns merged).
        written = next((out / "data").iterdir()).read_text(encoding="utf-8").splitlines()
        assert sum(a == b for a, b in zip(written, zava_lines, strict=True)) == 35


def test_auto_writes_text_for_a_template_that_concatenates(tmp_path: Path) -> None:
    """The string direction of auto: a template that raises on an object gets JSON text, in
    the rows written too (an OpenAI row whose arguments are objects, read from JSON Lines)."""
    concat = tmp_path / "concat.jinja"
    concat.write_text(CONCAT, encoding="utf-8")
    row = {
        "messages": [
            {"role": "user", "content": "Where is order #W1?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_order", "arguments": {"order_id": "#W1"}}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
            {"role": "assistant", "content": "It shipped."},
        ]
    }  # fmt: skip
    source = tmp_path / "objects.jsonl"
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    for output_format in ("parquet", "jsonl"):
        out = tmp_path / f"out-{output_format}"
        result = clean(
            source, out, chat_template=str(concat), arguments_as="auto",
            output_format=output_format,
        )  # fmt: skip
        assert result.stats.rows_kept == 1
        dataset = _load(out, output_format)
        assert _calls(dataset[0]["messages"]) == ['{"order_id": "#W1"}']
        text = _tokenizer(tmp_path / f"tok-{output_format}", CONCAT).apply_chat_template(
            dataset[0]["messages"], tokenize=False
        )
        assert '<call>get_order {"order_id": "#W1"}</call>' in text
    # As objects, the same template raises: the row is rejected in the template's words.
    objects = clean(
        source, tmp_path / "as-objects", chat_template=str(concat), arguments_as="object"
    )
    assert objects.stats.codes["template_error", "rejected"].rows == 1


def test_to_openai_writes_arguments_in_the_form_asked(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    glaive = shared_data / GLAIVE
    qwen3 = str(templates / "qwen3.jinja")
    forms = {}
    for form in ("object", "string"):
        out = tmp_path / form
        clean(
            glaive, out, to="openai", output_format="jsonl", chat_template=qwen3, arguments_as=form
        )
        lines = next((out / "data").iterdir()).read_text(encoding="utf-8").splitlines()
        forms[form] = [_calls(json.loads(line)["messages"]) for line in lines]
    objects, texts = forms["object"], forms["string"]
    assert sum(map(len, objects)) > 0
    assert all(isinstance(a, dict) for calls in objects for a in calls)
    assert all(isinstance(a, str) for calls in texts for a in calls)
    assert [[json.loads(a) for a in calls] for calls in texts] == objects


def test_without_arguments_as_the_rows_keep_their_arguments(
    shared_data: Path, templates: Path, tmp_path: Path, zava_lines: list[str]
) -> None:
    """Rendered as objects, written as the rows hold them: text, and each unrepaired line as
    it came in."""
    out = tmp_path / "out"
    clean(
        shared_data / ZAVA, out, chat_template=str(templates / "qwen3.jinja"), output_format="jsonl"
    )
    written = next((out / "data").iterdir()).read_text(encoding="utf-8").splitlines()
    assert sum(a == b for a, b in zip(written, zava_lines, strict=True)) == 35
    assert all(isinstance(a, str) for line in written for a in _calls(json.loads(line)["messages"]))


def test_the_command_line_says_the_form_auto_picked_and_who_keeps_its_own(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    qwen = str(templates / "qwen2_5.jinja")
    args = ["clean", str(shared_data / ZAVA), str(tmp_path / "a"), "--chat-template", qwen]
    result = CliRunner().invoke(main, [*args, "--arguments-as", "auto"])
    assert result.exit_code == 0, result.output
    assert (
        "note: --arguments-as auto: the chat template qwen2_5.jinja takes calls' arguments as "
        "JSON objects: rows are rendered, and OpenAI rows written, with them so"
    ) in result.output
    glaive = ["clean", str(shared_data / GLAIVE), str(tmp_path / "b"), "--chat-template", qwen]
    result = CliRunner().invoke(main, [*glaive, "--arguments-as", "object"])
    assert result.exit_code == 0, result.output
    assert (
        "note: --arguments-as decides how the rows are rendered; sharegpt rows keep their "
        "calls' arguments in their own form"
    ) in result.output
    summary = json.loads((tmp_path / "b" / "summary.json").read_text(encoding="utf-8"))
    assert "arguments_written" not in summary


def test_two_workers_write_the_rows_as_one_does(
    shared_data: Path, templates: Path, tmp_path: Path
) -> None:
    """Each worker process works auto's form out for itself: the same form, the same files."""
    import pyarrow.parquet as pq

    tables = []
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        clean(
            shared_data / ZAVA, out, chat_template=str(templates / "qwen2_5.jinja"),
            arguments_as="auto", rows_per_shard=10, workers=workers,
        )  # fmt: skip
        shards = sorted((out / "data").iterdir())
        assert len(shards) == 6
        tables.append([pq.read_table(p) for p in shards])
    assert all(a.equals(b) for a, b in zip(*tables, strict=True))
    assert tables[0][0].schema == tables[1][0].schema

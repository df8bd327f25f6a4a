"""The rules registry: one module per code, which the configs, both paths, the stats and the CLI
all read; and the differential check, enumerated over every rule and action it registers."""

from __future__ import annotations

import csv
import functools
import importlib.util
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import rules_files
from click.testing import CliRunner
from conftest import SHARED_DATA
from differential import assert_fast_and_slow_agree
from synthetic import (
    FORMATS,
    PLAIN,
    UNSUPPORTED,
    every_rates,
    generate_preference_rows,
    generate_rows,
    preference_schema,
)

import transcript_clean.rules as rules_package
from transcript_clean.cli import main
from transcript_clean.fastpath import fast_verdicts
from transcript_clean.formats import get_format
from transcript_clean.pipeline import clean_batch
from transcript_clean.policy import (
    CONFIG_DIR,
    DEFAULT,
    STRICT,
    Config,
    config_from_dict,
    load_config,
)
from transcript_clean.rules import (
    ACTIONS,
    RULES,
    TOO_LONG,
    codes,
    config_toml,
    discover,
    get_rule,
    registered,
    rules,
)
from transcript_clean.shapes import ShapedFormat
from transcript_clean.shapes.detect import detect_format

# A rule as a plugin or a new module would write it: nothing else in the project names it.
SHOUTING = '''
"""shouted_prompt: a user text written all in capitals (a throwaway rule, for the tests)."""

from transcript_clean.model import Text, UserMessage
from transcript_clean.rules.base import Rule, Violation

CODE = "shouted_prompt"


def find(walk):
    for index, message in enumerate(walk.messages):
        if isinstance(message, UserMessage):
            for part in message.content:
                if isinstance(part, Text) and part.text.isupper():
                    yield Violation(CODE, index, None, f"message {index}: the user shouts")


RULE = Rule(
    CODE,
    order=6.5,
    summary="a user text written all in capitals",
    actions_help="A user text written all in capitals. `reject` or `keep`.",
    allowed=frozenset({"reject", "keep"}),
    default="reject",
    find=find,
)
'''


@pytest.fixture
def shouting_module(tmp_path: Path) -> Iterator[ModuleType]:
    """The throwaway rule's module, written to a file of its own and imported from there."""
    path = tmp_path / "shouted_prompt.py"
    path.write_text(SHOUTING)
    spec = importlib.util.spec_from_file_location("shouted_prompt", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module


def shouting_rows(fmt: str, n: int = 400) -> list[dict[str, object]]:
    """Generated rows in which every fifth row's first user text is in capitals."""
    rows = [row for row, _ in generate_rows(n, format=fmt, seed=5)]
    column = get_format(fmt).column
    key, text = {"openai": ("role", "content"), "sharegpt": ("from", "value")}.get(
        fmt, ("role", "content")
    )
    user = {"openai": "user", "sharegpt": "human", "anthropic": "user"}[fmt]
    for row in rows[::5]:
        for message in row[column]:  # type: ignore[attr-defined]
            if message[key] != user:
                continue
            if isinstance(message[text], str):
                message[text] = "WHY IS THE SKY BLUE?"
                break
            block = next((b for b in message[text] or () if b.get("type") == "text"), None)
            if block is not None:  # Anthropic's content blocks
                block["text"] = "WHY IS THE SKY BLUE?"
                break
    return rows


# ---------------------------------------------------------------------------------------------
# the registry


def test_the_shipped_rules_are_spec_order_and_each_well_formed() -> None:
    assert codes() == tuple(r.code for r in RULES)
    assert codes()[:3] == ("malformed_row", "unknown_role", "empty_assistant_turn")
    for rule in RULES:
        assert rule.default in rule.allowed and rule.strict in rule.allowed
        assert set(rule.allowed) <= set(ACTIONS)
        assert rule.summary and "\n" not in rule.summary
        assert (rule.find is not None) == (rule.stage in ("walk", "render")), rule.code


def test_the_configs_are_generated_from_the_registry() -> None:
    for name in ("default", "strict"):
        written = (CONFIG_DIR / f"{name}.toml").read_text(encoding="utf-8")
        assert written == config_toml(name), f"run scripts/rules_files.py ({name}.toml is stale)"
    assert load_config("default") == DEFAULT
    assert load_config("strict") == STRICT
    assert {STRICT.action(r.code) for r in RULES} == {"reject"}


def test_the_readme_codes_table_is_the_registrys(shouting_module: ModuleType) -> None:
    readme = rules_files.README.read_text(encoding="utf-8")
    assert rules_files.readme_with_codes(readme) == readme, "run scripts/rules_files.py"
    assert "| `orphan_tool_result` | a result answers no pending call | repair (R3) |" in readme
    with registered(shouting_module.RULE):
        assert "| `shouted_prompt` |" in rules_files.readme_with_codes(readme)


def test_a_module_in_the_package_folder_is_a_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shouted_prompt.py").write_text(SHOUTING)
    monkeypatch.setattr(rules_package, "__path__", [*rules_package.__path__, str(tmp_path)])
    try:
        found = discover()
    finally:
        sys.modules.pop("transcript_clean.rules.shouted_prompt", None)
    # in its order (6.5): after no_assistant_turn (6), before the encode stage's codes (7, 7.5)
    before = [code for code in codes() if get_rule(code).order < 6.5]
    after = [code for code in codes() if get_rule(code).order > 6.5]
    assert [r.code for r in found] == [*before, "shouted_prompt", *after]


def test_two_rules_cannot_share_a_code(shouting_module: ModuleType) -> None:
    twin = get_rule("no_assistant_turn")
    with pytest.raises(ValueError, match="two rules have the code"), registered(twin):
        pass


# ---------------------------------------------------------------------------------------------
# a new rule, in one module: the configs, both paths, the stats and the CLI know it


def test_a_new_rule_is_in_the_configs(shouting_module: ModuleType, tmp_path: Path) -> None:
    assert "shouted_prompt" not in codes()
    with registered(shouting_module.RULE):
        assert "shouted_prompt" in codes()
        assert 'shouted_prompt = "reject"' in config_toml("default")
        assert DEFAULT.action("shouted_prompt") == "reject"
        path = tmp_path / "mine.toml"
        path.write_text('[actions]\nshouted_prompt = "keep"\n')
        assert load_config(path).action("shouted_prompt") == "keep"
        with pytest.raises(Exception, match="not allowed"):
            config_from_dict({"actions": {"shouted_prompt": "repair"}})
    assert "shouted_prompt" not in codes()


@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "anthropic"])
def test_a_new_rule_without_an_arrow_check_sends_every_row_per_row(
    shouting_module: ModuleType, fmt: str
) -> None:
    table = pa.Table.from_pylist(shouting_rows(fmt))
    column = table.column(get_format(fmt).column)
    before = fast_verdicts(get_format(fmt), column, keep_trailing=True)
    assert before is not None and before.clean.sum() > 200  # the fast path works without it
    with registered(shouting_module.RULE):
        after = fast_verdicts(get_format(fmt), column, keep_trailing=True)
        assert after is not None
        assert not after.handled.any()  # nothing certainly lacks a code no check can see
        for config in (DEFAULT, STRICT):
            assert_fast_and_slow_agree(table, config, get_format(fmt))
        result = clean_batch(table, DEFAULT, format=fmt)
    rejected = result.rejects.select(["_reject_codes", "_source_row"]).to_pylist()
    shouted = [r["_source_row"] for r in rejected if "shouted_prompt" in r["_reject_codes"]]
    assert len(shouted) >= 75 and all(row % 5 == 0 for row in shouted)  # 80 made to shout
    without = clean_batch(table, DEFAULT, format=fmt).rejects.column("_reject_codes").to_pylist()
    assert not any("shouted_prompt" in c for c in without)


def test_a_new_rule_reaches_the_cli_and_the_stats(
    shouting_module: ModuleType, tmp_path: Path
) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(shouting_rows("openai")), source)
    out = tmp_path / "out"
    with registered(shouting_module.RULE):
        result = CliRunner().invoke(main, ["clean", str(source), str(out)])
    assert result.exit_code == 0, result.output
    assert "shouted_prompt" in result.output
    with (out / "stats.csv").open() as handle:
        stats = {(r["code"], r["action"]): r for r in csv.DictReader(handle)}
    rejects = pq.read_table(out / "rejects").column("_reject_codes").to_pylist()
    shouted = sum("shouted_prompt" in codes for codes in rejects)
    assert shouted >= 75
    assert stats["shouted_prompt", "rejected"]["rows"] == str(shouted)


# ---------------------------------------------------------------------------------------------
# the differential check, over every rule the registry holds and every action it allows


def _cases() -> list[tuple[str, str, str]]:
    """Every format, rule and action; for a code a format's rows cannot carry, its default
    action only: the others change nothing its rows show (the suite's time, 5 string formats
    of about 10 such codes each)."""
    cases = []
    for fmt in FORMATS:
        absent = set(UNSUPPORTED.get(fmt, ()))
        if fmt in PLAIN:  # what the templates drop, prune or fail on is calls and reasoning
            absent |= {"template_error", "template_drops_content", "template_prunes_history"}
        for rule in rules():
            actions = [rule.default] if rule.code in absent else sorted(rule.allowed)
            cases += [(fmt, rule.code, action) for action in actions]
    return cases


# Codes the generator cannot plant, each with why: their cases still run, but cannot fail for
# want of the code.
NOT_PLANTED = {
    "unencodable_row": "a repair that no longer fits the input's schema needs a schema made for it",
    "lossy_conversion": "found only when rows are written in another format (test_convert.py)",
}
NOT_PLANTED_IN = {
    fmt: {code: f"{fmt} rows cannot carry it" for code in UNSUPPORTED.get(fmt, ())}
    for fmt in FORMATS
}
for fmt in PLAIN:  # what the templates drop, prune or fail on is calls and reasoning
    for code in ("template_error", "template_drops_content", "template_prunes_history"):
        NOT_PLANTED_IN[fmt][code] = f"{fmt} rows hold no calls and no reasoning"
NOT_PLANTED_IN["completion"]["too_long"] = "one short question and its answer: under 60 tokens"


TEMPLATES = SHARED_DATA / "chat_templates"

# The chat template each template code is looked for with (only with one): a real one that
# plants it on the generated rows, and for no_trained_tokens one that trains on calls only.
TEMPLATE_FOR = {
    "template_error": "llama3_1.jinja",
    "template_drops_content": "llama3_1.jinja",
    "template_prunes_history": "gptoss.jinja",
    "no_trained_tokens": None,
}

CALLS_ONLY = (
    "{% for m in messages %}{{ m.role }}: {% if m.tool_calls %}{% generation %}"
    "{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson }}"
    "{% endfor %}{% endgeneration %}{% endif %}{{ m.content or '' }}{% if m.reasoning_content %}"
    "{{ m.reasoning_content }}{% endif %}\n{% endfor %}"
)


@pytest.fixture(scope="module")
def calls_only(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("tpl") / "calls_only.jinja"
    path.write_text(CALLS_ONLY, encoding="utf-8")
    return str(path)


def _config(code: str, action: str, tokenizer: str, calls_only: str = "") -> Config:
    actions = {"actions": {code: action}}
    if code == TOO_LONG:  # looked for only with --max-tokens: about half the rows are over
        config = config_from_dict(actions, name=f"{code}={action}")
        return replace(config, tokenizer=tokenizer, max_tokens=60)
    if code in TEMPLATE_FOR:  # looked for only with --chat-template
        pytest.importorskip("transformers")
        name = TEMPLATE_FOR[code]
        if name is not None and not (TEMPLATES / name).is_file():
            pytest.skip(f"{TEMPLATES} is absent")
        config = config_from_dict(actions, name=f"{code}={action}")
        template = calls_only if name is None else str(TEMPLATES / name)
        return replace(config, chat_template=template)
    return config_from_dict(actions, name=f"{code}={action}")


@functools.cache
def _generated(fmt: str, rows: int) -> pa.Table:
    """The generated rows every case of `fmt` cleans: the same for each code and action, so built
    once per test process (an Arrow table is immutable; generating was a third of a case's time)."""
    rates = every_rates(fmt, tools=True)  # Anthropic and rig rows with a `tools` column too
    return pa.Table.from_pylist([row for row, _ in generate_rows(rows, fmt, seed=11, rates=rates)])


@pytest.mark.parametrize(("fmt", "code", "action"), _cases())
def test_fast_and_slow_agree_for_every_rule_and_action(
    fmt: str, code: str, action: str, tokenizer: str, calls_only: str
) -> None:
    # Rendering is per-row work: fewer rows for the template codes.
    table = _generated(fmt, 150 if code in TEMPLATE_FOR else 600)
    config = _config(code, action, tokenizer, calls_only)
    slow = assert_fast_and_slow_agree(table, config, get_format(fmt))
    if code in NOT_PLANTED or code in NOT_PLANTED_IN[fmt]:
        return
    found = sum(s.rows for (c, _), s in slow.stats.codes.items() if c == code)
    assert found > 0, f"no {fmt} row has {code}: the case tests nothing"


@pytest.mark.parametrize(("kind", "fmt"), [("preference", "openai"), ("preference", "sharegpt")])
@pytest.mark.parametrize("config", [DEFAULT, STRICT], ids=["default", "strict"])
def test_fast_and_slow_agree_on_dataset_types_with_every_code(
    kind: str, fmt: str, config: Config
) -> None:
    rows = generate_preference_rows(600, fmt, seed=3, defects=every_rates(fmt))
    table = pa.Table.from_pylist([row for row, _ in rows], schema=preference_schema(fmt))
    shaped = detect_format(table.column_names, table.slice(0, 50).to_pylist())
    assert isinstance(shaped, ShapedFormat) and shaped.shape.kind in (kind, "ranking")
    slow = assert_fast_and_slow_agree(table, config, shaped)
    seen = {c for c, _ in slow.stats.codes}
    assert len(seen) >= 8, seen  # the prompts and candidates carry most of the codes

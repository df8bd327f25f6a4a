from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from transcript_clean.convert import converting
from transcript_clean.errors import ConfigError
from transcript_clean.formats import get_format
from transcript_clean.policy import (
    CONFIG_DIR,
    DEFAULT,
    STRICT,
    builtin_configs,
    config_from_dict,
    for_format,
    load_config,
)
from transcript_clean.rules import RULES


def test_builtin_configs_are_the_documented_ones() -> None:
    assert {"default", "strict"} <= set(builtin_configs())
    assert load_config("default") == DEFAULT
    assert load_config(None) == DEFAULT
    assert load_config("strict") == STRICT


def test_default_repairs_and_keeps_trailing_calls() -> None:
    assert DEFAULT.action("orphan_tool_result") == "repair"
    assert DEFAULT.action("trailing_tool_call") == "keep"
    assert DEFAULT.action("no_assistant_turn") == "reject"
    assert DEFAULT.interrupted_call == "auto"


@pytest.mark.parametrize(
    ("name", "settled"),
    [
        ("openai", "cut"),
        ("sharegpt", "cut"),
        ("anthropic", "cut"),
        ("claude-code", "error_result"),
        ("openhands", "error_result"),
    ],
)
def test_auto_answers_interrupted_calls_in_agent_traces_only(name: str, settled: str) -> None:
    """`auto` is the error result for the rows of an agent loop, which answers a call it
    interrupted so, and the cut elsewhere; a config that names one keeps it, whatever the
    format; a conversion (`--to`) settles it as its source's format."""
    fmt = get_format(name)
    assert for_format(DEFAULT, fmt).interrupted_call == settled
    assert for_format(DEFAULT, converting(fmt, "openai")).interrupted_call == settled
    for named in ("cut", "error_result"):
        config = replace(DEFAULT, interrupted_call=named)  # type: ignore[arg-type]
        assert for_format(config, fmt) is config


def test_strict_rejects_every_code() -> None:
    assert {STRICT.action(r.code) for r in RULES} == {"reject"}


def test_every_code_is_documented_in_default_toml() -> None:
    text = (CONFIG_DIR / "default.toml").read_text()
    for code in [r.code for r in RULES]:
        assert f"\n{code} = " in text, code


def test_a_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        '[actions]\ntrailing_tool_call = "reject"\n[repair]\ninterrupted_call = "error_result"\n'
    )
    config = load_config(path)
    assert config.action("trailing_tool_call") == "reject"
    assert config.action("orphan_tool_result") == "repair"
    assert config.interrupted_call == "error_result"
    assert config.name == "mine"


@pytest.mark.parametrize(
    ("data", "names"),
    [
        ({"action": {}}, "unknown key 'action'"),
        ({"actions": {"orphan": "repair"}}, "actions.orphan"),
        ({"actions": {"malformed_row": "keep"}}, "actions.malformed_row = 'keep' is not allowed"),
        ({"actions": {"orphan_tool_result": "keep"}}, "actions.orphan_tool_result"),
        ({"actions": {"empty_assistant_turn": "fix"}}, "actions.empty_assistant_turn"),
        ({"repair": {"interrupted_call": "drop"}}, "(choose auto, cut, error_result)"),
        ({"repair": {"mode": "cut"}}, "repair.mode"),
        ({"actions": "reject"}, "actions must be a table"),
    ],
)
def test_bad_configs_name_the_key(data: dict[str, object], names: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(names)):
        config_from_dict(data)


def test_config_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[actions\n")
    with pytest.raises(ConfigError, match=r"bad\.toml: not valid TOML"):
        load_config(path)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="no config named 'lenient'"):
        load_config("lenient")


def test_a_mistyped_code_in_a_config_gets_a_did_you_mean(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[actions]\norphan_tool_results = "reject"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="did you mean 'orphan_tool_result'"):
        load_config(path)


def _load_in_a_process(spec: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`load_config(spec)` in a process of its own, bounded in time and memory (a config that
    is a FIFO or /dev/zero would hang or fill memory before the fix)."""
    import resource

    def bounded() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    code = (
        "import sys\nfrom transcript_clean.errors import ConfigError\n"
        "from transcript_clean.policy import load_config\n"
        "try:\n    load_config(sys.argv[1])\nexcept ConfigError as err:\n"
        "    print(err); sys.exit(2)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.run(
        [sys.executable, "-c", code, spec], capture_output=True, text=True, timeout=15,
        env=env, preexec_fn=bounded, cwd=tmp_path,
    )  # fmt: skip


def test_a_config_that_is_a_fifo_or_a_device_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    for spec, said in ((str(fifo), "a FIFO"), ("/dev/zero", "a character device")):
        done = _load_in_a_process(spec, tmp_path)
        assert done.returncode == 2, done.stderr[-300:]
        assert done.stdout == f"{spec}: {said}, not a config file\n"


def test_a_config_nested_too_deep_or_too_large_is_a_config_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match=r"deep\.toml: not valid TOML: nested too deep"):
        load_config(deep)
    large = tmp_path / "large.toml"
    large.write_text("# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ConfigError, match=r"large\.toml: larger than 1 MiB"):
        load_config(large)

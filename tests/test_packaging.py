"""pyproject.toml against the package: the version, the licence, the dependencies."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import transcript_clean

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def imported_modules(package: Path) -> set[str]:
    """The top-level names of every module the package's files import, anywhere in them."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return names


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("-", "_")


def test_the_version_is_written_once_in_the_package() -> None:
    assert "version" not in PROJECT
    assert "version" in PROJECT["dynamic"]
    dynamic = PYPROJECT["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "transcript_clean.version.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", transcript_clean.__version__)


def test_every_third_party_import_is_a_declared_dependency() -> None:
    declared = {requirement_name(r) for r in PROJECT["dependencies"]}
    extras = {
        requirement_name(r) for group in PROJECT["optional-dependencies"].values() for r in group
    }
    third_party = imported_modules(ROOT / "transcript_clean") - set(sys.stdlib_module_names)
    third_party.discard("transcript_clean")
    # ray is imported only by --engine ray, which asks for the [ray] extra; tokenizers only by
    # --tokenizer, which asks for the [tokens] extra; transformers only by --chat-template,
    # which asks for the [templates] extra.
    optional = {"ray", "tokenizers", "transformers"}
    assert third_party - declared <= optional, "imported but not declared"
    assert optional <= extras
    assert {"transformers", "tokenizers"} <= {
        requirement_name(r) for r in PROJECT["optional-dependencies"]["templates"]
    }
    assert {"pyarrow", "numpy"} <= third_party


def test_every_dependency_has_a_floor() -> None:
    for requirement in PROJECT["dependencies"]:
        assert ">=" in requirement, requirement


def test_the_licence_file_is_the_one_declared() -> None:
    assert PROJECT["license"] == "MIT"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "the transcript_clean authors" in text

"""The documentation against the code: docs/cli.md is current, and the README and docs/ hold."""

from __future__ import annotations

import re
from pathlib import Path

import cli_docs
import click
import pytest
from click.testing import CliRunner

from transcript_clean.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    """The page without its fenced code blocks, where a bracket is not a link."""
    return re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes of the page's headings (a repeated one gets -1, -2, ...)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#+ (.+)$", prose(path), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        repeats = seen.get(slug, 0)
        seen[slug] = repeats + 1
        found.add(slug if repeats == 0 else f"{slug}-{repeats}")
    return found


def leads_somewhere(page: Path, target: str) -> bool:
    """Whether a link on `page` names a file that exists, and a heading there if it names one."""
    file, _, anchor = target.partition("#")
    linked = (page.parent / file).resolve() if file else page
    if not linked.exists():
        return False
    return not anchor or linked.suffix != ".md" or anchor in anchors(linked)


def test_cli_md_is_what_the_commands_help_says() -> None:
    written = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert written == cli_docs.render(), "docs/cli.md is stale: run scripts/cli_docs.py"


@pytest.mark.parametrize("path", [[], ["clean"], ["audit"], ["explain"]], ids=str)
def test_cli_md_holds_each_commands_help_as_it_prints(path: list[str]) -> None:
    """The script renders what `--help` prints in a terminal of 80 columns or more."""
    result = CliRunner().invoke(
        cli, [*path, "--help"], prog_name="transcript-clean", terminal_width=cli_docs.WIDTH
    )
    assert result.exit_code == 0
    assert f"```\n{result.output}```\n" in cli_docs.render()


def test_every_command_is_documented() -> None:
    written = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    paths = [ctx.command_path for ctx in cli_docs.commands()]
    assert paths[0] == "transcript-clean"
    assert set(paths[1:]) >= {f"transcript-clean {c}" for c in ("clean", "audit", "explain")}
    for ctx in cli_docs.commands():
        assert f"## `{ctx.command_path}`\n" in written
        for param in ctx.command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert max(param.opts, key=len) in written, (ctx.command_path, param.name)
    # Every command the group has is walked, hidden ones aside.
    assert len(paths) == 1 + len([c for c in cli.commands.values() if not c.hidden])


def test_the_readme_is_short() -> None:
    assert len(README.read_bytes()) < 12 * 1024


def test_the_readme_keeps_the_codes_table_between_its_markers() -> None:
    text = README.read_text(encoding="utf-8")
    table = text.split("<!-- codes:start -->\n", 1)[1].split("<!-- codes:end -->", 1)[0]
    assert table.startswith("| code |")
    assert "| `malformed_row` |" in table


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_local_links_resolve(page: Path) -> None:
    # https: and mailto: links are not followed: no network in tests.
    local = [t for t in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", t)]
    broken = [target for target in local if not leads_somewhere(page, target)]
    assert not broken, f"{page.name}: links that lead nowhere: {broken}"


def test_the_link_check_finds_a_missing_file_or_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n## Its part\n\n```\n[in code](nowhere.md)\n```\n")
    assert LINK.findall(prose(page)) == []
    assert leads_somewhere(page, "#its-part")
    assert leads_somewhere(page, "page.md#a-page")
    assert not leads_somewhere(page, "#no-such-part")
    assert not leads_somewhere(page, "other.md")


def test_the_readme_links_to_every_page_in_docs() -> None:
    links = set(LINK.findall(prose(README)))
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in links, page.name

"""The package's import graph has no cycle but the known ones, and those only shrink.

The graph is built from the source with `ast`, never by importing it: one node per module of
`transcript_clean`, and an arrow from a module to each package module it imports, by `import`
or `from ... import` (absolute or relative), at module level or inside a function (a lazy
import is still a dependency: it runs, only later), except under `if TYPE_CHECKING:`, which only
the type checker reads. `from package import name` is an arrow to the module `package.name`
when there is one, else to `package`. Not arrows: the package a module sits in, which Python
imports first (else every module would depend on `transcript_clean/__init__.py`), and imports
by a computed name (`importlib.import_module`, as the rules registry discovers its rules).

A cycle is a strongly connected component of more than one module. `KNOWN_CYCLES` lists the
ones the code still has, each with its modules; the test fails on any other cycle, on a listed
cycle that a module joins, and on a listed cycle that no longer exists as listed (shrunk or
gone), so that the list is kept honest and only ever shrinks (it is empty). Counting the
`if TYPE_CHECKING:` imports too, the package has no cycle at all. The layering the code wants
is in docs/architecture.md ("Layers").
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

PACKAGE = "transcript_clean"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

Graph = Mapping[str, frozenset[str]]


def _modules(*names: str) -> frozenset[str]:
    """The package modules `names`, written without the package's name."""
    return frozenset(f"{PACKAGE}.{name}" if name else PACKAGE for name in names)


# The cycles the code still has. Remove a module from its cycle (or the cycle itself) when the
# code stops needing it; never add one.
KNOWN_CYCLES: dict[str, frozenset[str]] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    """The dotted name of the module at `path`, a file under the package folder `root`."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(node: ast.AST, types: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, at any depth, except the `if TYPE_CHECKING:` ones
    (with `types`, those too)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test) and not types:
            # Its `else:` runs at run time.
            for other in child.orelse:
                yield from _import_nodes(ast.Module(body=[other], type_ignores=[]))
        else:
            yield from _import_nodes(child, types)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute name a `from ... import` names, relative ones resolved from `module`."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    # A package's `from . import x` is relative to the package itself, a module's to its parent.
    drop = node.level - 1 if is_package else node.level
    base = base[: len(base) - drop]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(
    source: str, module: str, is_package: bool, modules: Iterable[str], types: bool = False
) -> set[str]:
    """The package modules, among `modules`, that `source` (the text of `module`) imports
    (with `types`, under `if TYPE_CHECKING:` too)."""
    known = set(modules)
    found: set[str] = set()
    for node in _import_nodes(ast.parse(source), types):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
            continue
        target = _absolute(node, module, is_package)
        for alias in node.names:
            # `from a import b` imports the module a.b when there is one, else b from a.
            submodule = f"{target}.{alias.name}"
            if submodule in known:
                found.add(submodule)
            elif target in known:
                found.add(target)
    found.discard(module)
    return found


@functools.cache
def import_graph(root: Path = ROOT, types: bool = False) -> dict[str, frozenset[str]]:
    """Each module of the package under `root`, with the package modules it imports (with
    `types`, its type checker's imports too)."""
    paths = {module_name(path, root): path for path in sorted(root.rglob("*.py"))}
    return {
        name: frozenset(
            imports_of(
                path.read_text(encoding="utf-8"), name, path.name == "__init__.py", paths, types
            )
        )
        for name, path in paths.items()
    }


def cycles(graph: Graph) -> list[frozenset[str]]:
    """The strongly connected components of `graph` with more than one node (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, frozenset())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def cycle_problems(graph: Graph, known: Mapping[str, frozenset[str]]) -> list[str]:
    """What is wrong with `graph`'s cycles against the `known` ones, in words; empty when none."""
    problems: list[str] = []
    found = cycles(graph)
    for component in found:
        listed = sorted(name for name, members in known.items() if members & component)
        if not listed:
            problems.append(f"a new import cycle: {sorted(component)}")
            continue
        joined = component - frozenset().union(*(known[name] for name in listed))
        if joined:
            problems.append(f"the import cycle {listed} grew: {sorted(joined)} joined it")
        elif len(listed) > 1:
            problems.append(f"the import cycles {listed} merged into one")
    for name, members in sorted(known.items()):
        if any(members <= component for component in found):
            continue  # as listed, or grown or merged (said above)
        now = sorted(sorted(component & members) for component in found if component & members)
        left = sorted(members.difference(*now))
        said = [f"{left} left it"] if left else []
        said += [f"it split into {now}"] if len(now) > 1 else []
        what = ", and ".join(said)
        problems.append(
            f"the known import cycle {name!r} is no longer there as listed ({what}): "
            "shrink or remove it in KNOWN_CYCLES"
        )
    return problems


def test_the_package_has_no_import_cycle_but_the_known_ones_as_listed() -> None:
    assert cycle_problems(import_graph(), KNOWN_CYCLES) == []


def test_no_cycle_either_when_the_type_checkers_imports_count() -> None:
    # Not even a cycle of type names: each layer's types are its own or a lower layer's.
    assert cycles(import_graph(types=True)) == []


def test_transcript_imports_nothing_above_the_model() -> None:
    # The seed's module is a leaf: the model and the errors, nothing the cleaner builds on it.
    assert import_graph()[f"{PACKAGE}.transcript"] <= _modules("model", "errors")


def test_no_format_module_imports_the_rules_the_fast_path_or_the_profile() -> None:
    # A format is a codec and a flattener that know no rule: not even a type name from above.
    above = (
        f"{PACKAGE}.rules",
        f"{PACKAGE}.fastpath",
        f"{PACKAGE}.profile",
        f"{PACKAGE}.batch_profile",
    )
    arrows = {
        (module, target)
        for module, targets in import_graph(types=True).items()
        if module.startswith(f"{PACKAGE}.formats.")
        for target in targets
        if target in above or target.startswith(tuple(f"{name}." for name in above))
    }
    assert sorted(arrows) == []


# The cycle finder and the graph builder themselves, on toy inputs: the tests above can fail.

TOY = {
    "a": frozenset({"b"}),
    "b": frozenset({"c"}),
    "c": frozenset({"a", "d"}),
    "d": frozenset({"e"}),
    "e": frozenset({"d"}),
    "f": frozenset({"a"}),
}


def test_cycles_are_the_strongly_connected_components_of_more_than_one_node() -> None:
    assert sorted(sorted(c) for c in cycles(TOY)) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_a_planted_cycle_is_a_problem() -> None:
    acyclic = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset()}
    assert cycle_problems(acyclic, {}) == []
    planted = {**acyclic, "c": frozenset({"a"})}
    assert cycle_problems(planted, {}) == ["a new import cycle: ['a', 'b', 'c']"]


def test_a_known_cycle_listed_exactly_is_not_a_problem() -> None:
    known = {"abc": frozenset("abc"), "de": frozenset("de")}
    assert cycle_problems(TOY, known) == []


def test_a_known_cycle_that_grows_is_a_problem() -> None:
    grown = {**TOY, "f": frozenset({"a"}), "a": frozenset({"b", "f"})}
    problems = cycle_problems(grown, {"abc": frozenset("abc"), "de": frozenset("de")})
    assert problems == ["the import cycle ['abc'] grew: ['f'] joined it"]


def test_a_known_cycle_that_shrinks_or_goes_is_a_problem() -> None:
    shrunk = {**TOY, "c": frozenset({"b", "d"}), "b": frozenset({"c"}), "a": frozenset({"b"})}
    problems = cycle_problems(shrunk, {"abc": frozenset("abc"), "de": frozenset("de")})
    assert problems == [
        "the known import cycle 'abc' is no longer there as listed (['a'] left it): "
        "shrink or remove it in KNOWN_CYCLES"
    ]
    split = {"a": frozenset("b"), "b": frozenset("a"), "c": frozenset("d"), "d": frozenset("c")}
    assert cycle_problems(split, {"abcd": frozenset("abcd")}) == [
        "the known import cycle 'abcd' is no longer there as listed "
        "(it split into [['a', 'b'], ['c', 'd']]): shrink or remove it in KNOWN_CYCLES"
    ]
    gone = {**TOY, "e": frozenset()}
    problems = cycle_problems(gone, {"abc": frozenset("abc"), "de": frozenset("de")})
    assert problems == [
        "the known import cycle 'de' is no longer there as listed (['d', 'e'] left it): "
        "shrink or remove it in KNOWN_CYCLES"
    ]


def test_the_graph_follows_lazy_and_relative_imports_but_not_type_checking_ones(
    tmp_path: Path,
) -> None:
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "__init__.py").write_text("from pkg.a import x\n", encoding="utf-8")
    (root / "a.py").write_text(
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.b import B\n"
        "else:\n"
        "    import pkg.c\n"
        "def f():\n"
        "    from pkg.sub import d\n"
        "    return d\n",
        encoding="utf-8",
    )
    (root / "b.py").write_text("from . import a\n", encoding="utf-8")
    (root / "c.py").write_text("from .sub.d import y\n", encoding="utf-8")
    (root / "sub" / "__init__.py").write_text("from .. import b\nfrom . import d\n", "utf-8")
    (root / "sub" / "d.py").write_text("import json\nfrom pkg import sub\n", encoding="utf-8")
    assert import_graph(root) == {
        "pkg": frozenset({"pkg.a"}),
        "pkg.a": frozenset({"pkg.c", "pkg.sub.d"}),
        "pkg.b": frozenset({"pkg.a"}),
        "pkg.c": frozenset({"pkg.sub.d"}),
        "pkg.sub": frozenset({"pkg.b", "pkg.sub.d"}),
        "pkg.sub.d": frozenset({"pkg.sub"}),
    }
    assert import_graph(root, types=True)["pkg.a"] == {"pkg.b", "pkg.c", "pkg.sub.d"}


def test_the_formats_registry_imports_a_codec_only_when_its_format_is_asked_for() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from transcript_clean.formats import get_format\n"
        "from transcript_clean.sources import open_source\n"
        "codecs = lambda: sorted(m.split('.')[2] for m in sys.modules\n"
        "    if m.startswith('transcript_clean.formats.') and m.endswith('.codec'))\n"
        "print(codecs(), 'transcript_clean.sources.json' in sys.modules)\n"
        "get_format('alpaca')\n"
        "print(codecs())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[] False", "['text']"]


def test_every_format_name_is_its_class_name_in_the_registry() -> None:
    from transcript_clean.format_names import FORMAT_NAMES
    from transcript_clean.formats import FORMATS, get_format

    assert tuple(FORMATS) == FORMAT_NAMES
    for name, cls in FORMATS.items():
        assert cls.name == name
        assert type(get_format(name)) is cls

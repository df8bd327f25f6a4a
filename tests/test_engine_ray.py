"""The Ray engine on a local Ray with 2 CPUs: the same files, stats and rows as the local engine.

One Ray is started for the module (it takes seconds). The tests that need no Ray (a missing Ray,
how a session starts) use a stand-in. CI installs the `[ray]` extra and sets `TEST_EXTRAS=ray`:
there a missing Ray fails the tests instead of skipping them.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from synthetic import CODES, generate_rows

from transcript_clean.audit import audit
from transcript_clean.cli import main
from transcript_clean.engine import ray as ray_engine
from transcript_clean.engine.local import Block
from transcript_clean.engine.ray import INSTALL_HINT, run_ray
from transcript_clean.errors import EngineError, OutputError, SourceError
from transcript_clean.options import resolve_format
from transcript_clean.policy import load_config
from transcript_clean.run import clean
from transcript_clean.sources import open_source

REQUIRE_RAY = "ray" in os.environ.get("TEST_EXTRAS", "").split(",")
ROWS = 3000
ROWS_PER_SHARD = 500
RATES = {code: 0.03 for code in CODES}  # every kind of defect, about 90 rows of each

# Ray Data warns about its own deprecated settings when it copies its context to workers.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray")


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    if REQUIRE_RAY:
        import ray  # CI installed the extra: a missing Ray is a failure here, not a skip
    else:
        ray = pytest.importorskip("ray", reason=f"needs the [ray] extra: {INSTALL_HINT}")
    ray.init(  # "local": never a cluster `ray start` left running on this machine
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level=logging.WARNING,
    )
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two OpenAI-format Parquet files, 1800 + 1200 rows, with every defect kind planted."""
    folder = tmp_path_factory.mktemp("generated") / "raw"
    folder.mkdir()
    rows = [row for row, _ in generate_rows(ROWS, format="openai", seed=7, rates=RATES)]
    table = pa.Table.from_pylist(rows)  # one schema for both files
    for name, chunk in (("a", table.slice(0, 1800)), ("b", table.slice(1800))):
        pq.write_table(chunk, folder / f"{name}.parquet", row_group_size=97)
    return folder


@pytest.fixture(scope="module")
def local_run(generated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    output = tmp_path_factory.mktemp("local") / "out"
    clean(str(generated), output, rows_per_shard=ROWS_PER_SHARD, workers=1)
    return output


def files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def read(folder: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(path) for path in sorted(folder.glob("*.parquet")))


def rejects(table: pa.Table) -> set[tuple[Any, ...]]:
    """Each reject by where it came from, with its codes and message."""
    columns = ("_source", "_source_row", "id", "_reject_codes", "_reject_message")
    return {
        (row[0], row[1], row[2], tuple(row[3]), row[4])
        for row in zip(*(table.column(c).to_pylist() for c in columns), strict=True)
    }


def summary(output: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((output / "summary.json").read_text(encoding="utf-8"))
    for key in ("engine", "seconds", "rows_per_second"):
        data.pop(key)
    return data


# ---------------------------------------------------------------------------------------------
# the same run on Ray


def test_ray_run_equals_local_run(
    local_ray: Any, generated: Path, local_run: Path, tmp_path: Path
) -> None:
    result = clean(str(generated), tmp_path / "out", engine="ray", rows_per_shard=ROWS_PER_SHARD)
    out = result.output
    assert result.summary["engine"] == "ray"
    assert result.stats.rows_in == ROWS == result.stats.rows_kept + result.stats.rows_rejected

    # The stats table, with its examples, and every kind of defect in it.
    table = pq.read_table(out / "stats.parquet")
    assert table.equals(pq.read_table(local_run / "stats.parquet"))
    assert (out / "stats.csv").read_bytes() == (local_run / "stats.csv").read_bytes()
    assert set(CODES) <= set(table.column("code").to_pylist())
    assert summary(out) == summary(local_run)
    # The profile (in summary.json too): the same numbers, merged from Ray's blocks.
    assert (out / "profile.json").read_bytes() == (local_run / "profile.json").read_bytes()
    assert result.stats.profile.rows == ROWS

    # The kept rows as a set (by id, none twice), and the rejects.
    kept, local_kept = read(out / "data"), read(local_run / "data")
    ids = kept.column("id").to_pylist()
    assert len(ids) == len(set(ids)) == result.stats.rows_kept
    assert set(ids) == set(local_kept.column("id").to_pylist())
    ray_rejects, local_rejects = read(out / "rejects"), read(local_run / "rejects")
    assert ray_rejects.num_rows == result.stats.rows_rejected
    assert rejects(ray_rejects) == rejects(local_rejects)
    assert set(ids).isdisjoint(ray_rejects.column("id").to_pylist())

    # More than that: the same files, byte for byte (same shard names, same order in each).
    assert len(files(out / "data")) == 7  # 1800 rows make 4 blocks, 1200 make 3
    assert files(out / "data") == files(local_run / "data")
    assert files(out / "rejects") == files(local_run / "rejects")
    assert not (tmp_path / "out.partial").exists()


def test_ray_writes_jsonl_as_the_local_engine_does(
    local_ray: Any, generated: Path, tmp_path: Path
) -> None:
    jsonl = {"rows_per_shard": ROWS_PER_SHARD, "output_format": "jsonl", "compression": "zstd"}
    local = clean(str(generated), tmp_path / "local", **jsonl).output
    out = clean(str(generated), tmp_path / "ray", engine="ray", **jsonl).output
    for folder in ("data", "rejects"):
        assert files(out / folder) == files(local / folder)
    assert sorted(files(out / "data")) == [f"part-{i:05d}.jsonl.zst" for i in range(7)]
    assert (out / "README.md").read_text() == (local / "README.md").read_text()


def test_ray_reads_a_uri_and_overwrites_only_when_asked(
    local_ray: Any, generated: Path, local_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("an earlier run")
    source = generated.as_uri()
    with pytest.raises(OutputError, match="pass overwrite=True"):
        clean(source, out, engine="ray", rows_per_shard=ROWS_PER_SHARD)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

    # --overwrite replaces only an earlier run's OUTPUT (issue 27, finding 18)
    with pytest.raises(OutputError, match="does not look like the OUTPUT of an earlier run"):
        clean(source, out, engine="ray", rows_per_shard=ROWS_PER_SHARD, overwrite=True)
    assert (out / "old.txt").read_text() == "an earlier run"
    shutil.rmtree(out)
    shutil.copytree(local_run, out)  # an earlier run, with a shard this one does not write
    shutil.copy(next((out / "data").iterdir()), out / "data" / "part-00099.parquet")
    clean(source, out, engine="ray", rows_per_shard=ROWS_PER_SHARD, overwrite=True)
    assert not (out / "data" / "part-00099.parquet").exists()
    assert files(out / "data") == files(local_run / "data")
    # Rejects name their file by URI; everything else about them is the same.
    uri_rejects, local_rejects = read(out / "rejects"), read(local_run / "rejects")
    assert set(uri_rejects.column("_source").to_pylist()) == {
        f"{source}/a.parquet",
        f"{source}/b.parquet",
    }
    assert uri_rejects.drop_columns("_source").equals(local_rejects.drop_columns("_source"))


def test_ray_resume_cleans_only_the_blocks_not_done(
    local_ray: Any, generated: Path, tmp_path: Path
) -> None:
    source = open_source(str(generated))
    fmt, config, work = resolve_format(source), load_config(None), tmp_path / "work"
    stats, shards = run_ray(source, fmt, config, work, rows_per_shard=ROWS_PER_SHARD)
    assert len(shards) == 7
    # A killed run: block 2 never finished.
    lost = {folder: (work / folder / shards[2]).read_bytes() for folder in ("data", "rejects")}
    for path in (work / "data" / shards[2], work / "rejects" / shards[2]):
        path.unlink()
    (work / "blocks" / "00002.json").unlink()
    before = {name: (work / "data" / name).stat().st_mtime_ns for name in shards[:2] + shards[3:]}

    seen: list[int] = []
    again, again_shards = run_ray(
        source, fmt, config, work, rows_per_shard=ROWS_PER_SHARD, progress=seen.append
    )
    assert (again_shards, again.to_dict()) == (shards, stats.to_dict())
    assert {folder: (work / folder / shards[2]).read_bytes() for folder in lost} == lost
    after = {name: (work / "data" / name).stat().st_mtime_ns for name in shards}
    assert {name for name in shards if after[name] != before.get(name)} == {shards[2]}
    assert seen == [ROWS - ROWS_PER_SHARD, ROWS_PER_SHARD]


def test_an_error_on_a_worker_is_raised_as_itself(local_ray: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    rows = [row for row, _ in generate_rows(20, format="openai", seed=1)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    source = open_source(str(path))
    fmt = resolve_format(source)
    path.write_bytes(b"not Parquet any more")
    with pytest.raises(SourceError, match=r"t\.parquet"):
        run_ray(source, fmt, load_config(None), tmp_path / "work", rows_per_shard=10)


# ---------------------------------------------------------------------------------------------
# the audit on Ray


def test_ray_audit_equals_local_audit(local_ray: Any, generated: Path) -> None:
    gates: dict[str, Any] = {"max_error_rate": 0.2, "max_share": {"orphan_tool_result": 0.01}}
    local = audit(generated, samples=2, rows_per_block=ROWS_PER_SHARD, **gates)
    seen: list[int] = []
    on_ray = audit(
        generated,
        samples=2,
        rows_per_block=ROWS_PER_SHARD,
        engine="ray",
        progress=seen.append,
        **gates,
    )
    assert on_ray.stats.records() == local.stats.records()
    assert on_ray.stats.counts() == local.stats.counts()
    assert set(CODES) <= set(on_ray.shares)
    assert on_ray.samples == local.samples
    assert on_ray.stats.profile == local.stats.profile
    assert on_ray.summary["profile"] == local.summary["profile"]
    assert on_ray.gates == local.gates and not local.passed
    assert sorted(seen) == [200, 300, *[500] * 5]  # one report per block, as it finishes


def test_cli_audit_on_ray_prints_what_the_local_engine_prints(
    local_ray: Any, generated: Path
) -> None:
    def audited(*options: str) -> str:
        result = CliRunner().invoke(main, ["audit", str(generated), "--samples", "1", *options])
        assert result.exit_code == 0, result.output
        return result.stdout

    assert audited("--engine", "ray") == audited()


# ---------------------------------------------------------------------------------------------
# without Ray


def small_source(tmp_path: Path) -> Path:
    path = tmp_path / "small.parquet"
    rows = [row for row, _ in generate_rows(5, format="openai", seed=2)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def test_without_ray_the_error_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if not installed
    source = open_source(str(small_source(tmp_path)))
    with pytest.raises(EngineError, match=r"pip install 'transcript-clean\[ray\]'"):
        run_ray(source, resolve_format(source), load_config(None), tmp_path / "w", rows_per_shard=5)

    args = ["clean", str(tmp_path / "small.parquet"), str(tmp_path / "out"), "--engine", "ray"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert "pip install 'transcript-clean[ray]'" in result.output


def test_help_names_the_engines_and_the_address() -> None:
    result = CliRunner().invoke(main, ["clean", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "--engine [local|ray]" in text
    assert "pipinstall'transcript-clean[ray]'" in "".join(text.split())  # wrapped at its "-"
    assert "--ray-address TEXT" in text and "RAY_ADDRESS" in text


class FakeRay:
    """What `_ray_session` calls of Ray, recorded."""

    def __init__(self, initialized: bool = False) -> None:
        self.initialized = initialized
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def is_initialized(self) -> bool:
        return self.initialized

    def init(self, **kwargs: Any) -> None:
        self.calls.append(("init", kwargs))

    def shutdown(self) -> None:
        self.calls.append(("shutdown", {}))


@pytest.mark.parametrize(
    ("address", "env", "joined", "num_cpus"),
    [
        (None, None, "local", 2),  # a new local Ray, with the CPUs asked for
        ("local", None, "local", 2),
        ("10.0.0.1:6379", None, "10.0.0.1:6379", None),
        (None, "ray://head:10001", "ray://head:10001", None),
        ("auto", "ray://head:10001", "auto", None),  # the option wins over the variable
    ],
)
def test_ray_session_starts_or_joins_and_stops_what_it_started(
    monkeypatch: pytest.MonkeyPatch,
    address: str | None,
    env: str | None,
    joined: str | None,
    num_cpus: int | None,
) -> None:
    if env is None:
        monkeypatch.delenv("RAY_ADDRESS", raising=False)
    else:
        monkeypatch.setenv("RAY_ADDRESS", env)
    fake = FakeRay()
    with ray_engine._ray_session(fake, address, 2):
        assert [name for name, _ in fake.calls] == ["init"]
    assert [name for name, _ in fake.calls] == ["init", "shutdown"]
    kwargs = fake.calls[0][1]
    assert (kwargs["address"], kwargs["num_cpus"]) == (joined, num_cpus)
    assert kwargs["include_dashboard"] is False and kwargs["log_to_driver"] is False


def test_ray_session_leaves_a_running_ray_alone() -> None:
    fake = FakeRay(initialized=True)
    with ray_engine._ray_session(fake, "10.0.0.1:6379", 2):
        pass
    assert fake.calls == []


def test_shards_the_driver_cannot_see_are_an_error(tmp_path: Path) -> None:
    block = Block(0, open_source(str(small_source(tmp_path))).parts()[0], 0, 5)
    with pytest.raises(EngineError, match="storage every node shares"):
        ray_engine._check_shards_visible(tmp_path / "out.partial", [block])


def test_ray_renders_with_a_chat_template_as_the_local_engine_does(
    local_ray: Any, generated: Path, shared_data: Path
) -> None:
    """The template travels to the Ray tasks as its path; each loads and compiles it once."""
    pytest.importorskip("transformers")
    template = str(shared_data / "chat_templates" / "llama3_1.jinja")
    options: dict[str, Any] = {"chat_template": template, "limit": 600, "rows_per_block": 200}
    local = audit(generated, **options)
    on_ray = audit(generated, engine="ray", **options)
    assert on_ray.stats.records() == local.stats.records()
    assert on_ray.summary["profile"] == local.summary["profile"]
    assert ("template_error", "rejected") in local.stats.codes

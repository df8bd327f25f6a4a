"""Rows rendered with a chat template, for `bench.py --chat-template TEMPLATE.jinja`: issue 30's
target, measured side by side on the same rows.

The rows are the real zava file (`../shared/data`, 55 rows of a tool-using agent) repeated to
`--rows`, as JSON Lines. The tokenizer is a byte-level BPE trained here on those rows (no
network), saved as a tokenizer folder with the template as its chat template. In rounds, each
step in its own process:

  apply_chat_template   each row's messages (arguments parsed to objects) through
                        tokenizer.apply_chat_template(messages, tools=..., tokenize=True): the
                        baseline, what a trainer pays to render the rows
  audit -w N            transcript-clean audit FILE --chat-template FOLDER --workers N: the whole
                        run (read, decode, clean, render, tokenize, drop check, stats)
  audit --engine ray    the same on a local Ray (where the [ray] extra is installed), at the
                        rows and at RAY_SCALE times them: the two tell Ray's start-up (and its
                        workers' load of the template) from its rate per row

Each step's wall time, CPU time (all its processes) and peak RSS; its rows per second, and per
core (over the cores it may use: --workers N, N; Ray, every CPU). The target: audit --workers 1
costs at most 1.25x the baseline; more workers go faster.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Measure = Callable[[list[str]], dict[str, float]]

ZAVA = Path(__file__).resolve().parents[2] / "shared/data/openai/msfoundry_zava_toolsft_valid.jsonl"
TARGET = "target (issue 30): audit --workers 1 <= 1.25x apply_chat_template(tokenize=True)"


def write_rows(target: Path, rows: int) -> None:
    lines = ZAVA.read_text(encoding="utf-8").splitlines()
    with target.open("w", encoding="utf-8") as out:
        for k in range(rows):
            out.write(lines[k % len(lines)] + "\n")


def tokenizer_folder(
    folder: Path, template: str, texts: list[str] | None = None, vocab_size: int = 4000
) -> Path:
    """A byte-level BPE over `texts` (by default the zava rows' lines), with `template` as its
    chat template, saved in `folder`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if texts is None:
        texts = ZAVA.read_text(encoding="utf-8").splitlines()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|start|>", "<|end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|endoftext|>", chat_template=template
    )
    fast.save_pretrained(str(folder))
    return folder


def step_apply(source: str, folder: str) -> None:
    """The baseline: every row through apply_chat_template(tokenize=True), as a trainer does."""
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    mask = "{% generation %}" in tokenizer.chat_template
    tokens = 0
    with open(source, encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            messages = row["messages"]
            for message in messages:
                for call in message.get("tool_calls") or ():
                    function = call["function"]
                    function["arguments"] = json.loads(function["arguments"])
            out = tokenizer.apply_chat_template(
                messages,
                tools=row.get("tools"),
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=mask,
            )
            tokens += len(out["input_ids"])
    print(tokens, file=sys.stderr)


RAY_SCALE = 4
"""Ray also runs at this many times the rows, to tell its start-up from its rate per row."""


def bench_templates(
    script: str,
    workdir: Path,
    template: Path,
    rows: int,
    workers: list[int],
    repeat: int,
    measure: Measure,
) -> list[dict[str, Any]]:
    python = sys.executable
    cpus = os.cpu_count() or 1
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / f"zava-{rows}.jsonl"
    write_rows(source, rows)
    folder = workdir / f"tokenizer-{template.stem}"
    tokenizer_folder(folder, template.read_text(encoding="utf-8"))
    cli = str(Path(python).parent / "transcript-clean")
    # (name, command, rows, cores it may use)
    steps: list[tuple[str, list[str], int, int]] = [
        (
            "apply_chat_template",
            [python, script, "template-step", str(source), str(folder)],
            rows,
            1,
        ),
    ]
    command = [cli, "audit", str(source), "--chat-template", str(folder), "--quiet"]
    for n in workers:
        steps.append((f"audit --workers {n}", [*command, "--workers", str(n)], rows, n))
    if importlib.util.find_spec("ray") is not None:
        # A local Ray with every CPU, started and stopped by the run (seconds of it): at the
        # rows, and at RAY_SCALE times them, which tells its start-up from its rate.
        steps.append(("audit --engine ray", [*command, "--engine", "ray"], rows, cpus))
        more = workdir / f"zava-{rows * RAY_SCALE}.jsonl"
        write_rows(more, rows * RAY_SCALE)
        scaled = [cli, "audit", str(more), "--chat-template", str(folder), "--quiet"]
        steps.append(("audit --engine ray", [*scaled, "--engine", "ray"], rows * RAY_SCALE, cpus))
    best: dict[tuple[str, int], dict[str, float]] = {}
    for round_ in range(1, repeat + 1):
        for name, command, n_rows, cores in steps:
            print(f"round {round_}/{repeat}: {name} ({n_rows:,} rows) ...", file=sys.stderr)
            measured = measure(command)
            got = best.setdefault((name, n_rows), {**measured, "rows": n_rows, "cores": cores})
            got["seconds"] = min(got["seconds"], measured["seconds"])
            got["cpu_seconds"] = min(got["cpu_seconds"], measured["cpu_seconds"])
            got["peak_rss_mb"] = max(got["peak_rss_mb"], measured["peak_rss_mb"])
    base = best["apply_chat_template", rows]
    per_row, cpu_per_row = base["seconds"] / rows, base["cpu_seconds"] / rows
    print(f"\n{rows:,} zava rows, template {template.name}, {cpus} cpus; best of {repeat}\n")
    print(
        "| step | rows | seconds | x apply_chat_template | rows/s | cores | rows/s/core "
        "| CPU s | x its CPU | peak RSS |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    results = []
    for (name, n_rows), r in best.items():
        ratio = r["seconds"] / n_rows / per_row
        cpu_ratio = r["cpu_seconds"] / n_rows / cpu_per_row
        rate = n_rows / r["seconds"]
        per_core = rate / r["cores"]
        print(
            f"| {name} | {n_rows:,} | {r['seconds']:.2f} | {ratio:.2f} | {rate:,.1f} "
            f"| {r['cores']:.0f} | {per_core:,.1f} | {r['cpu_seconds']:.1f} | {cpu_ratio:.2f} "
            f"| {r['peak_rss_mb']:,.0f} MB |"
        )
        results.append(
            {
                "step": name,
                **r,
                "x_apply": ratio,
                "x_apply_cpu": cpu_ratio,
                "rows_per_s": rate,
                "rows_per_s_per_core": per_core,
            }
        )
    print(
        "\nx apply_chat_template: wall time per row over the baseline's; x its CPU: CPU time "
        "(every process of the step) per row over the baseline's; rows/s/core: rows/s over the "
        "cores the step may use (--workers N: N; Ray: every CPU)."
    )
    if ("audit --engine ray", rows * RAY_SCALE) in best:
        short, long = (
            best["audit --engine ray", rows]["seconds"],
            best["audit --engine ray", rows * RAY_SCALE]["seconds"],
        )
        rate = rows * (RAY_SCALE - 1) / (long - short)
        start = short - rows / rate
        print(
            f"Ray: {rate:,.1f} rows/s once started ({rate / cpus:,.1f} rows/s/core), start-up "
            f"and the template's load in its workers {start:.1f} s (from its {rows:,}- and "
            f"{rows * RAY_SCALE:,}-row runs)"
        )
    one = best.get(("audit --workers 1", rows))
    if one is not None:
        verdict = "met" if one["seconds"] <= 1.25 * base["seconds"] else "NOT met"
        print(f"\n{TARGET}: {one['seconds'] / base['seconds']:.2f}x, {verdict}")
    return results

"""The HTML audit report in a real headless browser (Debian's `chromium`).

The browser is driven over the Chrome DevTools protocol on a pipe (`--remote-debugging-pipe`:
NUL-separated JSON on file descriptors 3 and 4), so no websocket library is needed. Without a
browser the test skips, saying why; with the `CI` variable set it fails instead.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from transcript_clean.audit import audit
from transcript_clean.audit.report import write_report

BROWSERS = ("chromium", "chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
)
# Gives the browser the pipe's two ends as file descriptors 3 (commands) and 4 (replies).
TRAMPOLINE = "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); " \
    "os.execv(sys.argv[3], sys.argv[3:])"  # fmt: skip
TIMEOUT = 30.0


def find_browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path is not None:
            return path
    reason = f"chromium not found: none of {', '.join(BROWSERS)} is on PATH"
    if os.environ.get("CI"):
        pytest.fail(f"{reason}, and CI must run this test (.ci/run installs it)")
    pytest.skip(reason)


class Browser:
    """One headless browser, one page, spoken to over the DevTools pipe."""

    def __init__(self, executable: str, profile: Path) -> None:
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", TRAMPOLINE, str(to_browser), str(from_browser), executable,
             *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(to_browser, from_browser),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        attached = self.call("Target.attachToTarget", targetId=target, flatten=True)
        self.session: str | None = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if getattr(self, "session", None) is not None:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result
            self.events.append(reply)

    def wait_for(self, event: str) -> None:
        while not any(e.get("method") == event for e in self.events):
            self.events.append(self._receive())

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise TimeoutError("the browser did not answer in time")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError(f"the browser exited (status {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def open(self, page: Path, width: int = 1200, height: int = 1600) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self.events.clear()
        self.call("Page.navigate", url=page.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return reply["result"].get("value")

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (failed loads, CSP)."""
        errors = []
        for event in self.events:
            params = event.get("params", {})
            if event.get("method") == "Runtime.consoleAPICalled" and params["type"] in (
                "error",
                "assert",
            ):
                errors.append(" ".join(str(a.get("value")) for a in params["args"]))
            elif event.get("method") == "Runtime.exceptionThrown":
                errors.append(params["exceptionDetails"].get("text", "exception"))
            elif event.get("method") == "Log.entryAdded" and params["entry"]["level"] == "error":
                errors.append(params["entry"]["text"])
        return errors

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        path.write_bytes(base64.b64decode(data["data"]))

    def close(self) -> None:
        try:
            self.session = None
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._replies)


def png_colors(path: Path) -> tuple[int, int, int]:
    """Width, height and the number of distinct colours of an 8-bit RGB or RGBA PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    chunks: dict[bytes, bytes] = {}
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunks[kind] = chunks.get(kind, b"") + data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert depth == 8 and color in (2, 6), f"unexpected PNG: depth {depth}, colour type {color}"
    size = 4 if color == 6 else 3
    raw = zlib.decompress(chunks[b"IDAT"])
    stride = width * size
    previous = bytearray(stride)
    colors = set()
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):  # undo the row's filter (PNG spec, section 9)
            left = line[i - size] if i >= size else 0
            up, corner = previous[i], previous[i - size] if i >= size else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 0xFF
        colors.update(bytes(line[i : i + 3]) for i in range(0, stride, size * 7))
        previous = line
    return width, height, len(colors)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Any:
    executable = find_browser()
    b = Browser(executable, tmp_path_factory.mktemp("profile"))
    yield b
    b.close()


def test_console_errors_are_seen(browser: Browser, tmp_path: Path) -> None:
    """The check below could fail: a page with a script error and a missing image is caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!doctype html><title>bad</title><img src="missing.png">'
        '<script>console.error("boom")</script>',
        encoding="utf-8",
    )
    browser.open(page)
    errors = browser.console_errors()
    assert any("boom" in e for e in errors), errors
    assert any("missing.png" in e or "ERR_FILE_NOT_FOUND" in e for e in errors), errors


def test_html_report_in_a_browser(browser: Browser, tmp_path: Path) -> None:
    rows = [
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        [
            {"role": "user", "content": "<script>console.error('injected')</script>"},
            {"role": "assistant", "content": "one"},
            {"role": "assistant", "content": "two"},
        ],
        [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "x", "content": "r"},
            {"role": "assistant", "content": "yo"},
        ],
        [{"role": "user", "content": "hi"}],
    ]
    source = tmp_path / "train.jsonl"
    source.write_text("".join(json.dumps({"messages": m}) + "\n" for m in rows), encoding="utf-8")
    baseline = tmp_path / "summary.json"
    baseline.write_text(
        json.dumps({"rows_in": 4, "stats": [{"code": "orphan_tool_result", "rows": 2}]}),
        encoding="utf-8",
    )
    report = tmp_path / "audit.html"
    result = audit(str(source), baseline=baseline, max_error_rate=0.5, max_drift=0.1)
    write_report(result, report)

    browser.open(report)
    assert browser.console_errors() == []
    found = browser.evaluate(
        """JSON.stringify({
        title: document.title,
        tables: document.querySelectorAll("table").length,
        stats: [...document.querySelectorAll("table")[1].querySelectorAll("tbody tr")]
            .map(tr => tr.cells[0].textContent),
        bars: document.querySelectorAll(".chart svg rect").length,
        chart: (() => { const r = document.querySelector(".chart svg").getBoundingClientRect();
                        return [Math.round(r.width), Math.round(r.height)]; })(),
        labels: [...document.querySelectorAll(".chart svg text")].map(t => t.textContent),
        scripts: document.querySelectorAll("script").length,
        shown: [...document.querySelectorAll("pre")].some(
            p => p.textContent.includes("<script>console.error('injected')</script>")),
        failed: document.querySelector(".badge.fail") && document.querySelector(".badge.fail")
            .textContent,
        })"""
    )
    page = json.loads(found)
    assert page["title"].startswith("Audit of")
    assert page["tables"] == 4  # gates, stats, drift, the profile's distributions
    assert page["stats"] == ["orphan_tool_result", "consecutive_assistant", "no_assistant_turn"]
    assert page["bars"] >= 3 + 4  # a bar per code, a legend swatch per action
    assert page["chart"][0] > 600 and page["chart"][1] > 100
    for label in ("orphan_tool_result", "consecutive_assistant", "25.00%"):
        assert label in page["labels"]
    assert page["scripts"] == 0
    assert page["shown"]  # the user's <script> is text on the page, not a script
    assert page["failed"] == "2 gate(s) failed"

    shot = tmp_path / "report.png"
    browser.screenshot(shot)
    width, height, colors = png_colors(shot)
    assert (width, height) == (1200, 1600)
    assert colors > 8, "the screenshot looks blank"
    print(f"screenshot: {shot}")


def profile_report(folder: Path) -> Path:
    """The HTML report of a night with reasoning-only turns planted, against the night before,
    with two earlier nights as its history and gates on the profile."""
    import dataclasses

    from audit_rows import generated_rows, plant_reasoning_only, write_rows

    from transcript_clean.audit.history import Night, load_history
    from transcript_clean.audit.profile_drift import parse_drift_limit

    before = write_rows(folder / "night1.parquet", generated_rows())
    rows = generated_rows()
    plant_reasoning_only(rows, 8)
    tonight = write_rows(folder / "night2.parquet", rows)
    audit(before, stats_out=folder / "stats" / "2026-11-29")
    history = load_history(folder / "stats")
    earlier = Night("2026-11-28", {**history[0].figures, "error_rate": 0.05})
    gates = [parse_drift_limit(t) for t in ("turns.reasoning_only=2pp", "chars.p95=1.25x")]
    result = audit(
        tonight,
        baseline=folder / "stats" / "2026-11-29",
        max_error_rate=0.3,
        max_profile_drift=gates,
        history=folder / "stats",
    )
    result = dataclasses.replace(result, history=[earlier, *result.history])
    report = folder / "audit.html"
    write_report(result, report)
    return report


def test_the_profile_charts_in_a_browser(browser: Browser, tmp_path: Path) -> None:
    browser.open(profile_report(tmp_path))
    assert browser.console_errors() == []
    found = browser.evaluate(
        """JSON.stringify({
        turns: [...document.querySelectorAll("#turn-classes rect.turn")]
            .map(r => r.querySelector("title").textContent),
        bar: Math.round(document.querySelector("#turn-classes svg").getBoundingClientRect().width),
        bins: document.querySelectorAll(".hist rect.bin").length,
        hists: [...document.querySelectorAll(".hist .label")].map(p => p.textContent),
        drift: [...document.querySelectorAll("#profile-drift tbody tr")]
            .map(tr => [...tr.cells].map(c => c.textContent)),
        history: document.querySelectorAll("#history svg").length,
        nights: document.querySelectorAll("#history circle.night").length,
        limits: [...document.querySelectorAll("#history .chart")]
            .filter(c => c.querySelector("line.limit"))
            .map(c => c.querySelector(".label").textContent),
        failed: document.querySelector(".badge.fail").textContent,
        scripts: document.querySelectorAll("script").length,
        })"""
    )
    page = json.loads(found)
    assert any(t.startswith("reasoning_only: ") for t in page["turns"]), page["turns"]
    assert any(t.startswith("text: ") for t in page["turns"])
    assert page["bar"] > 600
    assert page["bins"] > 10
    assert (
        "characters per row" in page["hists"] and "characters per assistant turn" in page["hists"]
    )
    reasoning = next(row for row in page["drift"] if row[0] == "turns.reasoning_only")
    assert reasoning[1] == "0.00%" and reasoning[3].startswith("+")
    assert page["history"] >= 5  # error rate, rows, turn classes, lengths
    assert page["nights"] == 3 * page["history"]  # two earlier nights and tonight on each
    assert {"error_rate", "turns.reasoning_only", "chars.p95"} <= set(page["limits"])
    assert page["failed"] == "1 gate(s) failed"
    assert page["scripts"] == 0

    browser.evaluate("document.getElementById('turn-classes').scrollIntoView()")
    shot = tmp_path / "profile.png"
    browser.screenshot(shot)
    assert png_colors(shot)[2] > 8, "the screenshot looks blank"

"""Headless chromium driven over the Chrome DevTools Protocol (websockets), for the report's browser test.

:func:`load_page` starts ``chromium --headless --remote-debugging-port=0`` with a throw-away profile and the
network off (every host resolves to nothing), opens one page, loads a file URL and returns what a person would
see and what a developer's console would show: console messages and uncaught exceptions, every request the page
made, a JavaScript probe of each plot (its SVG's size and marks), the text of the headings, table headers,
captions and list items, and a full-page PNG screenshot.

Protocol: https://chromedevtools.github.io/devtools-protocol/ (Target.createTarget / attachToTarget with
``flatten``, Runtime, Log, Network, Page.captureScreenshot).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PROBE = """(() => [...document.querySelectorAll('figure.plot')].map(f => {
  const svg = f.querySelector('svg'); const r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  return {id: f.id, svg: !!svg, width: r.width, height: r.height,
          marks: svg ? svg.querySelectorAll('path, use, rect, line, polyline').length : 0,
          paths: svg ? svg.querySelectorAll('path').length : 0,
          text: svg ? svg.querySelectorAll('text').length : 0};
}))()"""


HEADINGS = """[...document.querySelectorAll('h1, h2, h3, h4, th, figcaption, li')].map(e => e.innerText)"""
"""The text of every heading, table header, caption and list item (where a missing name shows as 'None')."""


def find_browser() -> str | None:
    """The chromium executable on PATH (``$GPUMATCH_CHROMIUM`` first)."""
    own = os.environ.get("GPUMATCH_CHROMIUM")
    if own:
        return own
    return next((p for p in (shutil.which(b) for b in BROWSERS) if p), None)


@dataclass
class PageLoad:
    console: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    plots: list[dict[str, Any]] = field(default_factory=list)
    title: str = ""
    headings: list[str] = field(default_factory=list)
    screenshot: bytes = b""


class _Session:
    def __init__(self, ws: Any) -> None:
        self.ws, self.next_id, self.events = ws, 0, []  # type: list[dict[str, Any]]

    async def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await self.ws.send(json.dumps(msg))
        while True:
            got = json.loads(await self.ws.recv())
            if got.get("id") == self.next_id:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return got.get("result", {})
            self.events.append(got)

    async def wait_for(self, method: str, timeout_s: float) -> None:
        if any(e.get("method") == method for e in self.events):
            return
        async def loop() -> None:
            while True:
                got = json.loads(await self.ws.recv())
                self.events.append(got)
                if got.get("method") == method:
                    return
        await asyncio.wait_for(loop(), timeout_s)


def _ws_url(proc: subprocess.Popen[str], timeout_s: float) -> str:
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        m = re.search(r"DevTools listening on (ws://\S+)", line)
        if m:
            return m.group(1)
        if len(seen) > 200:
            break
    raise RuntimeError("chromium did not start its DevTools endpoint:\n" + "".join(seen[-20:]))


async def _drive(url: str, page: str, width: int, timeout_s: float) -> PageLoad:
    import websockets

    out = PageLoad()
    async with websockets.connect(url, max_size=64 * 2**20) as ws:
        s = _Session(ws)
        target = (await s.call("Target.createTarget", {"url": "about:blank"}))["targetId"]
        sid = (await s.call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        for domain in ("Runtime", "Log", "Network", "Page"):
            await s.call(f"{domain}.enable", session=sid)
        await s.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1,
                                                            "mobile": False}, session=sid)
        s.events.clear()
        await s.call("Page.navigate", {"url": page}, session=sid)
        await s.wait_for("Page.loadEventFired", timeout_s)
        probe = await s.call("Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=sid)
        out.plots = probe["result"]["value"]
        out.headings = (await s.call("Runtime.evaluate", {"expression": HEADINGS, "returnByValue": True},
                                     session=sid))["result"]["value"]
        out.title = (await s.call("Runtime.evaluate", {"expression": "document.title", "returnByValue": True},
                                  session=sid))["result"]["value"]
        shot = await s.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}, session=sid)
        out.screenshot = base64.b64decode(shot["data"])
        for e in s.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled":
                out.console.append({"type": p["type"], "text": " ".join(str(a.get("value")) for a in p["args"])})
            elif m == "Log.entryAdded":
                out.console.append({"type": p["entry"]["level"], "text": p["entry"]["text"]})
            elif m == "Runtime.exceptionThrown":
                out.exceptions.append(p["exceptionDetails"].get("text", "exception"))
            elif m == "Network.requestWillBeSent":
                out.requests.append(p["request"]["url"])
    return out


def load_page(browser: str, html_file: Path, width: int = 1200, timeout_s: float = 40.0) -> PageLoad:
    """Load ``html_file`` in headless ``browser`` offline and report what happened (module docstring)."""
    # chromium's helper processes may still write to the profile while the main process exits: the whole process
    # group is stopped below, and a file they leave behind does not fail the test
    with tempfile.TemporaryDirectory(prefix="gpumatch-chromium-", ignore_cleanup_errors=True) as profile:
        args = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--hide-scrollbars",
                "--disable-extensions", "--disable-background-networking", f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-port=0", "about:blank"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            url = _ws_url(proc, timeout_s)
            return asyncio.run(_drive(url, html_file.resolve().as_uri(), width, timeout_s))
        finally:
            _stop_group(proc)


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to chromium's process group (its own session), SIGKILL after 10 s; then reap the main process."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(10)
            return
        except subprocess.TimeoutExpired:
            continue

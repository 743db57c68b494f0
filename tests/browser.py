"""Pages as a real browser draws them: headless Chromium driven over the DevTools protocol.

`load_page` opens a local file in Debian's Chromium (`make chromium` installs it), at a given viewport
width, and returns what a reader of the page would meet: console errors and uncaught exceptions, any
request that left the machine's files (a page that must open offline makes none), the document's
scroll width against the viewport's, the values of extra JavaScript expressions and a PNG screenshot.
`chromium_or_skip` finds the browser, or skips the test with the reason (under CI=true it fails).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

GITHUB_CONTENT_WIDTH = 1012
"""The width, in CSS pixels, of a pull request's or a job summary's content column on github.com."""

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--hide-scrollbars", "--mute-audio",
)
"""Flags for a headless Chromium on a machine without a network or a screen (seen to work here as root)."""

LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:", "chrome:", "devtools:")


@dataclass(frozen=True)
class PageView:
    """What a browser showed of one page: errors, requests that left the file, widths, values, picture."""

    console_errors: list[str]
    external_requests: list[str]
    scroll_width: int
    viewport_width: int
    values: dict[str, Any] = field(default_factory=dict)
    screenshot: bytes = b""

    @property
    def scrolls_sideways(self) -> bool:
        """Whether the document is wider than the viewport (a horizontal scroll bar would show)."""
        return self.scroll_width > self.viewport_width


def chromium_path() -> str | None:
    """The Chromium executable on this machine, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def chromium_or_skip() -> str:
    """The Chromium executable; without one the test is skipped with the reason, or fails under CI=true."""
    found = chromium_path()
    if found:
        return found
    reason = "headless Chromium not installed (make chromium installs Debian's package where apt exists)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def load_page(path: Path, *, width: int = GITHUB_CONTENT_WIDTH, height: int = 900,
              expressions: Mapping[str, str] | None = None, settle: float = 0.3,
              timeout: float = 60.0) -> PageView:
    """Open `path` in headless Chromium at `width` x `height` and return what it drew."""
    executable = chromium_or_skip()
    with tempfile.TemporaryDirectory(prefix="speedbench-chromium-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [executable, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            port = _devtools_port(Path(profile), process, timeout)
            return asyncio.run(asyncio.wait_for(
                _inspect(port, Path(path).resolve().as_uri(), width, height, dict(expressions or {}), settle),
                timeout))
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _devtools_port(profile: Path, process: subprocess.Popen[bytes], timeout: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before it listened")
        if marker.is_file():
            first = marker.read_text().split("\n", 1)[0].strip()
            if first.isdigit():
                return int(first)
        time.sleep(0.05)
    raise RuntimeError("chromium did not open its DevTools port in time")


class _Session:
    """One page's DevTools connection: numbered commands, and the events that arrive between them."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result, keeping every event that arrives meanwhile."""
        number = next(self._ids)
        await self._socket.send_str(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads((await self._socket.receive()).data)
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    async def until(self, method: str) -> None:
        """Wait for the event `method` (already received ones count)."""
        while not any(event.get("method") == method for event in self.events):
            self.events.append(json.loads((await self._socket.receive()).data))


async def _inspect(port: int, url: str, width: int, height: int, expressions: dict[str, str],
                   settle: float) -> PageView:
    async with aiohttp.ClientSession() as http:
        async with http.put(f"http://127.0.0.1:{port}/json/new?about:blank") as response:
            target = await response.json()
        async with http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0) as socket:
            page = _Session(socket)
            for domain in ("Runtime", "Log", "Network", "Page"):
                await page.call(f"{domain}.enable")
            await page.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                            deviceScaleFactor=1, mobile=False)
            await page.call("Page.navigate", url=url)
            await page.until("Page.loadEventFired")
            await asyncio.sleep(settle)
            values = {name: await _evaluate(page, expression) for name, expression in expressions.items()}
            scroll_width = await _evaluate(page, "document.documentElement.scrollWidth")
            viewport_width = await _evaluate(page, "document.documentElement.clientWidth")
            shot = await page.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
            return PageView(console_errors=_errors(page.events), external_requests=_external(page.events),
                            scroll_width=int(scroll_width), viewport_width=int(viewport_width),
                            values=values, screenshot=base64.b64decode(shot["data"]))


async def _evaluate(page: _Session, expression: str) -> Any:
    result = await page.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
    if "exceptionDetails" in result:
        raise RuntimeError(f"{expression}: {result['exceptionDetails'].get('text')}")
    return result["result"].get("value")


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            found.append(details.get("exception", {}).get("description") or details.get("text", "exception"))
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            found.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            found.append(params["entry"].get("text", "error"))
    return found


def _external(events: list[dict[str, Any]]) -> list[str]:
    urls = (event["params"]["request"]["url"] for event in events if event.get("method") == "Network.requestWillBeSent")
    return [url for url in urls if not url.startswith(LOCAL_SCHEMES)]

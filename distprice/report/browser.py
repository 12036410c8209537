"""Headless Chromium, driven over the DevTools protocol: a page's PNG, its rendered text (shadow roots
included: Bokeh draws its widgets there) and the errors it logged. Draws the PNG pictures of
:func:`~.shape.draw_shape`, and checks in the tests that a report or the dashboard page opens cleanly.

Needs a Chromium or Chrome executable on the ``PATH`` (Debian: ``apt-get install chromium``); it runs with
a fresh profile in a temporary folder and no network of its own (no sync, updates or background fetches).
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import OptionError
from ..tables import write_file

EXECUTABLES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--remote-debugging-port=0",
)
BOKEH_RENDERED = "window.Bokeh !== undefined && Object.keys(Bokeh.index).length > 0"
"""A JavaScript test that Bokeh has drawn the page's plots."""
TEXT = """(() => { const out = [];
  const walk = (node) => { if (node.nodeType === 3) out.push(node.textContent);
    if (node.shadowRoot) walk(node.shadowRoot); for (const child of node.childNodes) walk(child); };
  walk(document.body); return out.join(" ").replace(/\\s+/g, " "); })()"""
MAX_HEIGHT = 20_000
"""Pixels of page height captured at most."""


@dataclass(frozen=True)
class Rendered:
    """A page as headless Chromium showed it: its text, the errors it logged (uncaught exceptions,
    ``console.error`` calls, failed loads) and a PNG of the whole page."""

    text: str
    errors: list[str]
    png: bytes


def chromium() -> str | None:
    """The Chromium (or Chrome) executable on the PATH, or None."""
    return next((path for path in map(shutil.which, EXECUTABLES) if path), None)


def render_page(
    url: str,
    *,
    width: int = 1280,
    height: int = 900,
    ready: str = BOKEH_RENDERED,
    settle: float = 0.25,
    timeout: float = 60.0,
) -> Rendered:
    """Opens ``url`` in headless Chromium at ``width`` × ``height`` CSS pixels, waits for the JavaScript
    test ``ready`` to hold (then ``settle`` seconds more for painting) and returns what it showed;
    :class:`OptionError` without Chromium, TimeoutError when the page is not ready in ``timeout`` seconds."""
    executable = chromium()
    if executable is None:
        raise OptionError(
            f"no Chromium found (looked for {', '.join(EXECUTABLES)}); install it, e.g. apt-get install chromium"
        )
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="distprice-browser") as thread:
        # a thread of its own: the caller may be running an event loop already
        return thread.submit(asyncio.run, _render(executable, url, width, height, ready, settle, timeout)).result()


def screenshot(page: str, output) -> Path:
    """A PNG of the HTML text ``page`` at ``output`` (written atomically); returns the path."""
    with tempfile.TemporaryDirectory(prefix="distprice-page-") as folder:
        source = Path(folder) / "page.html"
        source.write_text(page, encoding="utf-8")
        png = render_page(source.as_uri()).png
    return write_file(png, output)


class _Devtools:
    """One DevTools websocket: commands answered by id, events kept in order."""

    def __init__(self, connection, timeout: float):
        self.connection, self.timeout = connection, timeout
        self.last_id, self.answers, self.events = 0, {}, []
        self.arrived = asyncio.Event()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while (message := await self.connection.read_message()) is not None:
            data = json.loads(message)
            if "id" in data:
                self.answers.pop(data["id"]).set_result(data)
            else:
                self.events.append(data)
                self.arrived.set()

    async def send(self, method: str, session: str | None = None, **params) -> dict:
        self.last_id += 1
        answer = asyncio.get_running_loop().create_future()
        self.answers[self.last_id] = answer
        message = {"id": self.last_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        await self.connection.write_message(json.dumps(message))
        data = await asyncio.wait_for(answer, self.timeout)
        if "error" in data:
            raise RuntimeError(f"DevTools {method}: {data['error'].get('message')}")
        return data.get("result", {})

    async def wait_for(self, method: str, deadline: float) -> None:
        while not any(e["method"] == method for e in self.events):
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), max(0.0, deadline - time.monotonic()))

    def errors(self) -> list[str]:
        found = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                found.append("exception: " + details.get("exception", {}).get("description", details.get("text", "")))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(
                    "console: "
                    + " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                )
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
                entry = params["entry"]
                found.append(f"log: {entry.get('text', '')} {entry.get('url', '')}".strip())
        return found


async def _render(
    executable: str, url: str, width: int, height: int, ready: str, settle: float, timeout: float
) -> Rendered:
    from tornado.websocket import websocket_connect

    deadline = time.monotonic() + timeout
    with tempfile.TemporaryDirectory(prefix="distprice-chromium-", ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            port_file = Path(profile) / "DevToolsActivePort"
            while not (port_file.exists() and len(port_file.read_text().split()) == 2):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{executable} did not start its DevTools server")
                await asyncio.sleep(0.05)
            port, path = port_file.read_text().split()
            connection = await websocket_connect(f"ws://127.0.0.1:{port}{path}", max_message_size=256 * 2**20)
            devtools = _Devtools(connection, timeout)
            try:
                return await _show(devtools, url, width, height, ready, settle, deadline)
            finally:
                connection.close()
                devtools.reader.cancel()
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _show(
    devtools: _Devtools, url: str, width: int, height: int, ready: str, settle: float, deadline: float
) -> Rendered:
    target = (await devtools.send("Target.createTarget", url="about:blank"))["targetId"]
    session = (await devtools.send("Target.attachToTarget", targetId=target, flatten=True))["sessionId"]
    for domain in ("Page", "Runtime", "Log"):
        await devtools.send(f"{domain}.enable", session)
    await devtools.send(
        "Emulation.setDeviceMetricsOverride", session, width=width, height=height, deviceScaleFactor=1, mobile=False
    )
    await devtools.send("Page.navigate", session, url=url)
    await devtools.wait_for("Page.loadEventFired", deadline)
    while not (await devtools.send("Runtime.evaluate", session, expression=ready, returnByValue=True))["result"].get(
        "value"
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} was not ready ({ready}) in time")
        await asyncio.sleep(0.1)
    await asyncio.sleep(settle)
    text = (await devtools.send("Runtime.evaluate", session, expression=TEXT, returnByValue=True))["result"]["value"]
    size = (await devtools.send("Page.getLayoutMetrics", session))["cssContentSize"]
    full = min(MAX_HEIGHT, max(height, int(size["height"])))
    await devtools.send(
        "Emulation.setDeviceMetricsOverride", session, width=width, height=full, deviceScaleFactor=1, mobile=False
    )
    await asyncio.sleep(settle)
    shot = await devtools.send("Page.captureScreenshot", session, format="png")
    return Rendered(text, devtools.errors(), base64.b64decode(shot["data"]))

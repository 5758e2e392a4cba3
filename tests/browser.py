# SPDX-License-Identifier: MIT
"""Headless Chromium driven through the DevTools protocol, a PNG reader,
and the speedscope install: what tests/trace/test_browser.py and
scripts/doc-pictures.py share.

Chromium is Debian's `chromium`; the protocol goes over a WebSocket with
Debian's python3-websocket.  Nothing here fetches anything but speedscope
from the npm registry, once, into a cache outside the clone."""
import base64
import contextlib
import functools
import http.server
import json
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request
import zlib

from ftpadtest import NPM_CACHE, made_once, npm

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

# speedscope, pinned: its DOM (the view tabs, the sandwich table) is what the
# tests read, so a new version is a deliberate change here.
SPEEDSCOPE_VERSION = "1.25.0"

# How long to wait for the browser to start or a page to get ready.  A
# limit on waiting, not a measure: nothing asserts on how long it took.
PATIENCE = 90


class Chromium:
    """One headless Chromium with one page, spoken to over CDP."""

    def __init__(self, width=1200, height=800):
        try:
            import websocket
        except ImportError:
            raise RuntimeError("python3-websocket is missing: run scripts/install-deps.sh")
        if not os.access(CHROMIUM, os.X_OK):
            raise RuntimeError("chromium is missing: run scripts/install-deps.sh")
        self.profile = tempfile.mkdtemp(prefix="ftpad-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
             "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-port=0", "--remote-allow-origins=*",
             f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, start_new_session=True)  # its helpers share its process group
        try:
            self.ws = websocket.create_connection(self._page_socket(), timeout=PATIENCE)
        except BaseException:
            self.close()
            raise
        self.next_id = 0
        self.events = []
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.set_viewport(width, height)

    def _page_socket(self):
        # Chromium prints "DevTools listening on ws://127.0.0.1:PORT/..." on
        # stderr; the page's own socket is listed at /json/list.
        port = None
        for line in self.proc.stderr:
            if "DevTools listening on ws://" in line:
                port = line.split("ws://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1]
                break
        if port is None:
            raise RuntimeError(f"{CHROMIUM} did not start (exit {self.proc.wait()})")
        # Keep reading stderr so that Chromium never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stderr], daemon=True).start()
        deadline = time.monotonic() + PATIENCE
        while True:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as r:
                pages = [t for t in json.load(r) if t["type"] == "page"]
            if pages or time.monotonic() > deadline:
                return pages[0]["webSocketDebuggerUrl"]
            time.sleep(0.1)

    def call(self, method, **params):
        """Send one command, return its result; events that arrive meanwhile
        are kept in self.events."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]
            self.events.append(msg)

    def set_viewport(self, width, height):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def open(self, url):
        """Navigate and wait for the load event."""
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")

    def wait_event(self, method):
        deadline = time.monotonic() + PATIENCE
        while not any(e.get("method") == method for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {method} from Chromium")
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                self.events.append(json.loads(self.ws.recv()))
            finally:
                self.ws.settimeout(PATIENCE)

    def eval(self, expression):
        """The value of a JavaScript expression in the page (JSON-able)."""
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression):
        """Poll until the expression is true; its last value otherwise."""
        deadline = time.monotonic() + PATIENCE
        while True:
            value = self.eval(expression)
            if value or time.monotonic() > deadline:
                return value
            time.sleep(0.1)

    def click(self, x, y):
        """A real left click at page coordinates, as a user makes it."""
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left",
                      clickCount=0 if kind == "mouseMoved" else 1)

    def screenshot(self, width=None, height=None):
        """A PNG of the page's top-left corner (the whole viewport by default),
        after two animation frames, so that what the page drew in its last
        requestAnimationFrame (speedscope's canvas) is painted."""
        self.eval("new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))")
        params = {"format": "png"}
        if width and height:
            params["clip"] = {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

    def close(self):
        """Stop the browser and every helper process it started (its
        process group, led by the browser), then remove its profile: a
        renderer still writing would otherwise race the removal."""
        with contextlib.suppress(Exception):
            self.ws.close()
        group = self.proc.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        try:
            self.proc.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + PATIENCE
        with contextlib.suppress(ProcessLookupError):
            while time.monotonic() < deadline:
                os.killpg(group, 0)  # raises once the last helper is gone
                time.sleep(0.05)
        shutil.rmtree(self.profile)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def png_pixels(png):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB or RGBA
    PNG, decoded here with zlib so that the check depends on nothing else."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, ihdr = 8, b"", None
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", data)
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = ihdr
    assert depth == 8 and colour in (2, 6) and interlace == 0, ihdr
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def colour_census(png):
    """(distinct colours, share of pixels that are not the most common
    colour): a blank page has one colour and a share of 0."""
    _, _, rows = png_pixels(png)
    counts = {}
    for row in rows:
        for px in row:
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    return len(counts), 1 - max(counts.values()) / total


@functools.lru_cache(maxsize=None)
def speedscope_dir():
    """speedscope's static files (index.html and its scripts), installed
    with npm once into NPM_CACHE/speedscope-VERSION, keyed by the version;
    the install goes into a temporary beside it and is renamed."""
    home = NPM_CACHE / f"speedscope-{SPEEDSCOPE_VERSION}"
    made_once(home, lambda tmp: subprocess.run(
        [npm(), "install", "--no-audit", "--no-fund", "--no-save", "--prefix", str(tmp),
         f"speedscope@{SPEEDSCOPE_VERSION}"], check=True, capture_output=True, text=True))
    return home / "node_modules" / "speedscope" / "dist" / "release"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serve(directory):
    """A local HTTP server for DIRECTORY on a free port; yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

"""Launching Debian's Chromium through Playwright for the browser tests.

Playwright's own browser download is never used (these machines cannot download one, and the
book must not need it): we drive the system Chromium at ``/usr/bin/chromium``. Where it is
missing the browser tests skip with instructions — except under CI (``CI`` set), where a
missing browser is a failure, so CI can never pass with the browser tests silently skipped.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

HOW_TO_GET_ONE = (
    "No Chromium found at /usr/bin/chromium. Install Debian's: `sudo apt-get install chromium`; "
    "or, without root, `.venv/bin/playwright install chromium` and set ATTNBOOK_CHROMIUM to "
    "the browser it downloaded."
)


def chromium_path() -> str | None:
    """Path of the Chromium executable to use, or None."""
    env = os.environ.get("ATTNBOOK_CHROMIUM")
    if env:
        return env if os.path.exists(env) else None
    for path in CHROMIUM_CANDIDATES:
        if os.path.exists(path):
            return path
    return shutil.which("chromium")


def require_chromium() -> str:
    """Return the Chromium path; skip the test (fail under CI) when there is none."""
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI is set but no browser is available. " + HOW_TO_GET_ONE)
        pytest.skip(HOW_TO_GET_ONE)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("CI is set but the playwright package is missing (pip install playwright)")
        pytest.skip("the playwright package is missing: pip install -r requirements-test.txt")
    return path


def launch(playwright, **kwargs):
    """Launch headless Chromium (a ``Browser``) with the flags this project uses.

    Playwright gives each launch a fresh temporary profile.
    """
    path = require_chromium()
    return playwright.chromium.launch(
        executable_path=path, headless=True, args=CHROMIUM_ARGS, **kwargs
    )


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature fixed by the base class
        pass


@contextlib.contextmanager
def serve(directory: Path):
    """Serve ``directory`` on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()

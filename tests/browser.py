"""A real headless Chromium for the tests that check a page as a person would see it.

`inspect(page, script, tmp, width=...)` copies the page, appends the test's
script (never the product's) and a collector, loads the copy in headless
Chromium at the given window width and returns what the script left in
`window.verdict`, with `errors`: every uncaught exception, rejected promise
and `console.error` the page raised. It reads the verdict from the DOM
Chromium dumps, so it needs no driver library. Without Chromium the calling
test skips with one line saying how to install it (`.ci/run` installs it
from Debian's packages where it can).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM_MISSING = "chromium not installed: apt-get install chromium"
CHROMIUM_TIMEOUT_S = 120
WINDOW_HEIGHT_PX = 900

# Installed first in <head>, so it sees errors thrown by the page's own scripts.
_COLLECTOR = """<script>
window.__errors = [];
window.addEventListener("error", (event) => window.__errors.push("error: " + event.message));
window.addEventListener("unhandledrejection", (event) => window.__errors.push("rejection: " + event.reason));
const __consoleError = console.error.bind(console);
console.error = (...args) => { window.__errors.push("console.error: " + args.join(" ")); __consoleError(...args); };
</script>"""

# Appended after the test's script: writes window.verdict and the errors where --dump-dom shows them.
_REPORTER = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const pre = document.createElement("pre");
  pre.id = "__verdict";
  pre.textContent = JSON.stringify({verdict: window.verdict === undefined ? null : window.verdict, errors: window.__errors});
  document.body.appendChild(pre);
}, 0));
</script>"""


def chromium() -> str:
    """The Chromium to drive, or a skip naming how to install it."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    if found is None:
        pytest.skip(CHROMIUM_MISSING)
    return found


def inspect(page: Path, script: str, tmp: Path, *, width: int = 1280, height: int = WINDOW_HEIGHT_PX) -> dict:
    """Load `page` with `script` appended in headless Chromium at `width` x `height` px: {"verdict": ..., "errors": [...]}.

    `script` is JavaScript (no <script> tags) that sets `window.verdict` to
    anything JSON can hold; it runs after the page's own scripts, and the
    verdict is read after the load event.
    """
    browser = chromium()
    text = page.read_text()
    if text.count("</body>") != 1 or text.count("<head>") != 1:
        raise AssertionError(f"{page} must have exactly one <head> and one </body>")
    copy = tmp / f"inspected-{width}-{page.name}"
    copy.write_text(
        text.replace("<head>", "<head>" + _COLLECTOR, 1).replace("</body>", f"<script>\n{script}\n</script>{_REPORTER}</body>", 1)
    )
    command = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={width},{height}",
        f"--user-data-dir={tmp / f'profile-{width}'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        copy.as_uri(),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S, check=False)
    found = re.search(r'<pre id="__verdict">(.*?)</pre>', result.stdout, re.DOTALL)
    assert found, f"no verdict in the DOM Chromium dumped (exit {result.returncode}): {result.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))

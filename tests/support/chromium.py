"""Headless Chromium for the tests that look at a page the gateway renders (the HTML replay
report, the sign-off sheet, the experiment plot), and the screenshots the README shows.

    screenshot(Path("sheet.html"), tmp_path / "signoff-sheet.png", "1000,1400")

A test skips, saying why, when Chromium is not installed (scripts/test.sh installs it in CI).
``GATEWAY_UPDATE_SCREENSHOTS=1`` copies each screenshot to docs/images/ under its name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (apt-get install chromium to run this test)")
    return found


def screenshot(page: Path, png: Path, size: str, *, min_bytes: int = 5_000) -> None:
    """Open ``page`` in headless Chromium and save what it shows as ``png``."""
    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run", "--hide-scrollbars",
         f"--window-size={size}", f"--screenshot={png}", page.as_uri()],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > min_bytes
    if os.environ.get("GATEWAY_UPDATE_SCREENSHOTS"):
        target = REPO / "docs" / "images" / png.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(png, target)


def rendered_dom(page: Path) -> str:
    """The page's DOM after Chromium has rendered it (what a reader's browser shows)."""
    done = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout

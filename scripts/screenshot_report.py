"""Render a judge report in headless Chromium and save a screenshot, to look at it.

Runs `judge demo` into a temporary directory (or takes a report.html you name) and writes
a PNG. Needs Debian's chromium (`apt-get install chromium fonts-noto-cjk`).

Run: python scripts/screenshot_report.py [REPORT_HTML] [--png report.png]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Flags for a closed network: no background connections, no first-run work.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,2400",
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", help="a report.html (default: run judge demo)")
    parser.add_argument("--png", default="report.png", help="where to write the screenshot")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found: apt-get install chromium fonts-noto-cjk", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(args.report) if args.report else Path(tmp) / "demo" / "report.html"
        if not args.report:
            subprocess.run(
                [sys.executable, "-m", "judge", "demo", "--out", str(report.parent)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        png = Path(args.png).resolve()
        subprocess.run(
            [
                browser,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={tmp}/profile",
                f"--screenshot={png}",
                report.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
        )
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

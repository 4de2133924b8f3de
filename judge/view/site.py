"""The viewer as a static folder: index.html, data.js and the assets shipped in the
package (Chart.js, view.js or monitor.js, view.css). It opens from file:// with nothing
fetched, so there is no server to keep running and the folder can be kept as a CI artifact
or sent. `build_view` writes the run history's page, `build_monitor_view` a monitor
state's."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from judge.errors import OutputError
from judge.formatting import escape
from judge.version import __version__
from judge.view.data import data_script, view_data
from judge.view.monitor import monitor_data

# The files of judge/view/assets/ copied into every view's assets/ folder.
ASSETS = ("chart.umd.js", "chart.js.LICENSE.md", "dom.js", "view.js", "view.css")
# ... and into a monitor's page's.
MONITOR_ASSETS = ("chart.umd.js", "chart.js.LICENSE.md", "dom.js", "monitor.js", "view.css")

DEFAULT_OUT = "judge-view"
DEFAULT_MONITOR_OUT = "judge-monitor-view"

# The page runs its own scripts and nothing else: no inline script, nothing from elsewhere.
CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:"


def build_view(
    records: Iterable[Mapping[str, Any]], out: str | os.PathLike[str] = DEFAULT_OUT
) -> Path:
    """Write the viewer of a run history into a folder; returns the path of its index.html.

    Args:
        records: the runs (`RunRecord.to_dict()` of the run store), in any order.
        out: the folder to write (made if missing); index.html, data.js and assets/ in it
            are replaced, nothing else in it is touched.
    """
    data = view_data(records)
    return _write_site(Path(out), ASSETS, data_script(data), index_html(len(data["runs"])))


def build_monitor_view(
    state: str | os.PathLike[str], out: str | os.PathLike[str] = DEFAULT_MONITOR_OUT
) -> Path:
    """Write the page of a monitor state into a folder; returns the path of its index.html.

    The state is read once, read-only, in one short read transaction: a monitor may be
    writing it meanwhile (it is not held up), and the page shows the last batch it
    committed. Build it again to see what came since.

    Args:
        state: the folder `judge monitor` was given as --state (monitor.sqlite in it).
        out: the folder to write (made if missing); index.html, data.js and assets/ in it
            are replaced, nothing else in it is touched.
    """
    data = monitor_data(state)
    page = monitor_html(data["state"], len(data["windows"]), len(data["alerts"]))
    return _write_site(Path(out), MONITOR_ASSETS, data_script(data, "JUDGE_MONITOR"), page)


def _write_site(folder: Path, assets: tuple[str, ...], script: str, page: str) -> Path:
    """Write a page's folder: its assets, data.js and index.html."""
    try:
        (folder / "assets").mkdir(parents=True, exist_ok=True)
        for name in assets:
            source = resources.files("judge.view") / "assets" / name
            _write(folder / "assets" / name, source.read_bytes())
        _write(folder / "data.js", script.encode("utf-8"))
        _write(folder / "index.html", page.encode("utf-8"))
    except (FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError) as exc:
        raise OutputError(
            f"cannot write the view into {folder}: {exc.strerror or exc} ({exc.filename}); "
            "give another folder"
        ) from None
    except OSError as exc:
        raise OutputError(
            f"cannot write the view into {folder}: {exc.strerror or exc}; free some space "
            "or give another folder"
        ) from None
    return folder / "index.html"


def _write(path: Path, content: bytes) -> None:
    """Write a file whole: under a temporary name, then renamed (a reader never sees half)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(content)
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def page_html(title: str, header: str, main: str, script: str) -> str:
    """A viewer page: the shared head (CSP, stylesheet), the page's own header and main,
    then its data and scripts (Chart.js, the shared dom.js, the page's `script`)."""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>{escape(title)}</title>
<link rel="stylesheet" href="assets/view.css">
</head>
<body>
<header>
{header}</header>
<main>
{main}</main>
<script src="data.js"></script>
<script src="assets/chart.umd.js"></script>
<script src="assets/dom.js"></script>
<script src="assets/{script}"></script>
</body>
</html>
"""


def index_html(runs: int) -> str:
    """The page: its skeleton, filled by assets/view.js from data.js."""
    title = f"judge runs ({runs})"
    header = f"""<h1>Run history</h1>
<p class="small" id="generated">judge {escape(__version__)}</p>
"""
    main = """<section id="charts-section">
<h2>Metrics across runs</h2>
<p class="small">Each metric's mean per run, in time order; the band is its 95% interval;
the baseline run is the red diamond.</p>
<div id="charts" class="charts"></div>
</section>
<section id="runs-section">
<h2>Runs</h2>
<p class="small">Choose two runs (click their rows), then Compare.</p>
<div class="actions">
<button type="button" id="compare" disabled>Compare</button>
<span id="chosen" class="small"></span>
</div>
<div class="scroll"><table id="runs"></table></div>
</section>
<section id="diff-section" hidden>
<h2 id="diff-title">Per question</h2>
<p id="diff-note" class="small"></p>
<div class="actions" id="diff-controls"></div>
<div class="scroll"><table id="diff"></table></div>
</section>
<section id="conversations-section" hidden>
<h2 id="conversations-title">Conversations</h2>
<p id="conversations-note" class="small"></p>
<div class="scroll"><table id="conversations"></table></div>
</section>
<section id="conversation-section" hidden>
<h2 id="conversation-title">Conversation</h2>
<p id="conversation-note" class="small"></p>
<div id="turns"></div>
</section>
"""
    return page_html(title, header, main, "view.js")


def monitor_html(state: str, windows: int, alerts: int) -> str:
    """The monitor's page: its skeleton, filled by assets/monitor.js from data.js."""
    title = f"judge monitor: {state} ({windows} windows, {alerts} alerts)"
    header = f"""<h1>Monitor</h1>
<p class="small">state <bdi><code>{escape(state)}</code></bdi></p>
<p class="small" id="generated">judge {escape(__version__)}</p>
<p class="small" id="settings"></p>
"""
    main = """<section id="counts-section">
<h2>Traffic</h2>
<div class="scroll"><table id="counts"></table></div>
</section>
<section id="charts-section">
<h2>Windows</h2>
<p class="small">Each metric's mean per closed window; the blue band is its 95% bootstrap
interval. The grey line and band are the baseline's mean and interval (the drop test's
interval of the baseline mean), the dashed line the reference the drop test compares
against; the baseline's own windows are hollow points. A red triangle marks a window that
raised an alert: click it to see the alert's worst traces.</p>
<div id="charts" class="charts"></div>
</section>
<section id="alerts-section">
<h2>Alerts</h2>
<p class="small" id="alerts-note"></p>
<div class="scroll"><table id="alerts"></table></div>
</section>
<section id="alert-section" hidden>
<h2 id="alert-title">Alert</h2>
<p id="alert-note" class="small"></p>
<div class="scroll"><table id="worst"></table></div>
</section>
<section id="trace-section" hidden>
<h2 id="trace-title">Trace</h2>
<p id="trace-note" class="small"></p>
<div id="trace"></div>
</section>
"""
    return page_html(title, header, main, "monitor.js")

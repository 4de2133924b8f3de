"""`judge view --monitor`'s page in a real browser (the system's headless Chromium, driven
by Playwright, opening the folder from file://): the chart of a monitor state made by the
monitor with the fake judge is drawn with its alert marker, a click on the marker or on
the alert shows its worst traces, a trace opens its judged row, and hostile names stay
text."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.monitor.state import MonitorState
from judge.view import build_monitor_view
from tests.helpers.browser import chromium, watched_page
from tests.helpers.monitor import BAD_ANSWER
from tests.helpers.monitor_view import BAD_FROM, dropped_state, make_hostile, page_data
from tests.helpers.view import HOSTILE

# The chart of a canvas: its datasets, the mean points' styles and places, painted pixels.
CHART_STATE = """canvas => {
  const chart = Chart.getChart(canvas);
  if (!chart) return null;
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
  const mean = chart.data.datasets.findIndex(d => d.label === 'window mean');
  return {
    labels: chart.data.datasets.map(d => d.label),
    data: Object.fromEntries(chart.data.datasets.map(d => [d.label, d.data])),
    styles: chart.data.datasets[mean].pointStyle,
    points: chart.getDatasetMeta(mean).data.map(p => [p.x, p.y]),
    painted: painted,
  };
}"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The page of a state whose faithfulness dropped, and of the same state made hostile."""
    tmp = tmp_path_factory.mktemp("monitor-page")
    dropped = dropped_state(tmp / "run")
    index = build_monitor_view(dropped["state"], tmp / "page")
    shutil.copytree(dropped["state"], tmp / "hostile-state")
    make_hostile(tmp / "hostile-state")
    hostile = build_monitor_view(tmp / "hostile-state", tmp / "hostile-page")
    return {"index": index, "hostile": hostile, "data": page_data(tmp / "page"), **dropped}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


def test_the_chart_is_drawn_and_a_click_on_an_alert_shows_its_worst_traces(
    browser: Any, built: dict[str, Any]
) -> None:
    data = built["data"]
    alert = data["alerts"][0]
    page = watched_page(browser)
    try:
        page.goto(built["index"].as_uri())
        page.wait_for_load_state("load")
        chart = page.locator("canvas[data-metric='faithfulness']").evaluate(CHART_STATE)
        assert chart is not None, "no chart drawn"
        assert chart["painted"] > 1000
        assert chart["data"]["window mean"] == [1, 1, 1, 0, 0, 0]
        assert chart["data"]["95% interval"] == [
            w["metrics"]["faithfulness"]["ci_high"] for w in data["windows"]
        ]
        baseline = data["baselines"]["faithfulness"]
        assert chart["data"]["baseline mean"] == [baseline["mean"]] * 6
        assert chart["data"]["baseline interval"] == [baseline["ci_high"]] * 6
        assert chart["data"]["reference"] == [baseline["reference"]] * 6
        marked = [i for i, style in enumerate(chart["styles"]) if style == "triangle"]
        assert marked == [w["number"] for w in data["windows"] if w["alerts"]]
        assert marked[0] >= BAD_FROM // 10
        note = page.locator(".chart .baseline-note").inner_text()
        assert "from the first window" in note and "reference 0.517" in note
        assert page.locator("tr[data-count='judged'] td.n").inner_text() == "60"
        assert page.locator("tr[data-count='skipped:no_retriever'] td.n").inner_text() == "1"

        # A click on the chart's red marker opens the alert it marks.
        assert page.locator("#alert-section").is_hidden()
        x, y = chart["points"][marked[0]]
        page.locator("canvas[data-metric='faithfulness']").click(position={"x": x, "y": y})
        page.locator("#alert-section").wait_for(state="visible")
        assert page.evaluate("location.hash") == f"#alert={alert['id']}"
        shown = page.locator("#worst > tbody > tr").evaluate_all(
            "rows => rows.map(r => r.getAttribute('data-trace'))"
        )
        assert shown == [w["trace_id"] for w in alert["worst"]]

        # ... and a click on the alert's row in the table: its worst traces, with the
        # judge's claims, verdicts and reasons.
        page.evaluate("location.hash = ''")
        page.reload()
        assert page.locator("#alert-section").is_hidden()
        page.locator(f"#alerts tr[data-alert='{alert['id']}']").click()
        page.locator("#alert-section").wait_for(state="visible")
        assert "faithfulness" in page.locator("#alert-title").inner_text()
        rows = page.locator("#worst > tbody > tr")
        assert rows.count() == 3
        first = rows.nth(0)
        assert first.locator("code").inner_text() == alert["worst"][0]["trace_id"]
        assert BAD_ANSWER in first.inner_text()
        assert "not found" in first.inner_text() and "not in any context" in first.inner_text()

        # The trace's link opens its judged row.
        first.locator("a.trace-link").click()
        page.locator("#trace-section").wait_for(state="visible")
        trace = data["traces"][alert["worst"][0]["trace_id"]]
        assert page.locator("#trace .question").inner_text() == trace["question"]
        assert page.locator("#trace .answer").inner_text() == BAD_ANSWER
        assert page.locator("#trace ol.contexts li").all_inner_texts() == trace["contexts"]
        assert page.problems == []
    finally:
        page.close()


def test_hostile_names_show_as_text_and_run_nothing(browser: Any, built: dict[str, Any]) -> None:
    page = watched_page(browser)
    try:
        page.goto(built["hostile"].as_uri() + "#alert=1")
        page.wait_for_load_state("load")
        page.locator("#alert-section").wait_for(state="visible")
        assert page.evaluate("window.__pwned") is None
        assert page.locator("img").count() == 0
        assert page.locator(".chart h3").inner_text() == HOSTILE
        assert HOSTILE in page.locator("#alert-title").inner_text()
        assert page.locator("#worst > tbody > tr").nth(0).locator("code").inner_text() == HOSTILE
        assert HOSTILE in page.locator("tr[data-count^='skipped:']").inner_text()
        page.locator("#worst a.trace-link").first.click()
        page.locator("#trace-section").wait_for(state="visible")
        assert page.locator("#trace .answer").inner_text() == BAD_ANSWER
        assert page.evaluate("window.__pwned") is None
        assert page.problems == []
    finally:
        page.close()


@pytest.mark.parametrize("trace", ["%E0%A4%A", "constructor", "__proto__", "toString"])
def test_a_link_to_a_trace_the_page_has_not_says_so(
    browser: Any, tmp_path: Path, trace: str
) -> None:
    """A link to a trace the page holds no row of (a malformed escape, a name every
    JavaScript object has) says the state keeps no row of it: the script stopped on a
    URIError or on Object's own members taken for a trace's row."""
    MonitorState(tmp_path / "state").close()
    index = build_monitor_view(tmp_path / "state", tmp_path / "page")
    page = watched_page(browser)
    try:
        page.goto(index.as_uri() + "#trace=" + trace)
        page.wait_for_load_state("load")
        page.locator("#trace-section").wait_for(state="visible")
        assert "keeps no judged row" in page.locator("#trace-note").inner_text()
        assert page.problems == []
    finally:
        page.close()

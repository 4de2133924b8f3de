"""`judge view`'s page in a real browser: the system's headless Chromium (installed by
scripts/install-chromium), driven by Playwright, opening the folder from file:// as a
user does. Three runs judged through the fake server, a fourth whose folder is gone."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.run.output_folder import file_sha256
from judge.view import build_view
from tests.helpers.view import HOSTILE, judged_runs, record, results_rows, run_id

CHROMIUM = os.environ.get("JUDGE_CHROMIUM", "/usr/bin/chromium")
# The machine may have no internet: without these Chromium tries to reach Google's servers.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The view of three judged runs (base is the baseline) and of one whose folder is gone."""
    tmp = tmp_path_factory.mktemp("view")
    folders = judged_runs(tmp / "runs")
    records = [record(name, out, baseline=name == "base") for name, out in folders.items()]
    gone = tmp / "runs" / "gone"
    shutil.copytree(folders["base"], gone)
    between = "2026-12-02T12:00:00Z"  # after rerank, before prompt-v3
    lost = record("base", gone) | {"id": run_id("gone"), "name": "gone", "created": between}
    shutil.rmtree(gone)
    index = build_view([*records, lost], tmp / "judge-view")
    return {"index": index, "folders": folders, "records": records}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium from the system's packages; the test fails (not skips) without it:
    a browser test that silently skips in CI tests nothing."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(
            f"no Chromium at {CHROMIUM}: run scripts/install-chromium (Debian's chromium "
            "package), or point JUDGE_CHROMIUM at a Chromium binary"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: pip install -e '.[test]'")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, view: dict[str, Any]) -> Iterator[Any]:
    """The view's page opened from file://, every console message and page error kept."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.problems = []
    page.on(
        "console",
        lambda m: (
            page.problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
    page.on("requestfailed", lambda r: page.problems.append(f"request failed: {r.url}"))
    page.goto(view["index"].as_uri())
    page.wait_for_load_state("load")
    yield page
    page.close()


# Per canvas: its Chart.js instance's datasets, and whether any pixel was painted.
CHART_STATE = """canvas => {
  const chart = Chart.getChart(canvas);
  if (!chart) return null;
  const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) painted++;
  return {
    metric: canvas.dataset.metric,
    datasets: chart.data.datasets.map(d => ({label: d.label, data: d.data, fill: d.fill,
      pointStyle: d.pointStyle})),
    labels: chart.data.labels,
    painted: painted,
  };
}"""


def test_the_page_loads_without_errors_and_draws_each_metric(page: Any, view: dict) -> None:
    charts = page.eval_on_selector_all("canvas", f"all => all.map({CHART_STATE})")
    assert page.problems == []
    assert [c["metric"] for c in charts] == ["faithfulness", "context_recall"]
    order = ["base", "rerank", "gone", "prompt-v3"]  # time order
    by_name = {r["name"]: r for r in view["records"]}
    for chart in charts:
        assert chart["painted"] > 1000, f"{chart['metric']}'s canvas is blank"
        upper, lower, mean = chart["datasets"]
        assert upper["fill"] == "+1" and lower["fill"] is False  # the band between them
        # names isolated (FSI ... PDI): an override in one cannot reorder the label
        assert [label[0].split(" (")[0].strip("\u2068\u2069") for label in chart["labels"]] == order
        summary = {n: by_name[n]["summary"][chart["metric"]] for n in by_name}
        summary["gone"] = summary["base"]
        assert mean["data"] == [summary[n]["mean"] for n in order]
        assert upper["data"] == [summary[n]["ci_high"] for n in order]
        assert lower["data"] == [summary[n]["ci_low"] for n in order]
        # The baseline's point, and only it, is drawn differently.
        assert mean["pointStyle"] == ["rectRot", "circle", "circle", "circle"]


def test_the_runs_table_marks_the_baseline(page: Any, view: dict) -> None:
    rows = page.locator("#runs tbody tr")
    assert rows.count() == 4
    base = page.locator("#runs tbody tr.baseline")
    assert base.count() == 1
    assert base.get_attribute("data-run") == run_id("base")
    assert "baseline" in base.inner_text()
    rerank = page.locator(f'#runs tr[data-run="{run_id("rerank")}"]').inner_text()
    for shown in ("rerank", "eval", "openai/judge-model", "apps/rerank.py:answer"):
        assert shown in rerank
    assert "40a1b2c3 (dirty)" in rerank
    assert "0.375" in rerank  # faithfulness's mean
    assert page.problems == []


def test_two_runs_and_compare_open_their_differences(page: Any, view: dict) -> None:
    compare = page.locator("#compare")
    assert compare.is_disabled()
    assert page.locator("#diff-section").is_hidden()
    # Later run first: the page still shows what changed since the earlier one.
    page.click(f'#runs tr[data-run="{run_id("rerank")}"]')
    page.click(f'#runs tr[data-run="{run_id("base")}"]')
    compare.click()
    assert page.locator("#diff-section").is_visible()
    assert "base" in page.inner_text("#diff-title").split("→")[0]
    rows = page.locator("#diff tbody tr")
    keys = [rows.nth(i).get_attribute("data-key") for i in range(rows.count())]
    base, rerank = (results_rows(view["folders"][n]) for n in ("base", "rerank"))
    expected = {
        key: {m: rerank[key]["scores"][m] - base[key]["scores"][m] for m in base[key]["scores"]}
        for key in base
    }
    # q3 lost all support, q2 half: the largest drop first; q1 and q4 did not change.
    assert keys[:2] == ["q3", "q2"] and sorted(keys[2:]) == ["q1", "q4"]
    for i, key in enumerate(keys):
        cells = rows.nth(i).locator("td.delta")
        shown = {
            cell.get_attribute("data-metric"): float(cell.get_attribute("data-delta"))
            for cell in cells.all()
        }
        assert shown.keys() == expected[key].keys()
        assert all(math.isclose(shown[m], expected[key][m]) for m in shown)
    q3 = rows.nth(0).inner_text()
    assert "Bananas grow on Mars" in q3 and "Guido van Rossum created Python." in q3
    assert "-1.000" in q3
    # Sorted by one metric instead: context_recall did not move, so the ids keep their order.
    page.select_option("#diff-sort", "context_recall")
    assert [rows.nth(i).get_attribute("data-key") for i in range(4)] == ["q1", "q2", "q3", "q4"]
    assert page.problems == []


def test_answers_are_shown_as_text_never_as_markup(page: Any) -> None:
    page.goto(page.url + f"#compare={run_id('base')},{run_id('prompt-v3')}")
    page.reload()
    q4 = page.locator('#diff tr[data-key="q4"] td.answer')
    assert q4.count() == 2
    assert q4.nth(0).inner_text() == HOSTILE == q4.nth(1).inner_text()
    assert page.locator("#diff img, #diff script").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.problems == []


def test_a_run_whose_folder_is_gone_says_so(page: Any, view: dict) -> None:
    page.click(f'#runs tr[data-run="{run_id("gone")}"]')
    page.click(f'#runs tr[data-run="{run_id("base")}"]')
    page.click("#compare")
    note = page.inner_text("#diff-note")
    assert "is gone" in note and str(Path(view["folders"]["base"]).parent / "gone") in note
    assert page.locator("#diff tbody tr").count() == 0
    assert page.problems == []


EVIL = "run2 \u202eevil"  # shows as "run2 live" and reverses what follows, unisolated
LONG = "a very long run name " + "".join(f"part{i} " for i in range(40))  # 200+ characters


@pytest.fixture(scope="module")
def hostile_view(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Runs named with a bidi override and 200+ characters, and a run whose folder a later
    run was given as --out after it was recorded."""
    tmp = tmp_path_factory.mktemp("hostile")
    folders = judged_runs(tmp / "runs")
    shared = tmp / "runs" / "shared"
    shutil.copytree(folders["base"], shared)
    reused = record("base", shared) | {"id": run_id("reused"), "name": "reused"}
    reused["results_sha256"] = file_sha256(shared / "results.jsonl")
    for name in ("results.jsonl", "summary.json"):  # the later run writes the same folder
        shutil.copy(folders["rerank"] / name, shared / name)
    records = [
        record("base", folders["base"], baseline=True) | {"name": EVIL},
        record("rerank", folders["rerank"]) | {"name": LONG},
        record("prompt-v3", folders["prompt-v3"]),
        reused | {"created": "2026-12-04T10:00:00Z"},
    ]
    assert len(LONG) >= 200
    return {"index": build_view(records, tmp / "judge-view"), "folders": folders}


@pytest.fixture
def hostile_page(browser: Any, hostile_view: dict[str, Any]) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.problems = []
    page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda m: page.problems.append(m.text) if m.type in ("error", "warning") else None,
    )
    page.goto(hostile_view["index"].as_uri())
    page.wait_for_load_state("load")
    yield page
    page.close()


# The whole name the tooltip of a run's point shows, as Chart.js lays it out on hover.
TOOLTIP_TITLE = """([canvas, index]) => {
  const chart = Chart.getChart(canvas);
  const point = chart.getDatasetMeta(2).data[index];
  chart.tooltip.setActiveElements([{datasetIndex: 2, index: index}], {x: point.x, y: point.y});
  chart.update();
  return chart.tooltip.title;
}"""


def test_charts_draw_with_a_200_character_run_name_and_show_it_whole_on_hover(
    hostile_page: Any,
) -> None:
    charts = hostile_page.eval_on_selector_all("canvas", f"all => all.map({CHART_STATE})")
    # The plot's height, and how many runs' labels the axis shows (Chart.js drops the
    # labels that do not fit: a long name left the other runs without theirs).
    layout = hostile_page.eval_on_selector_all(
        "canvas",
        "all => all.map(c => [Chart.getChart(c).chartArea.height,"
        " Chart.getChart(c).scales.x.ticks.length])",
    )
    assert hostile_page.problems == []
    assert len(charts) == 2
    for chart, (height, labelled) in zip(charts, layout, strict=True):
        assert chart["painted"] > 1000, f"{chart['metric']}'s canvas is blank"
        assert height > 80 and labelled == 4, (height, labelled)
        shown = chart["labels"][1][0]  # the long run's label on the axis: shortened
        assert len(shown) < 40 and shown.startswith("\u2068a very long run name")
    canvas = hostile_page.query_selector("canvas")
    title = hostile_page.evaluate(TOOLTIP_TITLE, [canvas, 1])
    assert "".join(title).replace("\u2068", "").replace("\u2069", "").startswith(LONG)


def test_a_bidi_override_in_a_run_name_cannot_reorder_what_follows(hostile_page: Any) -> None:
    row = hostile_page.locator(f'#runs tr[data-run="{run_id("base")}"]')
    # The name's cell: the name, then the baseline badge, left to right as written.
    layout = (
        row.locator("td")
        .nth(2)
        .evaluate(
            """td => {
          const range = document.createRange();
          range.selectNodeContents(td.firstChild);
          const name = range.getBoundingClientRect();
          const badge = td.querySelector('.badge').getBoundingClientRect();
          return {nameRight: name.right, badgeLeft: badge.left};
        }"""
        )
    )
    assert layout["nameRight"] <= layout["badgeLeft"] + 1, layout
    # The runs chosen: "chosen: NAME (id) and ..." keeps its order after the override.
    hostile_page.click(f'#runs tr[data-run="{run_id("base")}"]')
    hostile_page.click(f'#runs tr[data-run="{run_id("prompt-v3")}"]')
    order = hostile_page.locator("#chosen").evaluate(
        """span => {
          const walker = document.createTreeWalker(span, NodeFilter.SHOW_TEXT);
          const at = {};
          for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            for (const word of ["chosen", "evil", "and", "prompt-v3"]) {
              const i = node.data.indexOf(word);
              if (i < 0 || word in at) continue;
              const range = document.createRange();
              range.setStart(node, i);
              range.setEnd(node, i + word.length);
              at[word] = range.getBoundingClientRect().left;
            }
          }
          return at;
        }"""
    )
    assert order["chosen"] < order["evil"] < order["and"] < order["prompt-v3"], order
    assert hostile_page.problems == []


def test_a_run_whose_folder_another_run_reused_is_marked_and_shows_no_rows(
    hostile_page: Any,
) -> None:
    row = hostile_page.locator(f'#runs tr[data-run="{run_id("reused")}"]')
    assert "folder changed since recorded" in row.inner_text()
    hostile_page.click(f'#runs tr[data-run="{run_id("reused")}"]')
    hostile_page.click(f'#runs tr[data-run="{run_id("prompt-v3")}"]')
    hostile_page.click("#compare")
    note = hostile_page.inner_text("#diff-note")
    assert "folder changed since recorded" in note and "cannot be shown" in note
    assert hostile_page.locator("#diff tbody tr").count() == 0
    assert hostile_page.problems == []


def test_rows_of_a_run_recorded_without_a_hash_are_shown_as_unverifiable(
    hostile_page: Any,
) -> None:
    hostile_page.click(f'#runs tr[data-run="{run_id("prompt-v3")}"]')
    hostile_page.click(f'#runs tr[data-run="{run_id("rerank")}"]')
    hostile_page.click("#compare")
    note = hostile_page.inner_text("#diff-note")
    assert "cannot be checked against the run" in note
    assert hostile_page.locator("#diff tbody tr").count() == 4  # shown, not refused
    assert hostile_page.problems == []

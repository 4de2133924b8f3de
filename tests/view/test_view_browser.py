"""`judge view`'s page in a real browser: the system's headless Chromium (installed by
scripts/install-chromium), driven by Playwright, opening the folder from file:// as a
user does. Three runs judged through the fake server, a fourth whose folder is gone."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge.run.output_folder import file_sha256
from judge.view import build_view
from tests.helpers.browser import chromium, watched_page
from tests.helpers.view import (
    CONTEXTS,
    HOSTILE,
    SUPPORTED,
    UNSUPPORTED,
    judged_runs,
    record,
    results_rows,
    run_id,
)


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
    """Headless Chromium (tests/helpers/browser.py), one for the module's tests."""
    with chromium() as launched:
        yield launched


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


# ---- the conversation drill-down

# Turn 2: a claim from its context and an invented one; turn 4: one from the user's first
# message, one from turn 2's supported claim, the invention repeated, one from its context.
CHAT = {
    "id": "parcel",
    "turns": [
        {"role": "user", "content": "My parcel weighs four kilos. Which options exist?"},
        {
            "role": "assistant",
            "content": "Express delivery takes one day. Mars parcels travel free.",
            "contexts": ["Express delivery takes one day."],
        },
        {"role": "user", "content": "Send it express then."},
        {
            "role": "assistant",
            "content": "My parcel weighs four kilos. Express delivery takes one day. "
            "Mars parcels travel free. Couriers collect parcels daily.",
            "contexts": ["Couriers collect parcels daily.", "Parcels are weighed at the desk."],
        },
    ],
}
# Markup, control characters and a bidi override in every text the drill-down shows.
NASTY = HOSTILE + " \x00\x07\x1b[31m red\x1b[0m \u202eevil\u202c end"
EVIL_CHAT = {
    "id": f"<b>{NASTY}</b>",
    "turns": [
        {"role": "user", "content": f"Tell me. {NASTY}"},
        {"role": "assistant", "content": NASTY, "contexts": [NASTY]},
    ],
}


@pytest.fixture(scope="module")
def conversation_view(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run of two conversations judged through the fake server, beside a run of rows."""
    from judge import LLM, evaluate
    from judge.testing import FakeLLMServer
    from tests.helpers.judging import judge_handler

    tmp = tmp_path_factory.mktemp("conversations")
    folders = judged_runs(tmp / "runs")
    chats = tmp / "runs" / "chats"
    with FakeLLMServer() as server:
        server.chat = judge_handler
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=1)
        result = evaluate(
            [CHAT, EVIL_CHAT],
            metrics=["faithfulness", "supported_by_history"],
            llm=llm,
            progress=False,
        )
        result.write(chats)
    chat_record = record("base", chats) | {
        "id": run_id("chats"),
        "name": "chats",
        "created": "2026-12-04T10:00:00Z",
        "metrics": ["faithfulness", "supported_by_history"],
    }
    records = [record("base", folders["base"], baseline=True), chat_record]
    return {"index": build_view(records, tmp / "judge-view"), "rows": result.rows}


@pytest.fixture
def chat_page(browser: Any, conversation_view: dict[str, Any]) -> Iterator[Any]:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.problems = []
    page.on("pageerror", lambda exc: page.problems.append(f"page error: {exc}"))
    page.on(
        "console",
        lambda m: page.problems.append(m.text) if m.type in ("error", "warning") else None,
    )
    page.goto(conversation_view["index"].as_uri())
    page.wait_for_load_state("load")
    yield page
    page.close()


# Each turn block as the page shows it: its turn, texts, contexts and claims (textContent:
# control characters included, nothing interpreted).
TURNS = """holder => [...holder.querySelectorAll('article.turn')].map(a => ({
  turn: a.dataset.turn,
  question: a.querySelector('.question').textContent,
  answer: a.querySelector('.answer').textContent,
  contexts: [...a.querySelectorAll('ol.contexts li')].map(li => li.textContent),
  claims: [...a.querySelectorAll('table.claims tr')].slice(1).map(tr =>
    [...tr.querySelectorAll('td')].map(td => td.textContent)),
  scores: [...a.querySelectorAll('table.scores td')].map(td => td.textContent),
}))"""


def test_a_run_of_conversations_lists_them_and_opens_one_turn_by_turn(chat_page: Any) -> None:
    chats = chat_page.locator(f'#runs tr[data-run="{run_id("chats")}"]')
    assert chat_page.locator(".conversations-link").count() == 1  # the rows' run has none
    link = chats.locator(".conversations-link")
    assert link.inner_text() == "2 conversations"
    link.click()
    # the link opens the list; it does not choose the run for Compare
    assert chats.get_attribute("class") in (None, "")
    assert chat_page.locator("#conversations-section").is_visible()
    assert chat_page.url.endswith(f"#conversations={run_id('chats')}")
    listed = chat_page.locator("#conversations tbody tr")
    assert listed.count() == 2
    parcel = chat_page.locator('#conversations tr[data-conversation="parcel"]')
    # turns; faithfulness's mean over them ((1/2 + 3/4) / 2); supported_by_history's
    assert parcel.locator("td").all_inner_texts() == ["parcel", "2", "0.625", "0.250"]
    parcel.locator("a").click()
    assert chat_page.locator("#conversation-section").is_visible()
    assert "parcel" in chat_page.inner_text("#conversation-title")
    turns = chat_page.locator("#turns").evaluate(TURNS)
    assert [t["turn"] for t in turns] == ["2", "4"]
    second, fourth = turns
    assert second["question"] == CHAT["turns"][0]["content"]
    assert fourth["question"] == "Send it express then."
    assert fourth["answer"] == CHAT["turns"][3]["content"]
    assert fourth["contexts"] == CHAT["turns"][3]["contexts"]
    assert fourth["scores"] == ["0.750", "0.500"]
    # each claim: number, text, verdict, source, reason
    assert [c[:4] for c in fourth["claims"]] == [
        ["1", "My parcel weighs four kilos.", "supported", "conversation, turn 1 (user)"],
        ["2", "Express delivery takes one day.", "supported", "conversation, turn 2 (assistant)"],
        ["3", "Mars parcels travel free.", "not found", "–"],
        ["4", "Couriers collect parcels daily.", "supported", "context 1"],
    ]
    assert [c[:4] for c in second["claims"]] == [
        ["1", "Express delivery takes one day.", "supported", "context 1"],
        ["2", "Mars parcels travel free.", "not found", "–"],
    ]
    assert chat_page.problems == []


def test_a_link_to_a_conversation_opens_it(chat_page: Any) -> None:
    chat_page.goto(chat_page.url + f"#conversation={run_id('chats')},parcel")
    chat_page.reload()
    assert chat_page.locator("#conversation-section").is_visible()
    assert chat_page.locator("#turns article.turn").count() == 2
    assert chat_page.problems == []


def test_markup_and_control_characters_in_a_conversation_are_shown_inert(
    chat_page: Any,
) -> None:
    chat_page.locator(".conversations-link").click()
    evil = chat_page.locator("#conversations tbody tr").nth(1)
    assert evil.get_attribute("data-conversation") == EVIL_CHAT["id"]
    assert evil.locator("a").evaluate("a => a.textContent") == EVIL_CHAT["id"]
    evil.locator("a").click()
    (turn,) = chat_page.locator("#turns").evaluate(TURNS)
    assert turn["question"] == f"Tell me. {NASTY}"
    assert turn["answer"] == NASTY
    assert turn["contexts"] == [NASTY]
    # the heuristic judge's claims are the answer's sentences, control characters kept
    assert [c[1] for c in turn["claims"]] == [
        '<img src=x onerror="window.',
        '__pwned=1"><script>window.',
        "__pwned=2</script> \x00\x07\x1b[31m red\x1b[0m \u202eevil\u202c end.",
    ]
    assert {c[3] for c in turn["claims"]} == {"context 1"}
    title = chat_page.locator("#conversation-title").evaluate("h => h.textContent")
    assert EVIL_CHAT["id"] in title
    for where in ("#conversations", "#turns", "#conversation-title"):
        assert chat_page.locator(f"{where} img, {where} script, {where} b b").count() == 0
    assert chat_page.evaluate("window.__pwned") is None
    # the id's bidi override ends with it: it sits in an isolate of its own
    isolate = chat_page.locator("#conversation-title").evaluate(
        """h => {
          const id = h.querySelector('bdi');
          return [id.textContent, getComputedStyle(id).unicodeBidi,
                  id.nextSibling.textContent];
        }"""
    )
    assert isolate == [EVIL_CHAT["id"], "isolate", " of "]
    assert chat_page.problems == []


# ---- ids that name several rows of a run


def _sample(ident: str, question: str, answer: str) -> dict[str, Any]:
    return {"id": ident, "question": question, "answer": answer, "contexts": CONTEXTS}


# Two samples given the id "dup" in every run, in another order in "reordered": the same
# question keeps the same answer (and scores) in all three runs.
ONE = _sample("dup", "Who made Python? (one)", SUPPORTED)
TWO = _sample("dup", "Who made Python? (two)", UNSUPPORTED)
REPEATED_IDS = {
    # ids repeat; every question unique
    "base": [ONE, TWO, _sample("x", "three", SUPPORTED), _sample("y", "four", SUPPORTED)],
    # more ids than questions shared with base (x and y were reworded)
    "reordered": [
        TWO,
        ONE,
        _sample("x", "three, reworded", SUPPORTED),
        _sample("y", "4", SUPPORTED),
    ],
    # ids and questions repeat: x and y ask the same question
    "asked-twice": [TWO, ONE, _sample("x", "three", SUPPORTED), _sample("y", "three", SUPPORTED)],
}


@pytest.fixture(scope="module")
def repeated_view(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Runs whose ids name several rows (judged through the fake server), as `judge view`
    writes them."""
    from judge import LLM, evaluate
    from judge.testing import FakeLLMServer
    from tests.helpers.judging import judge_handler

    tmp = tmp_path_factory.mktemp("repeated")
    records = []
    with FakeLLMServer() as server:
        server.chat = judge_handler
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=1)
        for day, (name, rows) in enumerate(REPEATED_IDS.items(), 1):
            result = evaluate(rows, metrics=["faithfulness"], llm=llm, progress=False)
            result.write(tmp / name)
            records.append(
                record("base", tmp / name)
                | {"id": run_id(name), "name": name, "created": f"2026-12-0{day}T10:00:00Z"}
            )
    return build_view(records, tmp / "judge-view")


@pytest.fixture
def repeated_page(browser: Any, repeated_view: Any) -> Iterator[Any]:
    page = watched_page(browser)
    page.goto(repeated_view.as_uri())
    page.wait_for_load_state("load")
    yield page
    page.close()


def _compare(page: Any, first: str, second: str) -> None:
    page.click(f'#runs tr[data-run="{run_id(first)}"]')
    page.click(f'#runs tr[data-run="{run_id(second)}"]')
    page.click("#compare")


def test_ids_that_name_several_rows_pair_the_runs_by_question(repeated_page: Any) -> None:
    # More ids than questions are shared, but "dup" names two rows on both sides: paired by
    # id, one row of each would be kept, and question one shown against question two.
    _compare(repeated_page, "base", "reordered")
    rows = repeated_page.locator("#diff tbody tr")
    shown = {
        rows.nth(i).get_attribute("data-key"): rows.nth(i)
        .locator("td.delta")
        .get_attribute("data-delta")
        for i in range(rows.count())
    }
    assert shown == {"Who made Python? (one)": "0", "Who made Python? (two)": "0"}
    note = repeated_page.inner_text("#diff-note")
    assert note.startswith("2 questions in both runs, matched by question")
    assert f"2 only in {_label('base')}, 2 only in {_label('reordered')}" in note
    assert (
        f"Matched by question: ids name several rows in {_label('base')}: 'dup'; "
        f"in {_label('reordered')}: 'dup'."
    ) in note
    assert repeated_page.problems == []


def _label(name: str) -> str:
    """A run as the page names it: its name and the start of its id."""
    return f"{name} ({run_id(name)[:8]})"


def test_ids_and_questions_that_repeat_show_no_pairs_and_say_why(repeated_page: Any) -> None:
    _compare(repeated_page, "asked-twice", "base")
    note = repeated_page.locator("#diff-note")
    assert note.get_attribute("class") == "bad"
    assert note.inner_text() == (
        f"Ids name several rows in {_label('base')}: 'dup'; in {_label('asked-twice')}: "
        f"'dup'. Questions repeat in {_label('asked-twice')}. The questions of these runs "
        "cannot be paired (by id, or by question when every question is unique): give each "
        "sample its own id (an id column) and evaluate again."
    )
    assert repeated_page.locator("#diff tbody tr").count() == 0
    assert repeated_page.locator("#diff-sort").count() == 0
    assert repeated_page.problems == []


# Another conversation given the id "parcel", and one of its own.
SECOND_PARCEL = {
    "id": "other",
    "turns": [
        {"role": "user", "content": "Where is my parcel?"},
        {
            "role": "assistant",
            "content": "Couriers collect parcels daily.",
            "contexts": ["Couriers collect parcels daily."],
        },
    ],
}
SHORT = {"id": "short", "turns": SECOND_PARCEL["turns"]}


@pytest.fixture(scope="module")
def shared_id_view(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A run of three conversations, two of which have the id "parcel", as judge eval
    writes them (its rows: parcel's turns 2 and 4, then the other parcel's turn 2)."""
    from judge import LLM, evaluate
    from judge.testing import FakeLLMServer
    from tests.helpers.judging import judge_handler

    tmp = tmp_path_factory.mktemp("shared-id")
    chats = tmp / "chats"
    with FakeLLMServer() as server:
        server.chat = judge_handler
        llm = LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_retries=1)
        result = evaluate(
            [CHAT, SECOND_PARCEL, SHORT], metrics=["faithfulness"], llm=llm, progress=False
        )
        result.write(chats)
    # The second conversation's id given as "parcel" in the file itself: the test does not
    # depend on whether judge eval accepts an input whose conversations share an id.
    results = chats / "results.jsonl"
    text = results.read_text(encoding="utf-8")
    for old, new in (
        ('"conversation_id": "other"', '"conversation_id": "parcel"'),
        ('"id": "other#2"', '"id": "parcel#2"'),
    ):
        assert text.count(old) == 1
        text = text.replace(old, new)
    results.write_text(text, encoding="utf-8")
    chat_record = record("base", chats) | {
        "id": run_id("chats"),
        "name": "chats",
        "metrics": ["faithfulness"],
        "results_sha256": file_sha256(results),
    }
    return build_view([chat_record], tmp / "judge-view")


def test_conversations_that_share_an_id_are_not_shown_as_one(
    browser: Any, shared_id_view: Any
) -> None:
    page = watched_page(browser)
    page.goto(shared_id_view.as_uri())
    page.wait_for_load_state("load")
    link = page.locator(".conversations-link")
    assert link.inner_text() == "2 conversation ids (1 names several conversations)"
    link.click()
    parcel = page.locator('#conversations tr[data-conversation="parcel"]')
    # no means over the turns of two conversations
    assert parcel.locator("td").all_inner_texts() == [
        "parcel",
        "3",
        "several conversations have this id (turn 2 repeats)",
    ]
    assert parcel.locator("td.bad").count() == 1
    short = page.locator('#conversations tr[data-conversation="short"]')
    assert short.locator("td").all_inner_texts() == ["short", "1", "1.000"]
    assert page.inner_text("#conversations-note").endswith(
        " 1 id names several conversations (a turn of it repeats): their turns cannot be told "
        "apart; give each conversation its own id and evaluate again."
    )
    parcel.locator("a").click()
    note = page.locator("#conversation-note")
    assert note.get_attribute("class") == "bad"
    assert note.inner_text() == (
        "Several conversations of this run have the id parcel (turn 2 repeats): their turns "
        "cannot be told apart, so none is shown; give each conversation its own id and "
        "evaluate again."
    )
    assert page.locator("#turns article.turn").count() == 0
    # a conversation of its own id opens as before
    page.goto(page.url.split("#")[0] + f"#conversation={run_id('chats')},short")
    page.reload()
    assert page.locator("#turns article.turn").count() == 1
    assert page.problems == []
    page.close()

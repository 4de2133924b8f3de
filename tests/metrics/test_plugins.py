"""Metric plugins: a distribution installed into tmp_path (a *.dist-info with entry_points.txt
and a module) is found through the `judge.metrics` entry-point group by `judge metrics`,
`judge eval` and `judge.evaluate`, and a broken or clashing plugin is a clear error."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import judge
from judge.cli import main
from judge.errors import JudgeError, UnknownMetricError
from judge.metrics.plugins import extra_metrics, plugin_metrics

TONE = """
from pydantic import BaseModel
from judge import judged_metric


class Tone(BaseModel):
    rating: int
    reason: str


{name} = judged_metric(
    "{name}",
    prompt="<<<system>>>\\nRate the tone 0-4.\\n<<<user>>>\\n<answer>{{{{answer}}}}</answer>",
    output=Tone,
    score=lambda reply: reply.rating / 4,
    description="politeness of the answer, from plugin {dist}",
)
"""

ROWS = [
    {"question": "How do I get a refund?", "answer": "Fill in the form.", "contexts": ["c"]},
    {"question": "Where is my invoice?", "answer": "In your account.", "contexts": ["c"]},
]


def install(
    root: Path, monkeypatch: pytest.MonkeyPatch, dist: str, entry_points: str, modules: dict
) -> None:
    """Install distribution `dist` (version 0.3) into `root` and put `root` on sys.path."""
    info = root / f"{dist.replace('-', '_')}-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points).lstrip())
    for module, code in modules.items():
        (root / f"{module}.py").write_text(code)
        # both calls together: absent now, and removed again at teardown (no trace left)
        monkeypatch.setitem(sys.modules, module, None)
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.syspath_prepend(str(root))


def tone_plugin(tmp_path, monkeypatch, *, name="plugin_tone", dist="judge-tone") -> None:
    module = f"{dist.replace('-', '_')}_metrics"
    entry = f"[judge.metrics]\ntone = {module}\n"
    install(tmp_path / dist, monkeypatch, dist, entry, {module: TONE.format(name=name, dist=dist)})


def tone_judge(body: dict) -> str:
    answer = body["messages"][-1]["content"]
    return json.dumps({"rating": 3 if "form" in answer else 1, "reason": "polite enough"})


def test_judge_metrics_lists_a_plugin_metric_with_its_distribution(tmp_path, monkeypatch, capsys):
    assert "plugin_tone" not in plugin_metrics()
    tone_plugin(tmp_path, monkeypatch)
    assert main(["metrics"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("plugin_tone")]
    assert line.split()[:4] == ["plugin_tone", "plugin", "judge-tone", "0.3"]
    assert line.endswith("politeness of the answer, from plugin judge-tone")
    found = plugin_metrics()["plugin_tone"]
    assert found.source == "judge-tone 0.3 (entry point tone = judge_tone_metrics)"


def test_judge_eval_uses_a_plugin_metric_through_the_fake_server(
    tmp_path, monkeypatch, capsys, fake_llm_server
):
    tone_plugin(tmp_path, monkeypatch)
    fake_llm_server.chat = tone_judge
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "out"
    code = main(
        [
            "eval",
            str(data),
            "--model",
            "openai/judge-model",
            "--api-base",
            fake_llm_server.base_url,
            "--api-key",
            "k",
            "--metrics",
            "plugin_tone",
            "--no-cache",
            "--no-progress",
            "--out",
            str(out),
            "--fail-under",
            "plugin_tone=0.5",
        ]
    )
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert [r["scores"] for r in rows] == [{"plugin_tone": 0.75}, {"plugin_tone": 0.25}]
    assert rows[0]["evidence"]["plugin_tone"] == {"rating": 3, "reason": "polite enough"}
    assert fake_llm_server.count() == 2


def test_the_python_api_finds_a_plugin_metric_by_name(tmp_path, monkeypatch, fake_llm_server):
    tone_plugin(tmp_path, monkeypatch)
    fake_llm_server.chat = tone_judge
    llm = judge.LLM("openai/judge-model", api_base=fake_llm_server.base_url, api_key="k")
    result = judge.evaluate(ROWS, metrics=["plugin_tone"], llm=llm, progress=False)
    assert result.summary["plugin_tone"].mean == pytest.approx(0.5)
    with pytest.raises(UnknownMetricError, match="did you mean 'plugin_tone'"):
        judge.evaluate(ROWS, metrics=["plugin_tonne"], llm=llm, progress=False)


def test_an_entry_point_may_name_one_metric_or_a_list(tmp_path, monkeypatch):
    code = TONE.format(name="one_tone", dist="x") + TONE.format(name="two_tone", dist="x")
    code += "\nBOTH = [one_tone, two_tone]\n"
    entries = "[judge.metrics]\nsingle = tones_mod:one_tone\nboth = tones_mod:BOTH\n"
    install(tmp_path, monkeypatch, "judge-tones", entries, {"tones_mod": code})
    found = plugin_metrics()  # one_tone reached twice as the same object: not a clash
    assert {"one_tone", "two_tone"} <= set(found)
    assert found["two_tone"].source == "judge-tones 0.3 (entry point both = tones_mod:BOTH)"


@pytest.mark.parametrize(
    ("entry", "code", "message"),
    [
        (
            "bad = broken_mod",
            "raise RuntimeError('no licence key')",
            "plugin judge-broken 0.3 (entry point bad = broken_mod) failed to load: "
            "RuntimeError: no licence key; fix it or uninstall it (pip uninstall judge-broken)",
        ),
        (
            "bad = broken_mod:missing",
            "x = 1",
            "plugin judge-broken 0.3 (entry point bad = broken_mod:missing) failed to load: "
            "AttributeError",
        ),
        (
            "bad = broken_mod:x",
            "x = 'not a metric'",
            "plugin judge-broken 0.3 (entry point bad = broken_mod:x) holds no metric (it is a "
            "str); point the entry point at a module of metrics, a Metric or a list of Metrics",
        ),
        (
            "bad = broken_mod",
            "x = 1",
            "holds no metric (it is a module)",
        ),
    ],
)
def test_a_broken_plugin_is_an_error_naming_distribution_and_entry_point(
    tmp_path, monkeypatch, capsys, entry, code, message
):
    install(
        tmp_path, monkeypatch, "judge-broken", f"[judge.metrics]\n{entry}\n", {"broken_mod": code}
    )
    with pytest.raises(JudgeError) as caught:
        plugin_metrics()
    assert message in str(caught.value)
    assert main(["metrics"]) == 2
    assert message in capsys.readouterr().err


def test_a_plugin_clashing_with_a_built_in_or_a_retrieval_metric_is_an_error(tmp_path, monkeypatch):
    code = (
        "from judge import Metric\n"
        "async def compute(j): ...\n"
        "faithful = Metric('faithfulness', 'mine', compute)\n"
    )
    install(
        tmp_path / "a",
        monkeypatch,
        "judge-dup",
        "[judge.metrics]\nd = dup_mod\n",
        {"dup_mod": code},
    )
    with pytest.raises(
        JudgeError,
        match=r"metric 'faithfulness' from plugin judge-dup 0.3 "
        r"\(entry point d = dup_mod\) clashes with a built-in LLM-judged metric",
    ):
        plugin_metrics()
    retrieval = code.replace("'faithfulness'", "'ndcg@10'")
    install(
        tmp_path / "b",
        monkeypatch,
        "judge-dup2",
        "[judge.metrics]\nd = dup2_mod\n",
        {"dup2_mod": retrieval},
    )
    with pytest.raises(
        JudgeError, match=r"'ndcg@10' from plugin judge-dup2 .* clashes with a retrieval metric"
    ):
        plugin_metrics()


def test_two_plugins_with_one_metric_name_are_an_error(tmp_path, monkeypatch):
    tone_plugin(tmp_path, monkeypatch, name="shared_tone", dist="judge-one")
    tone_plugin(tmp_path, monkeypatch, name="shared_tone", dist="judge-two")
    with pytest.raises(JudgeError) as caught:
        plugin_metrics()
    text = str(caught.value)
    assert "metric 'shared_tone' from plugin judge-" in text
    assert "clashes with plugin judge-" in text and "judge-one" in text and "judge-two" in text


def test_a_plugin_and_a_metrics_module_with_one_name_are_an_error(tmp_path, monkeypatch, capsys):
    tone_plugin(tmp_path, monkeypatch)
    module = tmp_path / "mine.py"
    module.write_text(TONE.format(name="plugin_tone", dist="mine"))
    with pytest.raises(
        JudgeError,
        match=r"metric 'plugin_tone' from plugin judge-tone 0.3 .* "
        r"clashes with --metrics-module .*mine.py",
    ):
        extra_metrics([str(module)])
    assert main(["metrics", "--metrics-module", str(module)]) == 2
    assert "clashes with --metrics-module" in capsys.readouterr().err

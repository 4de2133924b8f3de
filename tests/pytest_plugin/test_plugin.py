"""The pytest plugin run the way users run it: test files in pytest's own `pytester`,
with the plugin loaded from its entry point, judging through the fake server."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from judge.testing import FakeLLMServer
from tests.helpers.pytester import FAITHFUL, judge_args, judging, load_judged_modules

load_judged_modules()  # before any pytester run (tests/helpers/pytester.py)


UNFAITHFUL = """
def test_unfaithful(rag_judge):
    result = rag_judge.score(
        "Where is the Eiffel Tower?",
        "Bananas grow on tall green plants.",
        ["The Eiffel Tower is a tower in Paris, France."],
        metrics=["faithfulness"],
    )
    judge.assert_scores(result, faithfulness=0.8)
"""


@pytest.fixture
def server(fake_llm_server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> FakeLLMServer:
    return judging(fake_llm_server, monkeypatch)


def write_tests(pytester: pytest.Pytester, *bodies: str) -> None:
    pytester.makepyfile(test_rag="import judge\n" + "\n".join(bodies))


def test_a_passing_and_a_failing_assertion_with_the_evidence(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL, UNFAITHFUL)
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ScoreAssertionError: 1 of 1 judged score failed*",
            "*faithfulness: 0.000, threshold >= 0.8*",
            "*answer claim 1 not found: 'Bananas grow on tall green plants.'*",
        ]
    )
    result.stdout.fnmatch_lines(["*- judge -*", "2 judged tests, 2 samples*", "requests *"])


def test_replay_of_a_complete_recording_sends_nothing_and_gives_the_same_verdicts(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL, UNFAITHFUL)
    cache = tmp_path / "cache.sqlite"
    pytester.runpytest(*judge_args(server, cache)).assert_outcomes(passed=1, failed=1)
    recorded = len(server.requests)
    assert recorded > 0

    replay = pytester.runpytest(*judge_args(server, cache), "--judge-replay")
    replay.assert_outcomes(passed=1, failed=1)
    assert len(server.requests) == recorded  # not one request
    replay.stdout.fnmatch_lines(["*requests 0, cache hits *", "strict replay (--judge-replay)*"])


def test_replay_of_an_incomplete_recording_fails_that_test_naming_the_judgment(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    cache = tmp_path / "cache.sqlite"
    write_tests(pytester, FAITHFUL)
    pytester.runpytest(*judge_args(server, cache)).assert_outcomes(passed=1)
    recorded = len(server.requests)

    write_tests(pytester, FAITHFUL, UNFAITHFUL)  # a new test, never recorded
    replay = pytester.runpytest(*judge_args(server, cache), "--judge-replay")
    replay.assert_outcomes(passed=1, failed=1)
    assert len(server.requests) == recorded
    replay.stdout.fnmatch_lines(
        [
            "*ReplayMiss: faithfulness of *replay mode: no recorded judgment of 'claims'*",
            "In pytest: record it by running these tests once without --judge-replay (or with "
            "--judge-record) and the same --judge-model, then keep *cache.sqlite with the tests",
        ]
    )


def test_replay_without_a_recording_fails_with_how_to_record(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL)
    result = pytester.runpytest(*judge_args(server, tmp_path / "none.sqlite"), "--judge-replay")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*rag_judge: --judge-cache *none.sqlite does not exist*"])
    assert server.requests == []


def test_record_asks_again_for_every_judgment(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL)
    cache = tmp_path / "cache.sqlite"
    pytester.runpytest(*judge_args(server, cache)).assert_outcomes(passed=1)
    first = len(server.requests)
    pytester.runpytest(*judge_args(server, cache)).assert_outcomes(passed=1)
    assert len(server.requests) == first  # read-write: served from the cache
    recorded = pytester.runpytest(*judge_args(server, cache), "--judge-record")
    recorded.assert_outcomes(passed=1)
    assert len(server.requests) == 2 * first
    recorded.stdout.fnmatch_lines(["recorded (--judge-record)*"])


def test_replay_and_record_together_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_tests(pytester, FAITHFUL)
    result = pytester.runpytest("--judge-replay", "--judge-record")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--judge-replay and --judge-record contradict each other*"])


def test_no_model_configured_fails_the_test_saying_where_to_set_it(
    pytester: pytest.Pytester,
) -> None:
    write_tests(pytester, FAITHFUL)
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*rag_judge needs a judge model: pass --judge-model*"])


def test_settings_from_the_ini_file_and_tool_judge(
    pytester: pytest.Pytester, server: FakeLLMServer
) -> None:
    write_tests(pytester, FAITHFUL)
    pytester.makepyprojecttoml(
        f"""
        [tool.pytest.ini_options]
        judge_api_base = "{server.base_url}"

        [tool.judge]
        model = "openai/judge-model"
        cache = "recordings/judge.sqlite"
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert (pytester.path / "recordings" / "judge.sqlite").is_file()  # relative to the rootdir
    assert server.requests and server.requests[0].body["model"] == "judge-model"


def test_async_tests_await_the_shared_judge(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_async="""
        import asyncio
        import pytest
        import judge

        SAMPLES = [
            ("The Eiffel Tower is in Paris.", 1.0),
            ("Bananas grow on tall green plants.", 0.0),
        ]

        @pytest.mark.anyio
        @pytest.mark.parametrize("anyio_backend", ["asyncio"])
        async def test_two_at_once(rag_judge, anyio_backend):
            results = await asyncio.gather(*(
                rag_judge.ascore(
                    "Where is the Eiffel Tower?",
                    answer,
                    ["The Eiffel Tower is a tower in Paris, France."],
                    metrics=["faithfulness"],
                )
                for answer, _ in SAMPLES
            ))
            assert [r["faithfulness"] for r in results] == [s for _, s in SAMPLES]
            judge.assert_scores(results[0], faithfulness=1.0)
            with pytest.raises(judge.pytest_plugin.ScoreAssertionError):
                judge.assert_scores(results[1], faithfulness=0.5)
        """
    )
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"))
    result.assert_outcomes(passed=1)


def test_scores_and_usage_are_junit_xml_properties(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL, UNFAITHFUL)
    xml = tmp_path / "junit.xml"
    pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"), f"--junitxml={xml}")
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    props = {
        name: {p.get("name"): p.get("value") for p in case.iter("property")}
        for name, case in cases.items()
    }
    assert props["test_faithful"]["judge.faithfulness"] == "1.0"
    assert props["test_unfaithful"]["judge.faithfulness"] == "0.0"
    assert int(props["test_faithful"]["judge.usage.requests"]) == 2  # claims, then verdicts
    assert props["test_faithful"]["judge.usage.samples"] == "1"
    failure = cases["test_unfaithful"].find("failure")
    assert failure is not None and "Bananas grow on tall green plants." in (failure.text or "")


def test_judge_report_writes_the_output_folder_of_the_judged_samples(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL, UNFAITHFUL)
    report = tmp_path / "report"
    result = pytester.runpytest(
        *judge_args(server, tmp_path / "cache.sqlite"), "--judge-report", str(report)
    )
    result.assert_outcomes(passed=1, failed=1)
    rows = [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [
        "test_rag.py::test_faithful",
        "test_rag.py::test_unfaithful",
    ]
    assert [r["scores"]["faithfulness"] for r in rows] == [1.0, 0.0]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["config"]["model"] == "openai/judge-model"
    assert summary["metrics"]["faithfulness"]["mean"] == 0.5
    assert (report / "report.html").is_file()
    assert not (report / ".parts").exists()


def test_judge_report_keeps_apart_the_conversations_of_different_tests(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    """Four tests each evaluated a turn of its own conversation 'c1' (rag_judge.evaluate):
    the report took them for one conversation of 4 turns and resampled it whole, a
    bootstrap interval of [0.5, 0.5] for scores 1, 0, 1, 0. A test's conversation is the
    test's own, as for a conversation judged with rag_judge.score."""
    pytester.makepyfile(
        test_turns="""
        import pytest

        @pytest.mark.parametrize("n", range(4))
        def test_turn(rag_judge, n):
            answer = "The Eiffel Tower is in Paris." if n % 2 == 0 else "Bananas are blue."
            row = {
                "conversation_id": "c1",
                "turn": 1,
                "question": "Where is the Eiffel Tower?",
                "answer": answer,
                "contexts": ["The Eiffel Tower is a tower in Paris, France."],
            }
            result = rag_judge.evaluate([row], metrics=["faithfulness"])
            assert result.rows[0].scores["faithfulness"] == (1.0 if n % 2 == 0 else 0.0)
            # what the test holds is its own: the report's names are the report's
            assert (result.rows[0].id, result.rows[0].conversation_id) == ("0", "c1")
        """
    )
    report = tmp_path / "report"
    result = pytester.runpytest(
        *judge_args(server, tmp_path / "cache.sqlite"), "--judge-report", str(report)
    )
    result.assert_outcomes(passed=4)
    rows = [json.loads(line) for line in (report / "results.jsonl").read_text().splitlines()]
    tests = [f"test_turns.py::test_turn[{n}]" for n in range(4)]
    assert [(r["id"], r["conversation_id"]) for r in rows] == [
        (f"{test}::0", f"{test}::c1") for test in tests
    ]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["resampled"] == {"unit": "conversation", "conversations": 4, "turns": 4}
    stats = summary["metrics"]["faithfulness"]
    assert stats["mean"] == 0.5 and stats["ci_low"] < 0.5 < stats["ci_high"]


def test_an_undefined_score_fails_with_its_reason_unless_allowed(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_nan="""
        import judge

        def score(rag_judge):
            return rag_judge.score(
                "Where is the Eiffel Tower?",
                "The Eiffel Tower is in Paris.",
                ["The Eiffel Tower is a tower in Paris, France."],
                metrics=["faithfulness", "context_recall"],  # no ground truth: NaN
            )

        def test_fails(rag_judge):
            judge.assert_scores(score(rag_judge), faithfulness=0.8, context_recall=0.5)

        def test_allowed(rag_judge):
            judge.assert_scores(
                score(rag_judge), faithfulness=0.8, context_recall=0.5,
                allow_nan={"context_recall"},
            )
        """
    )
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*context_recall: undefined (no_ground_truth), threshold >= 0.5; pass allow_nan=True*"]
    )


def test_two_xdist_workers_share_one_cache_without_losing_or_doubling_entries(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    pytester.makepyfile(
        test_many="""
        import pytest
        import judge

        @pytest.mark.parametrize("n", range(8))
        def test_sample(rag_judge, n):
            result = rag_judge.score(
                f"What is fact {n}?",
                f"Tower {n} is tall.",
                [f"Tower {n} is tall and old.", "Unrelated text."],
                metrics=["faithfulness", "context_precision"],
            )
            judge.assert_scores(result, faithfulness=0.5)
        """
    )

    def keys(cache: Path) -> list[str]:
        with sqlite3.connect(cache) as db:
            return sorted(k for (k,) in db.execute("SELECT key FROM judgments"))

    serial = tmp_path / "serial.sqlite"
    one_report, two_report = tmp_path / "one", tmp_path / "two"
    serial_run = pytester.runpytest_subprocess(
        *judge_args(server, serial), "--judge-report", str(one_report)
    )
    serial_run.assert_outcomes(passed=8)
    shared = tmp_path / "shared.sqlite"
    two = pytester.runpytest_subprocess(
        *judge_args(server, shared), "-n", "2", "--judge-report", str(two_report)
    )
    two.assert_outcomes(passed=8)
    assert keys(shared) == keys(serial) and len(keys(serial)) == 8 * 3
    two.stdout.fnmatch_lines(["8 judged tests, 8 samples*", "requests 24, cache hits 0*"])
    # the report folder: the same rows, in the same order, whatever the number of workers
    results = (two_report / "results.jsonl").read_bytes()
    assert results == (one_report / "results.jsonl").read_bytes()
    assert results.count(b"\n") == 8
    # and the workers' recordings replay
    again = pytester.runpytest_subprocess(*judge_args(server, shared), "-n", "2", "--judge-replay")
    again.assert_outcomes(passed=8)


def test_a_suite_that_never_asks_for_rag_judge_imports_no_llm_stack(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import sys

        def pytest_sessionfinish(session):
            heavy = ("litellm", "openai", "judge.llm.session")
            loaded = sorted(m for m in heavy if m in sys.modules)
            plugin = session.config.pluginmanager.has_plugin("judge")
            print(f"\\nLOADED={loaded} PLUGIN={plugin}")
        """
    )
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*LOADED=[] PLUGIN=True*"])


def test_usage_and_means_count_each_tests_own_judgments_fixtures_and_evaluations_included(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    # found in review: evaluate() re-counted the session's whole usage, judgments made in
    # fixtures were counted nowhere, and the summary's means left evaluations out
    pytester.makepyfile(
        test_usage="""
        import pytest
        import judge

        CONTEXTS = ["The Eiffel Tower is a tower in Paris, France."]

        @pytest.fixture
        def judged(rag_judge):
            return rag_judge.score("Where is it?", "The Eiffel Tower is in Paris.", CONTEXTS,
                                   metrics=["faithfulness"], sample_id="in-fixture")

        def test_one(rag_judge):
            rag_judge.score("Where is the tower?", "The Eiffel Tower is in Paris.", CONTEXTS,
                            metrics=["faithfulness"])

        def test_evaluation(rag_judge):
            answers = ["The Eiffel Tower is in Paris.", "Bananas grow on tall green plants."]
            rows = [{"question": "Where?", "answer": a, "contexts": CONTEXTS} for a in answers]
            rag_judge.evaluate(rows, metrics=["faithfulness"])

        def test_fixture(judged):
            judge.assert_scores(judged, faithfulness=0.5)
        """
    )
    xml = tmp_path / "junit.xml"
    result = pytester.runpytest(*judge_args(server, tmp_path / "c.sqlite"), f"--junitxml={xml}")
    result.assert_outcomes(passed=3)
    props = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(xml).getroot().iter("testcase")
    }

    # each judged sample needs two judgments (claims, then verdicts): asked or cached
    def judgments(test: str) -> int:
        usage = props[test]
        return int(usage["judge.usage.requests"]) + int(usage["judge.usage.cache_hits"])

    assert [judgments(t) for t in ("test_one", "test_evaluation", "test_fixture")] == [2, 4, 2]
    assert props["test_evaluation"]["judge.usage.samples"] == "2"
    assert props["test_evaluation"]["judge.mean.faithfulness"] == "0.5"
    assert props["test_fixture"]["judge.faithfulness"] == "1.0"
    assert len(server.requests) == sum(
        int(props[t]["judge.usage.requests"]) for t in props
    )  # what the tests were charged is what was sent
    result.stdout.fnmatch_lines(
        [
            "3 judged tests, 4 samples; mean scores of the samples: faithfulness 0.750 (n=4)",
            f"requests {len(server.requests)}, cache hits {8 - len(server.requests)}, *",
        ]
    )


def test_a_server_that_is_down_fails_each_test_at_once_in_the_plugins_words(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    # found in review: a 166-line traceback naming api_base, and every test tried again
    write_tests(pytester, FAITHFUL, UNFAITHFUL.replace("test_unfaithful", "test_second"))
    result = pytester.runpytest(
        "--judge-model",
        "openai/judge-model",
        "--judge-api-base",
        "http://127.0.0.1:9/v1",
        "--judge-cache",
        str(tmp_path / "c.sqlite"),
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "--judge-api-base" in text and "api_base" not in text.replace("--judge-api-base", "")
    assert "the judge failed before in this session" in text  # the second test: at once
    assert "concurrent/futures" not in text  # the message, not the judge's inner frames


def test_a_report_of_a_session_that_judged_nothing_says_so(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest("--judge-report", str(tmp_path / "report"))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*--judge-report *report: no test judged anything; not written"])
    assert not (tmp_path / "report" / "results.jsonl").exists()


def test_the_projects_own_metrics_are_named_in_tests_with_their_direction(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    # found in review: a metric of [tool.judge] metrics-modules could not be named
    pytester.makepyfile(
        my_metrics="""
        from judge.metrics.registry import Metric, MetricScore

        async def words(judgments):
            return MetricScore(min(1.0, len(judgments.sample.answer.split()) / 10))

        answer_words = Metric(
            "answer_words", "answer length in tens of words", words, higher_is_better=False
        )
        """,
        test_custom="""
        import judge

        def test_short(rag_judge):
            result = rag_judge.score("Q?", "Two words.", ["c"], metrics=["answer_words"])
            judge.assert_scores(result, answer_words=0.5)  # lower is better: a maximum

        def test_long(rag_judge):
            result = rag_judge.score("Q?", "one two three four five six", ["c"],
                                     metrics=["answer_words"])
            judge.assert_scores(result, answer_words=0.5)

        def test_in_an_evaluation(rag_judge):
            rows = [{"question": "Q?", "answer": "Two words.", "contexts": ["c"]}]
            result = rag_judge.evaluate(rows, metrics=["answer_words"])
            assert result.summary["answer_words"].mean == 0.2
        """,
    )
    pytester.makepyprojecttoml('[tool.judge]\nmetrics-modules = ["my_metrics.py"]\n')
    result = pytester.runpytest(*judge_args(server, tmp_path / "c.sqlite"))
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*answer_words: 0.600, threshold <= 0.5*"])
    assert server.requests == []  # the metric asks no judge


def test_a_bad_cache_file_is_named_by_the_plugins_option_not_the_clis(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(pytester, FAITHFUL)
    cache = tmp_path / "cache.sqlite"
    cache.write_text("not a database, only text " * 100, encoding="utf-8")
    result = pytester.runpytest(*judge_args(server, cache))
    result.assert_outcomes(errors=1)
    shown = result.stdout.str()
    assert "give --judge-cache a new path" in shown, shown
    assert not re.search(r"(?<![\w-])--cache\b", shown), shown[:2000]
    assert server.requests == []


def test_rag_judge_evaluate_refuses_columns_no_metric_can_score(
    pytester: pytest.Pytester, server: FakeLLMServer, tmp_path: Path
) -> None:
    write_tests(
        pytester,
        """
import pytest

def test_columns(rag_judge):
    rows = [{"query": "Q?", "response": "A.", "docs": ["A."]}]
    with pytest.raises(judge.JudgeError) as raised:
        rag_judge.evaluate(rows, metrics=["faithfulness"])
    message = str(raised.value)
    assert "faithfulness would score no row (1 no_contexts)" in message, message
    assert "column_map={'contexts': 'docs'}" in message, message  # its keyword argument
""",
    )
    result = pytester.runpytest(*judge_args(server, tmp_path / "cache.sqlite"))
    result.assert_outcomes(passed=1)
    assert server.requests == []

"""The pytest plugin (entry point `pytest11`: judge): the `rag_judge` fixture, its options,
the scores as JUnit XML properties, a terminal summary and `--judge-report DIR`.

Inert unless used: importing this module loads pytest and nothing of judge's LLM stack;
the model, the cache and litellm are loaded when a test first asks for `rag_judge`, so a
suite that never does pays nothing.

Where each setting comes from, first found wins (`judge.run.settings`, as for the command
line): the command line (`--judge-model`), the environment (`JUDGE_MODEL`), the ini
options (`judge_model` in `[tool.pytest.ini_options]`, pytest.ini, tox.ini), then
`[tool.judge]` of the rootdir's pyproject.toml (`model`), then `judge.LLM`'s defaults;
relative paths in the files are relative to the rootdir. The cache defaults to
`.judge/cache.sqlite` under the rootdir.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from judge.errors import JudgeError
from judge.formatting import counted

if TYPE_CHECKING:
    from judge.pytest_plugin.rag_judge import JudgeSettings, Mode, RagJudge

# (setting, help): each is --judge-<setting> on the command line, judge_<setting> in the
# ini options and <setting> (dashes) in [tool.judge].
SETTINGS = (
    ("model", "the judge model, any litellm model string (e.g. openai/gpt-4o-mini)"),
    ("api_base", "the judge's OpenAI-compatible server, e.g. http://localhost:8000/v1"),
    ("embedding_model", "the embedding model, for answer_relevancy"),
    ("cache", "the judgment cache (default .judge/cache.sqlite under the rootdir)"),
    ("cache_as", "the server identity the recordings are keyed under (see judge eval --cache-as)"),
    ("concurrency", "the judge's requests in flight at once (default: judge.LLM's)"),
)
TYPES = {"concurrency": int}  # the settings that are not strings
PROPERTY = "judge."  # the prefix of the JUnit XML properties the plugin adds
USAGE_PROPERTY = "judge.usage."  # a test's usage: apart from the scores, whatever a metric's name
USAGE = ("samples", "requests", "cache_hits", "prompt_tokens", "completion_tokens")
STATE = pytest.StashKey["JudgeState"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options, on the command line and in the ini file."""
    group = parser.getgroup("judge", "judge: RAG quality assertions (the rag_judge fixture)")
    for name, text in SETTINGS:
        group.addoption(
            f"--judge-{name.replace('_', '-')}",
            dest=f"judge_{name}",
            type=TYPES.get(name, str),
            help=text,
        )
        parser.addini(f"judge_{name}", text)
    group.addoption(
        "--judge-replay",
        action="store_true",
        help="strict replay: a judgment missing from the cache fails its test; nothing is sent",
    )
    group.addoption(
        "--judge-record",
        action="store_true",
        help="ask the judge again for every judgment and store it (refresh the recordings)",
    )
    group.addoption(
        "--judge-prompts",
        dest="judge_prompts",
        metavar="DIR",
        help="a prompt set (as judge align writes it): its files replace the built-in prompts "
        "of their names (also the judge_prompts ini option)",
    )
    parser.addini("judge_prompts", "a prompt set's folder, relative to the rootdir")
    group.addoption(
        "--judge-report",
        metavar="DIR",
        help="write results.jsonl, summary.json and report.html of the judged samples to DIR",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Check the options that conflict, and keep the session's state."""
    if config.getoption("judge_replay") and config.getoption("judge_record"):
        raise pytest.UsageError(
            "--judge-replay and --judge-record contradict each other: replay reads the "
            "recordings, record replaces them; give one"
        )
    state = JudgeState(config)
    if state.report_dir is not None and state.worker is None:
        from judge.pytest_plugin.report import clear_parts

        clear_parts(state.report_dir)
    config.stash[STATE] = state
    config.pluginmanager.register(state, "judge-state")


class JudgeState:
    """What the plugin keeps for one pytest process: the judge (made on first use), the
    test running now, and the totals of judged tests (gathered from the reports, so under
    pytest-xdist the controller sums what every worker judged)."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.judge: RagJudge | None = None
        self.current: pytest.Item | None = None
        self.calls: dict[str, int] = {}  # nodeid -> judged calls made by that test
        self.usage: dict[str, dict[str, float]] = {}  # nodeid -> usage of its calls
        self.tests = 0
        self.report_error: str | None = None
        self.report_written = False
        self.totals: dict[str, float] = {}
        self.unpriced = False
        self.metric_sums: dict[str, list[float]] = {}  # metric -> [sum, count]
        report = config.getoption("judge_report")
        self.report_dir = Path(report) if report else None
        self.worker = getattr(config, "workerinput", {}).get("workerid")

    def settings(self) -> JudgeSettings:
        """The judge's settings from the command line, the environment, the ini file and
        [tool.judge] (`judge.run.settings.resolve_settings`)."""
        from judge.pytest_plugin.rag_judge import JudgeSettings
        from judge.run.settings import resolve_settings

        root = self.config.rootpath
        pyproject = root / "pyproject.toml"
        names = [name for name, _ in SETTINGS]
        resolved = resolve_settings(
            {name: self.config.getoption(f"judge_{name}") for name in names},
            ini={name: self.config.getini(f"judge_{name}") for name in names},
            pyproject=pyproject,
            flag_prefix="--judge-",
        )
        prompts = self.config.getoption("judge_prompts") or None
        if prompts is None and self.config.getini("judge_prompts"):
            prompts = root / self.config.getini("judge_prompts")
        mode: Mode = "read-write"
        if self.config.getoption("judge_replay"):
            mode = "replay"
        elif self.config.getoption("judge_record"):
            mode = "record"
        return JudgeSettings(
            model=resolved.model,
            api_base=resolved.api_base,
            embedding_model=resolved.embedding_model,
            cache=Path(resolved.cache),
            cache_as=resolved.cache_as,
            concurrency=resolved.concurrency,
            mode=mode,
            project=pyproject if pyproject.is_file() else None,
            prompts=Path(prompts) if prompts is not None else None,
        )

    def open_judge(self) -> RagJudge:
        """The session's judge, made on first use."""
        if self.judge is None:
            from judge.pytest_plugin.rag_judge import RagJudge

            self.judge = RagJudge(self.settings(), listener=self.judged)
        return self.judge

    def close(self) -> None:
        """Close the judge, if one was made."""
        if self.judge is not None:
            judge, self.judge = self.judge, None
            judge.close()

    # -- what each test judged ------------------------------------------------------------

    def judged(self, kind: str, result: Any) -> None:
        """Attach what a call of the running test (or of its fixtures) judged to it:
        JUnit XML properties, and rows of the report folder. A conversation's turns are
        each a sample's call (`judge.faithfulness`, `judge.faithfulness#2`, ...)."""
        item = self.current
        if item is None:  # judged outside any test's setup, call or teardown
            return
        if kind == "conversation":
            first = self.calls.get(item.nodeid, 0) + 1
            for turn in result.turns:
                self._judged_sample(item, turn)
            if self.report_dir is not None and result.turns:
                self._write_part(item.nodeid, first, kind, result)
            return
        self._judged_sample(item, result, kind)
        if self.report_dir is not None:
            self._write_part(item.nodeid, self.calls[item.nodeid], kind, result)

    def _judged_sample(self, item: pytest.Item, result: Any, kind: str = "sample") -> None:
        """One call's properties and usage: a sample's scores, or an evaluation's means."""
        n = self.calls[item.nodeid] = self.calls.get(item.nodeid, 0) + 1
        suffix = "" if n == 1 else f"#{n}"
        spent = self.usage.setdefault(item.nodeid, {})
        if kind == "sample":
            for metric, value in result.scores.items():
                item.user_properties.append((f"{PROPERTY}{metric}{suffix}", _shown(value)))
            totals = [result.usage.get("total", {})]
            spent["samples"] = spent.get("samples", 0) + 1
        else:
            # An evaluation's means, with the rows each stands on (the summary weights them).
            for metric, stats in result.summary.items():
                item.user_properties.append(
                    (f"{PROPERTY}mean.{metric}{suffix}", _shown(stats.mean))
                )
                item.user_properties.append((f"{PROPERTY}scored.{metric}{suffix}", stats.scored))
            # Each row's own usage: the result's is the shared session's running total.
            totals = [(row.usage or {}).get("total", {}) for row in result.rows]
            spent["samples"] = spent.get("samples", 0) + len(totals)
        for total in totals:
            for name in (*USAGE[1:], "cost"):
                value = total.get(name)
                if value is None and name == "cost":
                    spent["unpriced"] = 1
                spent[name] = spent.get(name, 0) + (value or 0)

    def usage_properties(self, item: pytest.Item) -> None:
        """The usage of the test's judged calls as properties, added once at its end."""
        spent = self.usage.pop(item.nodeid, None)
        if spent is None:
            return
        for name in USAGE:
            item.user_properties.append((f"{USAGE_PROPERTY}{name}", int(spent.get(name, 0))))
        cost = None if spent.get("unpriced") else round(spent.get("cost", 0.0), 6)
        item.user_properties.append((f"{USAGE_PROPERTY}cost", "unknown" if cost is None else cost))

    def _write_part(self, nodeid: str, call: int, kind: str, result: Any) -> None:
        """Append the judged rows to this process's part of the report folder."""
        from judge.pytest_plugin.report import write_part

        assert self.report_dir is not None
        write_part(self.report_dir, self.worker or "main", nodeid, call, kind, result)

    def count(self, report: pytest.TestReport) -> None:
        """Add a finished test's judged properties to the session totals."""
        found = False
        means: dict[str, float] = {}
        for name, value in report.user_properties:
            if not name.startswith(PROPERTY):
                continue
            found = True
            if name.startswith(USAGE_PROPERTY):
                key = name[len(USAGE_PROPERTY) :]
                if key == "cost":
                    if value == "unknown":
                        self.unpriced = True
                    else:
                        self.totals["cost"] = self.totals.get("cost", 0.0) + float(str(value))
                else:
                    self.totals[key] = self.totals.get(key, 0) + int(str(value))
                continue
            key = name[len(PROPERTY) :]
            if key.startswith("mean."):
                means[key[len("mean.") :]] = _number(value) or math.nan
            elif key.startswith("scored."):
                key = key[len("scored.") :]
                mean, rows = means.get(key, math.nan), int(str(value))
                if rows and not math.isnan(mean):
                    self._add_score(key.split("#", 1)[0], mean * rows, rows)
            elif (number := _number(value)) is not None:
                self._add_score(key.split("#", 1)[0], number, 1)
        self.tests += found

    def _add_score(self, metric: str, total: float, count: int) -> None:
        sums = self.metric_sums.setdefault(metric, [0.0, 0.0])
        sums[0] += total
        sums[1] += count

    def summary_lines(self) -> list[str]:
        """The terminal summary: judged tests, metrics, cache hits, requests, tokens, cost."""
        if not self.tests:
            return []
        t = self.totals
        means = ", ".join(
            f"{metric} {s / n:.3f} (n={int(n)})"
            for metric, (s, n) in sorted(self.metric_sums.items())
        )
        cost = (
            "unknown (a model without a price)" if self.unpriced else f"${t.get('cost', 0.0):.4f}"
        )
        tokens = int(t.get("prompt_tokens", 0) + t.get("completion_tokens", 0))
        lines = [
            f"{counted(self.tests, 'judged test')}, {counted(int(t.get('samples', 0)), 'sample')}; "
            "mean scores "
            f"of the samples: {means or 'none'}",
            f"requests {int(t.get('requests', 0))}, cache hits {int(t.get('cache_hits', 0))}, "
            f"tokens {tokens} ({int(t.get('prompt_tokens', 0))} prompt + "
            f"{int(t.get('completion_tokens', 0))} completion), cost {cost}",
        ]
        mode = self.mode_name()
        if mode:
            lines.append(mode)
        if self.report_dir is not None:
            lines.append(f"report: {self.report_dir}")
        return lines

    def report_line(self) -> str | None:
        """What became of --judge-report, when it was not written."""
        if self.report_error:
            return f"the report was not written: {self.report_error}"
        if self.report_dir is not None and not self.report_written:
            return f"--judge-report {self.report_dir}: no test judged anything; not written"
        return None

    def report_settings(self) -> JudgeSettings | None:
        """The judge's settings for the report's summary.json, when they can be read (a
        session that never judged may have none)."""
        try:
            return self.settings()
        except JudgeError:
            return None

    def mode_name(self) -> str:
        """How the cache was used, as the summary says it."""
        if self.config.getoption("judge_replay"):
            return "strict replay (--judge-replay): nothing was sent to a model"
        if self.config.getoption("judge_record"):
            return "recorded (--judge-record): every judgment was asked again and stored"
        return ""

    # -- hooks (this object is registered as a plugin) ------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Know which test a judged call belongs to: its setup (fixtures that judge), its
        call and its teardown."""
        self.current = item
        try:
            return (yield)
        finally:
            self.current = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Generator[None, Any, Any]:
        """Add the test's usage properties before its teardown report is made (JUnit XML
        reads the properties from that report)."""
        try:
            return (yield)
        finally:
            self.usage_properties(item)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """A judge error (no model, a replay miss, an unknown metric) failing a test is
        shown as its message at the test's line, not as the judge's inner frames."""
        report = yield
        excinfo = call.excinfo
        if (
            excinfo is not None
            and isinstance(excinfo.value, JudgeError)
            and not isinstance(excinfo.value, AssertionError)
        ):
            where = [e for e in excinfo.traceback if Path(str(e.path)) == item.path]
            line = f"{item.path.name}:{where[-1].lineno + 1}: " if where else ""
            report.longrepr = f"{line}{excinfo.typename}: {excinfo.value}"
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count each finished test's judged properties (the xdist controller sees every
        worker's reports here)."""
        if report.when == "teardown":
            self.count(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Close the judge; the controller (or a lone process) writes the report folder."""
        self.close()
        if self.report_dir is not None and self.worker is None:
            from judge.pytest_plugin.report import write_report

            try:
                self.report_written = (
                    write_report(self.report_dir, self.report_settings()) is not None
                )
            except JudgeError as exc:
                self.report_error = str(exc)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """A section after the tests: what was judged and what it cost."""
        if self.worker is not None:
            return
        lines = self.summary_lines()
        report = self.report_line()
        if report:
            lines.append(report)
        if not lines:
            return
        terminalreporter.write_sep("-", "judge")
        for line in lines:
            terminalreporter.write_line(line)


def _shown(value: float) -> float | str:
    """A score as a property value: the number, or "nan"."""
    value = float(value)
    return "nan" if math.isnan(value) else round(value, 6)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


@pytest.fixture(scope="session")
def rag_judge(pytestconfig: pytest.Config) -> Iterator[RagJudge]:
    """The session's judge, configured by --judge-model, --judge-cache, --judge-replay...:
    `rag_judge.score(...)`, `rag_judge.evaluate(...)`, `rag_judge.assert_scores(...)`."""
    state = pytestconfig.stash[STATE]
    failure: str | None = None
    try:
        judge = state.open_judge()
    except JudgeError as exc:
        from judge.pytest_plugin.rag_judge import pytest_words

        failure = f"rag_judge: {pytest_words(str(exc))}"
    if failure is not None:  # outside the except: not shown again in the library's words
        pytest.fail(failure, pytrace=False)
    yield judge
    state.close()


__all__ = ["SETTINGS", "JudgeState", "rag_judge"]

"""Progress: periodic plain lines off a terminal, a tqdm bar on one, nothing when quiet."""

from __future__ import annotations

import io
import re
import sys
import time

import pytest

from judge import LLM
from judge.cli import main
from judge.errors import JudgeError
from judge.llm.usage import Usage
from judge.run.evaluate import evaluate
from judge.run.progress import Progress, clock_text
from tests.helpers.judging import ANSWER, CONTEXTS, QUESTION, TRUTH, judge_handler

GOOD = {"question": QUESTION, "answer": ANSWER, "contexts": CONTEXTS, "ground_truth": TRUTH}
# what every status line carries, e.g. "judge: 2/4 samples (50%) | 5 requests, 1 cache
# hits, 42 tokens, $0.0012 | 0:31 elapsed | ETA 0:31"; the cost only once a price is known,
# "cost unknown" when a model is missing from the price map
FIELDS = re.compile(
    r"^judge: (done, |stopped, )?\d+/\d+ samples \(\d+%\) \| [\d,]+ requests, [\d,]+ cache hits, "
    r"[\d,]+ tokens(, \$\d+\.\d{4}|, <\$0\.0001|, cost unknown)? \| [\d:]+ elapsed"
    r"( \| ETA [\d:]+)?$"
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeSession:
    """Only what Progress reads: usage.total()."""

    def __init__(self) -> None:
        self.totals = Usage()

    @property
    def usage(self) -> FakeSession:
        return self

    def total(self) -> Usage:
        return self.totals


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def slow_judge(body: dict) -> str:
    time.sleep(0.05)  # slower than the progress interval below, so lines come between samples
    return judge_handler(body)


def test_lines_every_interval_with_every_field_and_a_final_line():
    clock, session, out = FakeClock(), FakeSession(), io.StringIO()
    bar = Progress(4, session, mode="lines", interval=30, stream=out, clock=clock)
    assert out.getvalue() == (
        "judge: 0/4 samples (0%) | 0 requests, 0 cache hits, 0 tokens | 0:00 elapsed\n"
    )
    clock.now += 10
    session.totals = Usage(requests=3, cache_hits=1, prompt_tokens=1000, completion_tokens=234)
    session.totals.known_cost = 0.0125
    bar.advance()
    assert out.getvalue().count("\n") == 1  # 10 s < 30 s: nothing new yet
    clock.now += 21
    bar.advance()
    lines = out.getvalue().splitlines()
    assert lines[-1] == (
        "judge: 2/4 samples (50%) | 3 requests, 1 cache hits, 1,234 tokens, $0.0125 "
        "| 0:31 elapsed | ETA 0:31"
    )
    clock.now += 29
    bar.tick()
    assert len(out.getvalue().splitlines()) == 2  # 29 s since the last line
    clock.now += 1
    bar.tick()  # a due line even though no sample finished
    assert out.getvalue().splitlines()[-1].startswith("judge: 2/4 samples (50%)")
    clock.now += 3600
    bar.advance(2)
    bar.close()
    bar.close()  # idempotent
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("judge: done, 4/4 samples (100%)")
    assert lines[-1].endswith("| 1:01:01 elapsed")  # no ETA once done
    assert all(FIELDS.match(line) for line in lines), lines


def test_unknown_cost_is_said_and_a_failed_run_says_stopped():
    clock, session, out = FakeClock(), FakeSession(), io.StringIO()
    session.totals = Usage(requests=2, unpriced_requests=1)
    bar = Progress(3, session, mode="lines", stream=out, clock=clock)
    bar.advance()
    bar.close()
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("judge: stopped, 1/3 samples") and "$" not in last
    assert "0 tokens, cost unknown |" in last


def test_a_cost_not_known_yet_is_never_shown_as_zero_dollars():
    session = FakeSession()
    bar = Progress(3, session, mode="off")
    assert bar.usage_text() == "0 requests, 0 cache hits, 0 tokens"  # nothing priced yet
    session.totals = Usage(requests=2, prompt_tokens=10)  # sent, no answer priced yet
    assert "$" not in bar.usage_text() and "cost" not in bar.usage_text()
    session.totals.unpriced_requests = 1  # a model missing from the price map
    assert bar.usage_text().endswith(", 10 tokens, cost unknown")
    session.totals = Usage(requests=1, prompt_tokens=10, known_cost=0.00002)
    assert bar.usage_text().endswith(", 10 tokens, <$0.0001")  # not $0.0000
    session.totals.known_cost = 0.0125
    assert bar.usage_text().endswith(", 10 tokens, $0.0125")


def test_eta_leaves_out_rows_resumed_from_a_checkpoint():
    clock, out = FakeClock(), io.StringIO()
    bar = Progress(100, mode="lines", interval=1, resumed=50, stream=out, clock=clock)
    clock.now += 10
    bar.advance(10)  # 10 samples in 10 s, 40 to go: 40 s, not 40 * 10/60 s
    assert (
        out.getvalue().splitlines()[-1] == "judge: 60/100 samples (60%) | 0:10 elapsed | ETA 0:40"
    )


def test_mode_follows_the_stream_and_bar_mode_is_tqdm():
    from tqdm import tqdm

    assert Progress(1, mode=None, stream=io.StringIO()).mode == "lines"
    term = Terminal()
    bar = Progress(2, FakeSession(), mode=None, stream=term)
    assert bar.mode == "bar" and isinstance(bar._bar, tqdm)
    bar.advance(2)
    bar.close()
    text = term.getvalue()
    assert "2/2" in text and "100%" in text and "0 requests, 0 cache hits, 0 tokens" in text


def test_off_writes_nothing_and_a_bad_interval_is_an_error():
    out = io.StringIO()
    bar = Progress(2, FakeSession(), mode="off", stream=out)
    bar.advance(2)
    bar.close()
    assert out.getvalue() == ""
    with pytest.raises(JudgeError, match="positive number of seconds"):
        Progress(2, interval=0)


def test_clock_text():
    assert [clock_text(s) for s in (0, 59.6, 61, 3600, 86399)] == [
        "0:00",
        "1:00",
        "1:01",
        "1:00:00",
        "23:59:59",
    ]


def llm(server) -> LLM:
    return LLM("openai/judge-model", api_base=server.base_url, api_key="k", max_concurrency=1)


def test_evaluate_off_a_terminal_prints_periodic_lines_between_samples(fake_llm_server, capsys):
    fake_llm_server.chat = slow_judge
    result = evaluate(
        [GOOD] * 3, metrics=["faithfulness"], llm=llm(fake_llm_server), progress_interval=0.02
    )
    assert result.rows_with_errors == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("judge: 0/3 samples (0%) | 0 requests")
    assert lines[-1].startswith("judge: done, 3/3 samples (100%) | 6 requests, 0 cache hits")
    assert all(FIELDS.match(line) for line in lines), lines
    # the ticker prints while a sample is still being judged, not only when one finishes
    assert len(lines) > 5, lines
    assert any(" 0/3 samples" in line and "ETA" not in line for line in lines[1:-1])
    assert any("ETA" in line for line in lines)


def test_evaluate_on_a_terminal_draws_a_tqdm_bar(fake_llm_server, capsys, monkeypatch):
    fake_llm_server.chat = judge_handler
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    evaluate([GOOD] * 2, metrics=["faithfulness"], llm=llm(fake_llm_server))
    text = term.getvalue()
    assert "\r" in text and "2/2" in text and "sample/s" in text
    assert re.search(r"\d requests, 0 cache hits, [1-9][\d,]* tokens", text)
    assert "judge:" not in text  # no plain lines on a terminal


def test_evaluate_quiet_prints_nothing(fake_llm_server, capsys):
    fake_llm_server.chat = judge_handler
    evaluate([GOOD], metrics=["faithfulness"], llm=llm(fake_llm_server), progress=False)
    assert capsys.readouterr().err == ""


def cli(tmp_path, server, *extra: str) -> list[str]:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join([__import__("json").dumps(GOOD)] * 2) + "\n")
    return [
        "eval",
        str(data),
        "--model",
        "openai/judge-model",
        "--api-base",
        server.base_url,
        "--api-key",
        "k",
        "--metrics",
        "faithfulness",
        "--no-cache",
        "--out",
        str(tmp_path / "out"),
        *extra,
    ]


def test_cli_progress_lines_and_no_progress(fake_llm_server, tmp_path, capsys):
    fake_llm_server.chat = judge_handler
    assert main(cli(tmp_path, fake_llm_server, "--progress-interval", "5")) == 0
    *lines, recorded = capsys.readouterr().err.splitlines()
    assert recorded.startswith("judge: recorded run ")  # after the run, in the run store
    assert lines[0].startswith("judge: 0/2 samples")
    assert lines[-1].startswith("judge: done, 2/2 samples (100%) | ")
    assert all(FIELDS.match(line) for line in lines), lines
    assert main(cli(tmp_path, fake_llm_server, "--no-progress")) == 0
    assert re.fullmatch(r"judge: recorded run [0-9a-f]{12} in \S+\n", capsys.readouterr().err)
    assert main(cli(tmp_path, fake_llm_server, "--progress-interval", "0")) == 2
    assert "positive number of seconds" in capsys.readouterr().err

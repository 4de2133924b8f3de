"""Runs fail loudly and lose nothing: configuration errors stop them, too many judge errors
fail them, and transient failures are still retried."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import time

import pytest

import judge
from judge import LLM
from judge.errors import LLMConfigError
from judge.llm.retry import UNREACHED_ATTEMPTS, cannot_connect
from judge.llm.session import LLMSession
from judge.run.evaluate import aevaluate, evaluate
from judge.testing import FakeLLMServer, Fault, heuristic_judge
from judge.testing.replies import FakeHTTPError
from tests.helpers.cli import dataset, eval_args, rows, run

ONE = {
    "question": "Who created Python?",
    "answer": "Guido van Rossum created Python.",
    "contexts": ["Python was created by Guido van Rossum."],
}


def of_row(body: dict, i: int) -> bool:
    """Whether a judge request is about row i of `rows` (its question or its answer)."""
    text = json.dumps(body)
    return f"({i})" in text or f"Row {i} " in text


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def llm_at(base: str, **settings) -> LLM:
    return LLM("openai/judge", api_base=base, api_key="k", **settings)


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (401, "the API key was refused"),
        (403, "may not use this model"),
        (404, "no such model at http://127.0.0.1:"),
    ],
)
def test_score_raises_a_configuration_error_instead_of_nan(fake_llm_server, status, hint):
    fake_llm_server.chat = heuristic_judge
    fake_llm_server.fail_next(Fault.status(status))
    with pytest.raises(LLMConfigError, match=hint):
        judge.score(**ONE, llm=llm_at(fake_llm_server.base_url))
    # A failure that is not about the configuration stays that metric's NaN. Another server:
    # the first score's cancelled requests may still arrive and would take these faults.
    with FakeLLMServer(heuristic_judge) as second:
        second.fail_next(*[Fault.status(500)] * 2)
        result = judge.score(
            **ONE, metrics=["faithfulness"], llm=llm_at(second.base_url, max_retries=1)
        )
    assert result.reasons["faithfulness"] == "judge_error"
    assert result.errors["faithfulness"].startswith("LLMCallError: ")


@pytest.mark.parametrize("model", ["openai/judge", "hosted_vllm/judge"])  # openai SDK, litellm
def test_no_server_at_the_address_fails_after_a_few_quick_attempts(model):
    base = f"http://127.0.0.1:{closed_port()}/v1"
    session = LLMSession(LLM(model, api_base=base, api_key="k", max_retries=6))
    with pytest.raises(LLMConfigError) as info:
        judge.score(**ONE, metrics=["context_relevance"], llm=session)
    assert str(info.value) == (
        f"context_relevance ({model}): no server answered at {base} (connection refused; "
        f"{UNREACHED_ATTEMPTS} attempts): is a server listening there? Check the address "
        "(api_base=)"
    )
    assert session.usage.total().requests == UNREACHED_ATTEMPTS  # not 7, with up to 31 s


def test_a_server_lost_mid_run_is_an_outage_retried_in_full():
    server = FakeLLMServer(heuristic_judge).start()
    session = LLMSession(llm_at(server.base_url, max_retries=2))
    try:
        first = judge.score(**ONE, metrics=["context_relevance"], llm=session)
        assert first["context_relevance"] == 1.0
    finally:
        server.stop()  # it answered once: from now on its refusals are an outage
    later = judge.score(
        "Who made Python?", "Guido did.", ["Guido."], metrics=["context_relevance"], llm=session
    )
    assert later.reasons["context_relevance"] == "judge_error"
    assert "LLMCallError: " in later.errors["context_relevance"]
    assert "gave up after 3 attempts" in later.errors["context_relevance"]


def test_a_missing_api_key_is_a_configuration_error(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    expected = (
        "claims (openai/gpt-4o-mini): no API key for OpenAI: set OPENAI_API_KEY or pass "
        "api_key= (--api-key)"
    )
    with pytest.raises(LLMConfigError) as info:  # raised before any connection is made
        judge.score(**ONE, metrics=["faithfulness"], llm=LLM("openai/gpt-4o-mini"))
    assert str(info.value) == expected


def chained(cause: BaseException) -> BaseException:
    """An SDK error caused by `cause`, as the clients raise them."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise RuntimeError("Connection error.") from inner
    except RuntimeError as outer:
        return outer


def test_which_connection_failures_mean_no_server():
    assert cannot_connect(chained(ConnectionRefusedError(111, "refused"))) == "connection refused"
    assert cannot_connect(chained(socket.gaierror(-2, "Name or service not known"))) == (
        "unknown host"
    )
    assert "TLS" in (cannot_connect(chained(ssl.SSLError(1, "wrong version number"))) or "")
    # A timeout or a connection dropped mid-answer proves nothing about the address.
    assert cannot_connect(chained(TimeoutError())) is None
    assert cannot_connect(chained(ConnectionResetError(104, "reset"))) is None


def test_evaluate_stops_at_a_configuration_error_and_a_rerun_resumes(tmp_path, fake_llm_server):
    key_works = False

    def handler(body: dict) -> str:
        if not key_works and of_row(body, 3):
            raise FakeHTTPError(401, "invalid api key")
        return heuristic_judge(body)

    fake_llm_server.chat = handler
    llm = llm_at(fake_llm_server.base_url, max_concurrency=1)  # rows one after another
    settings = {"llm": llm, "cache": tmp_path / "c.sqlite", "checkpoint": tmp_path / "ck.jsonl"}
    with pytest.raises(LLMConfigError, match="the API key was refused"):
        evaluate(rows(6), **settings, progress=False)
    saved = [json.loads(line) for line in (tmp_path / "ck.jsonl").read_text().splitlines()]
    assert [s["row"] for s in saved] == [0, 1, 2]  # row 3 failed, rows 4 and 5 never ran
    assert not any(of_row(r.body, 4) or of_row(r.body, 5) for r in fake_llm_server.requests)
    fake_llm_server.reset()
    key_works = True
    result = evaluate(rows(6), **settings, progress=False)
    assert result.config["resumed_rows"] == 3 and result.rows_with_errors == 0
    assert not any(of_row(r.body, i) for r in fake_llm_server.requests for i in (0, 1, 2))
    assert [r.scores["context_recall"] for r in result.rows] == [1.0] * 6


def test_a_configuration_error_cancels_the_requests_in_flight(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    # The first request hangs, so one is surely in flight when the second meets the 401
    # (a 401 first could be answered, on a loaded machine, before any other was sent).
    fake_llm_server.fail_next(Fault.delay(20), Fault.status(401), *[Fault.delay(20)] * 60)
    llm = llm_at(fake_llm_server.base_url, max_concurrency=8)

    async def main() -> tuple[float, int]:
        started = time.monotonic()
        with pytest.raises(LLMConfigError):
            await aevaluate(rows(8), llm=llm, checkpoint=tmp_path / "ck.jsonl", progress=False)
        others = asyncio.all_tasks() - {asyncio.current_task()}
        return time.monotonic() - started, len(others)

    seconds, left_running = asyncio.run(main())
    assert left_running == 0 and seconds < 10  # the delayed requests were not waited for
    assert fake_llm_server.count() > 1  # the hanging one was in flight when it stopped
    assert not (tmp_path / "ck.jsonl").exists()  # no row had finished


def test_429_and_500_are_retried_and_no_configuration_error(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    fake_llm_server.fail_next(Fault.status(429, retry_after=0), Fault.status(500))
    result = evaluate(rows(2), llm=llm_at(fake_llm_server.base_url, max_retries=2), progress=False)
    assert result.rows_with_errors == 0 and result.judge_error_rate == 0.0
    assert result.usage["retries"] == 2


def test_judge_error_rate_counts_judged_rows_only(fake_llm_server):
    fake_llm_server.chat = lambda body: "no JSON" if of_row(body, 1) else heuristic_judge(body)
    data = [*rows(4), {"question": "", "answer": "a bad row"}]
    result = evaluate(data, llm=llm_at(fake_llm_server.base_url), progress=False)
    assert result.rows_with_errors == 2  # the bad row and row 1
    assert (result.rows_with_judge_errors, result.judged_rows) == (1, 4)
    assert result.judge_error_rate == 0.25
    assert result.summary_dict()["judge_errors"] == {"rows": 1, "judged_rows": 4, "rate": 0.25}


# The command line: one line on stderr and exit 2 for configuration errors; exit 3 for too
# many judge errors.


def single_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("judge: error: "), stderr
    return lines[0]


@pytest.mark.parametrize(
    ("problem", "hint"),
    [
        (401, "the API key was refused (HTTP 401: invalid api key): set OPENAI_API_KEY or pass"),
        (403, "may not use this model (HTTP 403: "),
        (404, "no such model at http://127.0.0.1:"),
        ("closed port", "(connection refused; 3 attempts): is a server listening there?"),
        ("no key", "no API key for OpenAI: set OPENAI_API_KEY or pass --api-key"),
    ],
)
def test_configuration_errors_exit_2_with_one_line(
    tmp_path, fake_llm_server, monkeypatch, problem, hint
):
    fake_llm_server.chat = heuristic_judge
    args = eval_args(dataset(tmp_path / "d.jsonl", 3), fake_llm_server, tmp_path)
    if isinstance(problem, int):
        fake_llm_server.fail_next(Fault.status(problem, "invalid api key"))
    elif problem == "closed port":
        args[args.index("--api-base") + 1] = f"http://127.0.0.1:{closed_port()}/v1"
    else:  # the real provider's route without a key: fails before any connection
        for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "JUDGE_API_KEY"):
            monkeypatch.delenv(name, raising=False)
        for option in ("--api-base", "--api-key"):
            del args[args.index(option) : args.index(option) + 2]
        args[args.index("--model") + 1] = "openai/gpt-4o-mini"
    done = run(*args)
    assert done.returncode == 2 and hint in single_line(done.stderr)
    assert "sk-cli-secret-123456" not in done.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


def test_after_a_configuration_error_the_rerun_resumes(tmp_path, fake_llm_server):
    key_works = False

    def handler(body: dict) -> str:
        if not key_works and of_row(body, 2):
            raise FakeHTTPError(401, "invalid api key")
        return heuristic_judge(body)

    fake_llm_server.chat = handler
    args = eval_args(
        dataset(tmp_path / "d.jsonl", 4), fake_llm_server, tmp_path, "--concurrency", "1"
    )
    stopped = run(*args)
    assert stopped.returncode == 2
    assert single_line(stopped.stderr).endswith(
        "; the rows finished before it are kept: rerun to resume"
    )
    fake_llm_server.reset()
    key_works = True
    resumed = run(*args)
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["config"]["resumed_rows"] == 2 and summary["rows_with_errors"] == 0
    assert not any(of_row(r.body, i) for r in fake_llm_server.requests for i in (0, 1))


def test_too_many_judge_errors_exit_3_and_the_summary_says_so(tmp_path, fake_llm_server):
    fake_llm_server.chat = lambda body: "no JSON" if of_row(body, 1) else heuristic_judge(body)
    data = dataset(tmp_path / "d.jsonl", 4)
    failed = run(*eval_args(data, fake_llm_server, tmp_path, "--fail-under", "faithfulness=0.9"))
    assert failed.returncode == 3  # over the default limit of 5%; it wins over exit 1
    assert (
        "FAILED error rate: judges failed in 1 of 4 judged rows (25.0%), over "
        "--max-error-rate 0.05; most often InvalidOutputError: their scores are missing "
        "from the means; see 'errors' in results.jsonl"
    ) in failed.stderr
    assert "FAILED threshold: faithfulness" in failed.stderr
    assert "judge errors in 1 of 4 judged rows (25.0%; --max-error-rate 0.05)" in failed.stdout
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["judge_errors"] == {
        "rows": 1,
        "judged_rows": 4,
        "rate": 0.25,
        "max_rate": 0.05,
        "failed": True,
    }
    for limit, code in (("0.25", 0), ("1", 0), ("0.2", 3)):
        done = run(*eval_args(data, fake_llm_server, tmp_path, "--max-error-rate", limit))
        assert done.returncode == code, (limit, done.stderr)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["judge_errors"]["failed"] is True and summary["judge_errors"]["max_rate"] == 0.2


def test_max_error_rate_is_checked_and_documented(tmp_path, capsys, monkeypatch):
    from judge.cli.main import build_parser, main

    monkeypatch.setenv("COLUMNS", "2000")  # no line breaks (argparse splits words at "-")

    assert main(["eval", str(tmp_path / "d.jsonl"), "--max-error-rate", "1.5"]) == 2
    assert "--max-error-rate 1.5: give a share from 0 to 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "3 scores are missing: judges failed in more than --max-error-rate of the judged" in text
    assert "rows could not be read in more than that share of all rows" in text
    assert "or a --replay missed a judgment" in text
    assert "(default 0.05; 1 turns the check off; a --replay that misses fails" in text

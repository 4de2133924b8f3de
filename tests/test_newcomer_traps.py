"""The traps a newcomer walks into (issue 24, defect 8), each as the user meets it: through
the CLI in flags, through Python in keyword arguments."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import judge
from judge.cache.identity import server_identity
from judge.errors import JudgeError, LLMConfigError, UnknownMetricError
from judge.ir.measure_names import parse_measure
from judge.llm.config import LLM, Embeddings
from judge.llm.transport import endpoint_for
from judge.metrics.registry import get_metric
from judge.testing import heuristic_judge
from tests.helpers.cli import run as run_judge

SECRET = "sk-traps-secret-0123456789"


def run(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return run_judge(*args, timeout=180, **kwargs)


def rows(n: int = 3, *, retrieval: bool = False) -> list[dict]:
    out = []
    for i in range(n):
        row = {
            "id": f"s{i}",
            "question": f"Who created Python? ({i})",
            "answer": f"Guido van Rossum created Python. Row {i}.",
            "contexts": ["Python was created by Guido van Rossum.", "Bananas are yellow."],
            "ground_truth": "Guido van Rossum created Python.",
        }
        if retrieval:
            row["retrieved_ids"] = ["d1", "d2", "d3"]
            row["relevance"] = ["d2"]
        out.append(row)
    return out


def write(path: Path, data: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    return path


def base_args(data: Path, tmp: Path, *extra: str) -> list[str]:
    return [
        "eval",
        str(data),
        "--cache",
        str(tmp / "cache.sqlite"),
        "--out",
        str(tmp / "out"),
        "--no-progress",
        *extra,
    ]


def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider key in the environment, as on a newcomer's machine."""
    for name in (
        "OPENAI_API_KEY",
        "JUDGE_API_KEY",
        "LITELLM_PROXY_API_KEY",
        "CUSTOM_OPENAI_API_KEY",
        "HOSTED_VLLM_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)


# 1. A model string without a provider prefix stops at the first call, before sending.


def test_cli_model_without_provider_prefix_stops_with_exit_2(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write(tmp_path / "d.jsonl", rows(3))
    done = run(
        *base_args(data, tmp_path, "--model", "qwen2.5", "--api-base", fake_llm_server.base_url)
    )
    assert done.returncode == 2, done.stderr
    assert "provider prefix" in done.stderr
    assert "--model openai/qwen2.5" in done.stderr
    assert "model=" not in done.stderr  # the CLI's words, not Python's
    assert fake_llm_server.count() == 0  # caught before any request


def test_python_model_without_provider_prefix_raises_config_error(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    llm = LLM(model="qwen2.5", api_base=fake_llm_server.base_url, api_key=SECRET)
    with pytest.raises(LLMConfigError, match="provider prefix") as caught:
        judge.evaluate(rows(3), llm=llm, progress=False)
    assert "model='openai/qwen2.5'" in str(caught.value)
    assert fake_llm_server.count() == 0


def test_cli_embedding_model_without_provider_prefix_stops_with_exit_2(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write(tmp_path / "d.jsonl", rows(2))
    args = ["--model", "openai/judge", "--embedding-model", "my-embedder"]
    done = run(
        *base_args(
            data, tmp_path, *args, "--api-base", fake_llm_server.base_url, "--api-key", SECRET
        )
    )
    assert done.returncode == 2, done.stderr
    assert "--embedding-model openai/my-embedder" in done.stderr, done.stderr
    assert fake_llm_server.count("/v1/embeddings") == 0


# 2. An api_base holding user:password@ is refused up front and never echoed.


def test_cli_api_base_with_credentials_is_refused_up_front(tmp_path, fake_llm_server):
    port = fake_llm_server.base_url.rsplit(":", 1)[1]
    url = f"http://bob:hunter2pass@127.0.0.1:{port}"
    data = write(tmp_path / "d.jsonl", rows(2))
    done = run(*base_args(data, tmp_path, "--model", "openai/judge", "--api-base", url))
    assert done.returncode == 2, done.stderr
    assert "--api-key" in done.stderr and "api_key=" not in done.stderr
    assert "hunter2pass" not in done.stderr + done.stdout
    assert fake_llm_server.count() == 0
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache.sqlite").exists()


@pytest.mark.parametrize("kind", [LLM, Embeddings])
def test_python_api_base_with_credentials_is_refused(kind):
    with pytest.raises(JudgeError, match="api_key=") as caught:
        kind(model="openai/judge", api_base="https://bob:hunter2pass@gpu1:8000/v1")
    assert "hunter2pass" not in str(caught.value) and "bob" not in str(caught.value)
    with pytest.raises(JudgeError, match="api_key="):
        kind(model="openai/judge", api_base="http://token@gpu1:8000/v1")


def test_credentials_never_reach_a_key_or_a_message(monkeypatch):
    # A server identity (cache keys) never holds them, whatever names it.
    assert server_identity("openai/x", None, "http://u:hunter2pass@gpu1/v1") == "http://gpu1/v1"
    # A base URL from the environment reaches error messages without them.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://u:hunter2pass@127.0.0.1:9/v1")
    assert "hunter2pass" not in endpoint_for("openai/x", None).url
    assert "hunter2pass" not in endpoint_for("hosted_vllm/x", "http://u:hunter2pass@h/v1").url


# 3. Placeholder model names copied from the docs.


@pytest.mark.parametrize("model", ["...", "<model>", "", "   ", "openai/...", "openai/<name>"])
@pytest.mark.parametrize("kind", [LLM, Embeddings])
def test_python_placeholder_model_names_are_refused(kind, model):
    with pytest.raises(JudgeError, match=r"placeholder|empty"):
        kind(model=model)


def test_cli_placeholder_model_is_refused(tmp_path, fake_llm_server):
    data = write(tmp_path / "d.jsonl", rows(2))
    done = run(*base_args(data, tmp_path, "--model", "...", "--api-base", fake_llm_server.base_url))
    assert done.returncode == 2, done.stderr
    assert "--model '...'" in done.stderr and "placeholder" in done.stderr
    assert fake_llm_server.count() == 0
    emb = run(
        *base_args(
            data,
            tmp_path,
            "--model",
            "openai/judge",
            "--embedding-model",
            "<model>",
            "--api-base",
            fake_llm_server.base_url,
        )
    )
    assert emb.returncode == 2 and "--embedding-model '<model>'" in emb.stderr, emb.stderr


# 4. A retrieval-only run needs no --model.


def test_cli_retrieval_only_run_needs_no_model(tmp_path):
    data = write(tmp_path / "d.jsonl", rows(3, retrieval=True))
    done = run(*base_args(data, tmp_path, "--metrics", "ndcg@10,recall@10"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["metrics"]["ndcg@10"]["mean"] == pytest.approx(0.6309, abs=1e-4)
    assert summary["config"]["model"] is None
    assert not (tmp_path / "cache.sqlite").exists()  # no judge, no cache
    # In processes too, with the same outputs.
    single = (tmp_path / "out" / "results.jsonl").read_bytes()
    args = base_args(data, tmp_path, "--metrics", "ndcg@10,recall@10", "--processes", "2")
    args[args.index("--out") + 1] = str(tmp_path / "two")
    done = run(*args)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "two" / "results.jsonl").read_bytes() == single


def test_cli_judged_metric_without_model_still_needs_it(tmp_path):
    data = write(tmp_path / "d.jsonl", rows(3, retrieval=True))
    for extra in (["--metrics", "faithfulness,ndcg@10"], []):
        done = run(*base_args(data, tmp_path, *extra))
        assert done.returncode == 2
        assert "--model is required" in done.stderr, done.stderr
    named = run(*base_args(data, tmp_path, "--metrics", "faithfulness,ndcg@10"))
    assert "faithfulness" in named.stderr


def test_python_retrieval_only_needs_no_llm():
    result = judge.evaluate(rows(3, retrieval=True), metrics=["ndcg@10"], progress=False)
    assert result.summary["ndcg@10"].mean == pytest.approx(0.6309, abs=1e-4)


# 5. A litellm route to a local server needs no key, as the openai/ route does.


@pytest.mark.parametrize("model", ["litellm_proxy/judge", "custom_openai/judge"])
def test_litellm_route_to_a_local_server_needs_no_key(fake_llm_server, monkeypatch, model):
    no_keys(monkeypatch)
    fake_llm_server.chat = heuristic_judge
    llm = LLM(model=model, api_base=fake_llm_server.base_url, max_retries=0)
    result = judge.score(
        "Who created Python?",
        "Guido van Rossum created Python.",
        ["Python was created by Guido van Rossum."],
        metrics=["faithfulness"],
        llm=llm,
    )
    assert result.errors == {} and result["faithfulness"] == 1.0
    assert fake_llm_server.count() >= 1


def test_cli_litellm_route_to_a_local_server_needs_no_key(tmp_path, fake_llm_server, monkeypatch):
    no_keys(monkeypatch)
    fake_llm_server.chat = heuristic_judge
    data = write(tmp_path / "d.jsonl", rows(2))
    done = run(
        *base_args(
            data,
            tmp_path,
            "--model",
            "litellm_proxy/judge",
            "--api-base",
            fake_llm_server.base_url,
            "--metrics",
            "faithfulness",
        )
    )
    assert done.returncode == 0, done.stderr
    assert fake_llm_server.count() >= 2


def test_litellm_route_keeps_a_given_key(fake_llm_server, monkeypatch):
    # The placeholder is only for a missing key: a key given is sent and its refusal said.
    no_keys(monkeypatch)
    fake_llm_server.chat = heuristic_judge
    from judge.testing import Fault

    fake_llm_server.fail_next(Fault.status(401))
    llm = LLM(model="litellm_proxy/judge", api_base=fake_llm_server.base_url, api_key=SECRET)
    with pytest.raises(LLMConfigError, match="refused"):
        judge.score("q?", "a.", ["c."], metrics=["faithfulness"], llm=llm)


# 6. A replay recorded through another api_base says so and names --cache-as.


def test_replay_through_another_address_suggests_cache_as(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    data = write(tmp_path / "d.jsonl", rows(2))
    recorded = fake_llm_server.base_url
    record = run(
        *base_args(
            data, tmp_path, "--model", "openai/judge", "--api-base", recorded, "--api-key", SECRET
        )
    )
    assert record.returncode == 0, record.stderr
    # The same server under another name (as a fixture replayed through a new port is).
    other = recorded.replace("127.0.0.1", "localhost")
    replay = run(
        *base_args(data, tmp_path, "--model", "openai/judge", "--api-base", other, "--replay")
    )
    assert replay.returncode != 0
    errors = [
        message
        for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()
        for message in json.loads(line)["errors"].values()
    ]
    assert errors and all("--cache-as" in e and recorded in e for e in errors), errors
    # Said once on stderr too, in flags: not only in results.jsonl.
    hints = [line for line in replay.stderr.splitlines() if "replay misses" in line]
    assert len(hints) == 1 and f"--cache-as {recorded}" in hints[0], replay.stderr
    assert "cache_as=" not in replay.stderr
    # Given that name, the replay serves every judgment.
    again = run(
        *base_args(
            data,
            tmp_path,
            "--model",
            "openai/judge",
            "--api-base",
            other,
            "--replay",
            "--cache-as",
            recorded,
        )
    )
    assert again.returncode == 0, again.stderr


def test_python_replay_miss_names_the_recorded_servers(tmp_path, fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    cache = tmp_path / "c.sqlite"
    llm = LLM(model="openai/judge", api_base=fake_llm_server.base_url, api_key=SECRET)
    judge.evaluate(rows(1), llm=llm, cache=cache, progress=False)
    moved = LLM(model="openai/judge", api_base="http://127.0.0.1:9/v1", api_key=SECRET)
    result = judge.evaluate(
        rows(1), llm=moved, cache=judge.Cache(cache, mode="replay"), progress=False
    )
    message = next(iter(next(iter(result.rows)).errors.values()))
    assert "CacheMiss" in message and f"cache_as='{fake_llm_server.base_url}'" in message
    assert [n for n in result.config["notes"] if "replay misses" in n] == [
        f"replay misses: {message.split('nothing was sent. ')[1]}"
    ]
    # A miss with nothing recorded for the model under any server says nothing of cache_as.
    unknown = LLM(model="openai/never-recorded", api_base="http://127.0.0.1:9/v1")
    result = judge.evaluate(
        rows(1), llm=unknown, cache=judge.Cache(cache, mode="replay"), progress=False
    )
    message = next(iter(next(iter(result.rows)).errors.values()))
    assert "CacheMiss" in message and "cache_as=" not in message.split("nothing was sent")[1]


# 7. answer_relevancy left out for want of an embedding model is said, not silent.


def test_cli_default_metrics_without_embeddings_say_answer_relevancy_is_skipped(
    tmp_path, fake_llm_server
):
    fake_llm_server.chat = heuristic_judge
    data = write(tmp_path / "d.jsonl", rows(2))
    args = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url]
    done = run(*base_args(data, tmp_path, *args))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("answer_relevancy") == 1 and "--embedding-model" in done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    notes = summary["config"]["notes"]
    assert len(notes) == 1 and "answer_relevancy" in notes[0]
    explicit = run(*base_args(data, tmp_path, *args, "--metrics", "answer_relevancy"))
    assert explicit.returncode == 2
    assert "--embedding-model" in explicit.stderr and "embeddings=" not in explicit.stderr


def test_python_default_metrics_without_embeddings_note_the_skip(fake_llm_server):
    fake_llm_server.chat = heuristic_judge
    llm = LLM(model="openai/judge", api_base=fake_llm_server.base_url, api_key=SECRET)
    result = judge.evaluate(rows(1), llm=llm, progress=False)
    assert "answer_relevancy" not in result.metrics
    (note,) = result.config["notes"]
    assert "answer_relevancy" in note and "embeddings=" in note
    with pytest.raises(JudgeError, match=r"embeddings=Embeddings"):
        judge.evaluate(rows(1), llm=llm, metrics=["answer_relevancy"], progress=False)
    with_embeddings = judge.evaluate(
        rows(1),
        llm=llm,
        embeddings=Embeddings(model="openai/e", api_base=fake_llm_server.base_url, api_key=SECRET),
        progress=False,
    )
    assert "answer_relevancy" in with_embeddings.metrics
    assert with_embeddings.config["notes"] == []


# 8. Errors in the caller's words.


def test_cli_errors_name_flags_and_python_errors_name_keywords(
    tmp_path, fake_llm_server, monkeypatch
):
    no_keys(monkeypatch)
    data = write(tmp_path / "d.jsonl", rows(2))
    model = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url]
    cases = [
        (["--column", "nope=question"], "--column", "column_map"),
        (["--column", "question=missing"], "--column", "column_map"),
    ]
    for extra, flag, keyword in cases:
        done = run(*base_args(data, tmp_path, *model, *extra))
        assert done.returncode == 2, done.stderr
        assert flag in done.stderr and keyword not in done.stderr, done.stderr
    no_question = write(tmp_path / "q.jsonl", [{"query_text": "q?", "answer": "a."}])
    done = run(*base_args(no_question, tmp_path, *model))
    assert done.returncode == 2
    assert "--column question=" in done.stderr and "column_map" not in done.stderr, done.stderr
    # No key for OpenAI itself: the flag, not api_key=.
    keyless = run(
        *base_args(data, tmp_path, "--model", "openai/judge", "--metrics", "faithfulness")
    )
    assert keyless.returncode == 2
    assert "--api-key" in keyless.stderr and "api_key=" not in keyless.stderr, keyless.stderr
    # Python says its keywords.
    with pytest.raises(JudgeError, match="column_map"):
        judge.evaluate(rows(1), metrics=["ndcg@10"], column_map={"nope": "question"})
    with pytest.raises(JudgeError, match=r"column_map=\{'question'"):
        judge.evaluate([{"query_text": "q?"}], llm=LLM(model="openai/x", api_base="http://h/v1"))


def test_cli_words_translates_keywords_and_leaves_the_rest():
    from judge.cli.words import cli_words

    assert (
        cli_words("answer_relevancy needs an embedding model: pass embeddings=Embeddings(...)")
        == "answer_relevancy needs an embedding model: pass --embedding-model"
    )
    assert cli_words("LLM-judged metrics need llm=judge.LLM(model=...)") == (
        "LLM-judged metrics need --model"
    )
    assert cli_words("set OPENAI_API_KEY or pass api_key= (--api-key)") == (
        "set OPENAI_API_KEY or pass --api-key"
    )
    assert cli_words("e.g. model='openai/qwen2.5' for a server") == (
        "e.g. --model openai/qwen2.5 for a server"
    )
    # User text that merely looks like a keyword is left alone.
    assert cli_words("--fail-under 'model=0.5': bad") == "--fail-under 'model=0.5': bad"


# 9. A misspelt metric gets a did-you-mean.


def test_cli_misspelt_metric_gets_a_did_you_mean(tmp_path, fake_llm_server):
    data = write(tmp_path / "d.jsonl", rows(2, retrieval=True))
    model = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url]
    done = run(*base_args(data, tmp_path, *model, "--metrics", "faithfulnes"))
    assert done.returncode == 2
    assert "unknown metric 'faithfulnes'; did you mean 'faithfulness'?" in done.stderr
    assert "valid names" not in done.stderr
    typo = run(*base_args(data, tmp_path, *model, "--metrics", "ndcg@1O"))
    assert typo.returncode == 2
    assert "did you mean 'ndcg@10'?" in typo.stderr, typo.stderr
    far = run(*base_args(data, tmp_path, *model, "--metrics", "xyzzy"))
    assert far.returncode == 2
    assert "valid names" in far.stderr and "ndcg@k" in far.stderr and "faithfulness" in far.stderr


def test_python_misspelt_metric_gets_a_did_you_mean():
    with pytest.raises(UnknownMetricError, match=r"did you mean 'context_recall'\?"):
        get_metric("context_recal")
    with pytest.raises(UnknownMetricError, match=r"did you mean 'context_ndcg@5'\?"):
        get_metric("context_ndgc@5")
    with pytest.raises(UnknownMetricError, match=r"did you mean 'ndcg@10'\?"):
        parse_measure("ndcg@1O")
    with pytest.raises(UnknownMetricError, match=r"did you mean 'recall@10'\?"):
        parse_measure("recal@10")
    with pytest.raises(UnknownMetricError, match="valid names"):
        parse_measure("xyzzy")

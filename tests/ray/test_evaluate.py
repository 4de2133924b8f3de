"""Judging on Ray in local mode (2 CPUs): `judge.ray.evaluate` and `judge eval --ray` equal a
plain run row for row, and a rerun is answered by the actors' caches."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from judge.cache.store import Cache
from judge.cli.main import main
from judge.errors import InputFormatError
from judge.llm.config import LLM, Embeddings
from judge.run.evaluate import evaluate
from judge.testing import heuristic_judge
from tests.helpers.shards import eval_args, report_without_timing, rows, write_data

ray = pytest.importorskip("ray", reason="ray is not installed: pip install -e '.[ray]'")
pytest.importorskip("ray.data", reason="ray[data] is not installed: pip install -e '.[ray]'")

import judge.ray  # noqa: E402 (only once ray is known to be importable)


def without_usage(out: Path) -> list[dict]:
    """The rows of results.jsonl without their usage (a rerun's requests are cache hits)."""
    lines = (out / "results.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "usage"} for line in lines]


def cli(*args: object) -> int:
    return main([str(a) for a in args])


def test_ray_eval_equals_the_plain_run_and_reruns_from_the_actors_caches(
    tmp_path, fake_llm_server, local_ray, capsys
):
    fake_llm_server.chat = heuristic_judge
    data = write_data(tmp_path / "d.jsonl", 11)
    url = fake_llm_server.base_url
    emb = ("--embedding-model", "openai/emb")
    assert cli(*eval_args(data, url, tmp_path / "plain.sqlite", tmp_path / "plain", *emb)) == 0
    plain_requests = fake_llm_server.count()
    fake_llm_server.reset()

    cache = tmp_path / "ray" / "cache.sqlite"
    args = eval_args(data, url, cache, tmp_path / "on-ray", *emb, "--ray")
    assert cli(*args, "--ray-actors", 2) == 0
    # The same requests, spread over the actors (no two rows here share a request).
    assert fake_llm_server.count() == plain_requests
    plain, on_ray = tmp_path / "plain", tmp_path / "on-ray"
    assert (on_ray / "results.jsonl").read_bytes() == (plain / "results.jsonl").read_bytes()
    a = json.loads((plain / "summary.json").read_text())
    b = json.loads((on_ray / "summary.json").read_text())
    assert b["metrics"] == a["metrics"] and b["rows"] == a["rows"] == 11
    assert b["rows_with_errors"] == a["rows_with_errors"] == 1
    assert b["judge_errors"] == a["judge_errors"] and b["diagnosis"] == a["diagnosis"]
    assert b["metrics"]["faithfulness"]["ci_low"] < b["metrics"]["faithfulness"]["ci_high"]
    assert b["usage"] == a["usage"] and a["usage"]["requests"] == plain_requests
    same = ("metrics", "model", "embeddings", "prompts", "columns", "data", "run")
    assert {k: b["config"][k] for k in same} == {k: a["config"][k] for k in same}
    assert b["config"]["ray"] == {"address": "local", "actors": 2}
    report_a = report_without_timing((plain / "report.html").read_text())
    report_b = report_without_timing((on_ray / "report.html").read_text())
    # The config shown in the report differs only where summary.json's does.
    report_b = report_b.replace("&quot;structured_output&quot;: null", "STRUCTURED", 1)
    report_a = re.sub(r"&quot;structured_output&quot;: &quot;\w+&quot;", "STRUCTURED", report_a)
    report_b = re.sub(r"SECONDS,\s*&quot;ray&quot;: \{[^}]*\}", "SECONDS", report_b)
    assert report_b == report_a
    assert sorted(p.name for p in on_ray.iterdir()) == [
        ".judge.lock",  # the folder's lock, kept: see judge.run.output_folder
        "report.html",
        "results.jsonl",
        "summary.json",
    ]

    # Each actor wrote its own cache file beside --cache; together they hold every
    # judgment the plain run cached, and `judge cache merge` joins them.
    files = sorted((tmp_path / "ray" / "cache.ray").glob("actor-*.sqlite"))
    assert 1 <= len(files) <= 2
    assert not cache.exists()  # the --cache file itself is only read
    assert cli("cache", "merge", *files, "-o", tmp_path / "merged.sqlite") == 0
    with Cache(tmp_path / "merged.sqlite") as merged, Cache(tmp_path / "plain.sqlite") as orig:
        assert {e.key for e in merged.entries()} == {e.key for e in orig.entries()}

    # A rerun (even in replay mode) is answered by the actors' caches alone.
    fake_llm_server.reset()
    again = eval_args(data, url, cache, tmp_path / "again", *emb, "--ray", "--replay")
    assert cli(*again) == 0
    assert fake_llm_server.count() == 0
    assert without_usage(tmp_path / "again") == without_usage(plain)
    c = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert c["metrics"] == a["metrics"] and c["usage"]["requests"] == 0
    replayed = eval_args(data, url, tmp_path / "plain.sqlite", tmp_path / "replayed", *emb)
    assert cli(*replayed, "--replay") == 0
    assert c["usage"] == json.loads((tmp_path / "replayed" / "summary.json").read_text())["usage"]
    assert sorted((tmp_path / "ray" / "cache.ray").glob("actor-*.sqlite")) == files


def test_ray_dataset_evaluate_gives_the_plain_rows(tmp_path, fake_llm_server, local_ray):
    fake_llm_server.chat = heuristic_judge
    url = fake_llm_server.base_url
    data = [r for r in rows(9) if "question" in r]  # Arrow needs one type per column
    llm = LLM("openai/judge", api_base=url, api_key="k")
    emb = Embeddings("openai/emb", api_base=url, api_key="k")
    plain = evaluate(data, llm=llm, embeddings=emb, progress=False)
    plain_requests = fake_llm_server.count()
    fake_llm_server.reset()

    numbered = [{**r, "n": i} for i, r in enumerate(data)]  # an index column, kept
    dataset = ray.data.from_items(numbered, override_num_blocks=3)
    caches = tmp_path / "caches"
    out = judge.ray.evaluate(
        dataset, llm=llm, embeddings=emb, cache_dir=caches, concurrency=2, row_column="n"
    )
    got = sorted(out.take_all(), key=lambda r: r["row"])
    assert fake_llm_server.count() == plain_requests
    assert [(r["row"], r["n"]) for r in got] == [(i, i) for i in range(len(data))]
    assert [r["id"] for r in got] == [r["id"] for r in data]  # the input columns stay
    for mine, theirs in zip(got, plain.rows, strict=True):
        assert json.loads(mine["result"]) == theirs.to_json()
        assert json.loads(mine["evidence"]) == theirs.to_json()["evidence"]
        for metric in plain.metrics:
            score = theirs.scores[metric]
            assert mine[metric] == score or (math.isnan(mine[metric]) and math.isnan(score))
            assert mine[f"{metric}_reason"] == theirs.reasons.get(metric)
    assert "no_contexts" in {r["context_precision_reason"] for r in got}

    # Without an index column the rows get Ray's unique ids; a rerun is served by the
    # caches the actors wrote (one actor now, reading both files).
    fake_llm_server.reset()
    again = judge.ray.evaluate(
        ray.data.from_items(data), llm=llm, embeddings=emb, cache_dir=caches, concurrency=1
    ).take_all()
    assert fake_llm_server.count() == 0
    assert len({r["row"] for r in again}) == len(data)
    by_id = {r["id"]: json.loads(r["result"]) for r in again}
    for theirs in plain.rows:
        mine = by_id[theirs.id]
        assert mine["usage"]["total"]["requests"] == 0
        del mine["row"], mine["usage"]
        assert mine == {k: v for k, v in theirs.to_json().items() if k not in ("row", "usage")}


def test_ray_refuses_options_that_cannot_apply(tmp_path, capsys):
    data = write_data(tmp_path / "d.jsonl", 2)
    code = cli("eval", data, "--model", "openai/m", "--ray", "--shard", "1/2", "--out", tmp_path)
    assert code == 2
    assert "--shard cannot be used with --ray" in capsys.readouterr().err


def test_a_dataset_column_the_results_would_overwrite_is_refused(local_ray):
    dataset = ray.data.from_items([{"question": "q?", "answer": "a", "evidence": "x"}])
    with pytest.raises(InputFormatError, match="evidence"):
        judge.ray.evaluate(dataset, llm=LLM("openai/judge", api_key="k"))


def test_missing_ray_is_a_clear_usage_error(tmp_path):
    # A child process where `import ray` fails, as without the extra.
    import subprocess
    import sys

    data = write_data(tmp_path / "d.jsonl", 2)
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from judge.cli.main import main\n"
        f"sys.exit(main(['eval', {str(data)!r}, '--model', 'openai/m', '--ray', '--out', "
        f"{str(tmp_path / 'o')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "install judge[ray]" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o").exists()


def test_ray_package_does_not_shadow_ray():
    # `import ray` is the installed Ray, not judge's own `judge.ray`. Folders are compared,
    # not names in the path: a clone's folder is named `judge` (what `git clone` makes).
    real = Path(ray.__file__).resolve().parent
    ours = Path(judge.ray.__file__).resolve()
    assert real.name == "ray" and hasattr(ray, "remote") and ray is not judge.ray
    assert real != ours.parent and real not in ours.parents and ours.parent not in real.parents


def test_a_configuration_error_in_an_actor_stops_the_run_with_its_message(
    tmp_path, local_ray, capsys
):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = write_data(tmp_path / "d.jsonl", 2)
    args = eval_args(data, f"http://127.0.0.1:{port}/v1", tmp_path / "c.sqlite", tmp_path / "o")
    assert cli(*args, "--ray", "--ray-actors", 1, "--metrics", "faithfulness") == 2
    err = capsys.readouterr().err
    assert "judge: error:" in err and str(port) in err and "Traceback" not in err
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_an_address_where_no_cluster_listens_is_refused_at_once(tmp_path, capsys):
    data = write_data(tmp_path / "d.jsonl", 2)
    args = ["eval", data, "--model", "openai/m", "--out", tmp_path / "o"]
    for address in ("127.0.0.1:1", "nohost"):
        assert cli(*args, "--ray-address", address) == 2
        err = capsys.readouterr().err
        assert f"no Ray cluster answers at --ray-address {address}" in err, err
        assert "ray start --head" in err


def test_custom_metrics_replayed_on_ray_from_the_plain_cache(tmp_path, local_ray):
    # Metrics from --metrics-module files travel to the actors; --replay is answered by
    # the --cache file itself (read beside the actors' own files), with no server at all.
    from judge.testing import FIXTURE_SERVER

    examples = Path(__file__).resolve().parents[2] / "examples"
    Cache(tmp_path / "c.sqlite").import_jsonl(examples / "judgments.jsonl")
    common = [
        "eval",
        examples / "data.jsonl",
        "--model",
        "openai/judge-fixture",
        "--replay",
        "--cache-as",
        FIXTURE_SERVER,
        "--cache",
        tmp_path / "c.sqlite",
        "--metrics-module",
        examples / "domain_accuracy.py",
        "--metrics-module",
        examples / "rubric.py",
        "--metrics",
        "domain_accuracy,support_tone",
        "--no-progress",
    ]
    assert cli(*common, "--out", tmp_path / "plain") == 0
    assert cli(*common, "--out", tmp_path / "on-ray", "--ray", "--ray-actors", 1) == 0
    plain = (tmp_path / "plain" / "results.jsonl").read_bytes()
    assert (tmp_path / "on-ray" / "results.jsonl").read_bytes() == plain
    assert b'"support_tone": 0.25' in plain  # password-1, as recorded

"""`judge monitor --ray`: each batch of sampled rows judged by judge eval's Ray executor
(`judge.ray.file_eval.evaluate_on_ray`) gives the scores, evidence and state that judging
in the monitor's own process gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge.llm.config import LLM
from judge.monitor.monitor import Monitor, MonitorConfig
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer, heuristic_judge
from tests.helpers.cli import run
from tests.helpers.monitor import PER_ROW, free_port, judge_flags, rag_traces, traces_file

pytest.importorskip("ray.data", reason="ray[data] is not installed: pip install -e '.[ray]'")


def judged(state: Path) -> list[tuple[Any, ...]]:
    """Each judged trace's id, scores, evidence, window and status, in trace id order."""
    db = MonitorState(state)
    try:
        return db.read(
            "SELECT trace_id, status, scores, evidence, window FROM traces ORDER BY trace_id"
        )
    finally:
        db.close()


def test_ray_judges_a_batch_as_the_monitor_s_own_process_does(
    tmp_path: Path, local_ray: Any
) -> None:
    otel = tmp_path / "otel"
    otel.mkdir()
    # faithfulness falls from 1 to 0 at trace 30: the drop test alerts (as in tests/monitor)
    traces_file(otel / "traces.json", lambda p: rag_traces(p, 60, bad_from=30))
    reports = {}
    with FakeLLMServer(heuristic_judge) as server:
        llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
        for name, options in (("here", {}), ("ray", {"ray": True, "ray_actors": 2})):
            folder = tmp_path / name
            monitor = Monitor(
                MonitorConfig(
                    state=folder / "state",
                    llm=llm,
                    metrics=["faithfulness"],
                    cache=str(folder / "cache.sqlite"),
                    window="10",
                    baseline_windows=1,
                    batch=32,  # two batches
                    progress=False,
                    **options,
                )
            )
            before = server.count()
            try:
                reports[name] = monitor.once(otel)
            finally:
                monitor.close()
            assert server.count() - before == 60 * PER_ROW  # each its own cache: asked again
            assert not list((folder / "state").glob(".judging-*"))  # the batches' files removed
        # The actors' own cache files, beside the cache as judge eval --ray keeps them.
        assert list((tmp_path / "ray" / "cache.ray").glob("actor-*.sqlite"))
        assert not (tmp_path / "here" / "cache.ray").exists()
        here, on_ray = judged(tmp_path / "here" / "state"), judged(tmp_path / "ray" / "state")
        assert len(on_ray) == 60 and on_ray == here
        assert {json.loads(scores)["faithfulness"] for _, _, scores, _, _ in on_ray} == {0, 1}
        assert reports["ray"].counts == reports["here"].counts
        assert reports["ray"].counts["judge_requests"] == 60 * PER_ROW
        assert reports["ray"].windows == reports["here"].windows
        # Equal but for their ids, which name each state (its own random id).
        alerts = {n: [{**a, "id": None} for a in reports[n].alerts] for n in reports}
        assert alerts["ray"] and alerts["ray"] == alerts["here"]
        assert reports["ray"].alerts[0]["worst"][0]["evidence"]  # the judge's claims, verdicts
        # A rerun judges nothing again: the state knows what was judged.
        monitor = Monitor(
            MonitorConfig(
                state=tmp_path / "ray" / "state",
                llm=llm,
                metrics=["faithfulness"],
                cache=str(tmp_path / "ray" / "cache.sqlite"),
                window="10",
                baseline_windows=1,
                progress=False,
                ray=True,
            )
        )
        before = server.count()
        try:
            monitor.once(otel)
        finally:
            monitor.close()
        assert server.count() == before
        assert judged(tmp_path / "ray" / "state") == on_ray


def test_ray_with_processes_is_refused_in_each_front_end_s_words(tmp_path: Path) -> None:
    with pytest.raises(Exception, match=r"processes=2 with ray=True: Ray has its own actors"):
        MonitorConfig(state=tmp_path / "state", processes=2, ray_address="127.0.0.1:1")
    args = ["monitor", "--once", "--state", tmp_path / "state", "--metrics", "recall@10"]
    done = run(*args, "--ray", "--processes", "2")
    assert done.returncode == 2
    assert "--processes 2 cannot be used with --ray: Ray has its own actors" in done.stderr
    assert "ray=" not in done.stderr
    done = run(*args, "--ray-address", "127.0.0.1:6379", "--processes", "3")
    assert done.returncode == 2 and "--processes 3 cannot be used with --ray" in done.stderr
    done = run(*args, "--ray", "--ray-actors", "0")
    assert done.returncode == 2 and "--ray-actors 0: give 1 or more" in done.stderr
    assert not (tmp_path / "state").exists()


def test_a_ray_address_where_nothing_answers_is_refused_before_any_trace(
    tmp_path: Path,
) -> None:
    otel = tmp_path / "otel"
    otel.mkdir()
    traces_file(otel / "traces.json", lambda p: rag_traces(p, 2))
    with FakeLLMServer(heuristic_judge) as server:
        address = f"127.0.0.1:{free_port()}"
        args = ["monitor", "--once", "--watch", otel, "--state", tmp_path / "state"]
        done = run(*args, *judge_flags(server, tmp_path), "--ray-address", address)
        assert done.returncode == 2, done.stderr
        assert f"no Ray cluster answers at --ray-address {address}" in done.stderr
        assert "Traceback" not in done.stderr
        assert server.count() == 0


def test_the_command_line_judges_on_a_local_ray(tmp_path: Path) -> None:
    """`judge monitor --once --ray`: a local Ray started by the command; the same state as
    without --ray."""
    otel = tmp_path / "otel"
    otel.mkdir()
    traces_file(otel / "traces.json", lambda p: rag_traces(p, 4, bad_from=2))
    with FakeLLMServer(heuristic_judge) as server:
        for name, flags in (("here", []), ("ray", ["--ray", "--ray-actors", "1"])):
            folder = tmp_path / name
            args = ["monitor", "--once", "--watch", otel, "--state", folder / "state"]
            done = run(*args, *judge_flags(server, folder), "--window", "4", "--quiet", *flags)
            assert done.returncode == 0, done.stderr
            assert "4 traces judged" in done.stdout
        assert server.count() == 2 * 4 * PER_ROW
    assert judged(tmp_path / "ray" / "state") == judged(tmp_path / "here" / "state")
    assert list((tmp_path / "ray" / "cache.ray").glob("actor-*.sqlite"))

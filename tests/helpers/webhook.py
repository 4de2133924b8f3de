"""What the monitor's and the webhook's tests share: a monitor judging faithfulness on the
fake server, the traces of a drop, and the state's outbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from judge.llm.config import LLM
from judge.monitor.monitor import MonitorConfig
from judge.monitor.state import MonitorState
from judge.testing import FakeLLMServer
from tests.helpers.monitor import rag_traces, traces_file


def dropping_traces(folder: Path) -> None:
    """60 traces whose faithfulness falls from 1 to 0 at trace 30: an alert in windows of 10
    with one baseline window (as in test_monitor)."""
    folder.mkdir()
    traces_file(folder / "t.json", lambda p: rag_traces(p, 60, bad_from=30))


def config(tmp: Path, server: FakeLLMServer, **options: Any) -> MonitorConfig:
    """A monitor judging faithfulness on the fake server, its state and cache under `tmp`."""
    llm = LLM(model="openai/fake-model", api_base=server.base_url, api_key="x")
    return MonitorConfig(
        state=tmp / "state",
        llm=llm,
        metrics=["faithfulness"],
        cache=str(tmp / "cache.sqlite"),
        progress=False,
        **options,
    )


def outbox(state: Path) -> list[tuple[Any, ...]]:
    db = MonitorState(state)
    try:
        return db.read("SELECT alert, status, attempts FROM outbox ORDER BY alert")
    finally:
        db.close()

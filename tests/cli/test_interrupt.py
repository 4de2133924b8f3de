"""Ctrl-C during `judge ir`: one message and exit 130, however many times it is pressed."""

from __future__ import annotations

import importlib
import os
import signal
from pathlib import Path

import pytest

import judge.ir.run_stream as run_stream
import judge.ir.small as small

# (judge.cli's `main`, the function, hides the module of the same name from `import ... as`.)
cli_main = importlib.import_module("judge.cli.main")


def _press_ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)


def test_a_second_ctrl_c_while_judge_stops_is_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("q1 0 d1 1\n")
    run.write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    monkeypatch.setattr(small, "SMALL_BYTES", 0)  # the path of big files, chunk by chunk
    # The first Ctrl-C lands in the main thread while the run's chunks are parsed...
    monkeypatch.setattr(run_stream._Stream, "add", lambda *args, **kwargs: _press_ctrl_c())
    # ...the second while judge reports the first (the user pressed it again).
    stop = cli_main.quiet_after_stop
    monkeypatch.setattr(cli_main, "quiet_after_stop", lambda: (_press_ctrl_c(), stop())[1])
    before = signal.getsignal(signal.SIGINT)

    try:
        code = cli_main.main(["ir", str(qrels), str(run)])
    except KeyboardInterrupt:  # (caught, or it would stop the whole test session)
        pytest.fail("the second Ctrl-C escaped judge's main as a KeyboardInterrupt")
    assert code == cli_main.EXIT_INTERRUPTED

    assert capsys.readouterr().err == "judge: interrupted\n"
    assert signal.getsignal(signal.SIGINT) is before  # Ctrl-C is the caller's again

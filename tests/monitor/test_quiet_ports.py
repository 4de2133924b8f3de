"""`--quiet` with ports the system chooses (`--listen 127.0.0.1:0`, `--metrics-port 0`): the
one line that names each is still said on stderr, so a script can read the port and use it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.monitor import free_port, wait_for


def test_quiet_still_says_the_ports_the_system_chose(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "judge", "monitor", "--listen", "127.0.0.1:0"]
    command += ["--metrics-port", "0", "--state", str(tmp_path / "state")]
    command += ["--metrics", "recall@10", "--quiet"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    lines: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        lines.extend(iter(process.stderr.readline, ""))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(lines) >= 2 or process.poll() is not None)
        text = "".join(lines)
        listening = re.search(r"monitor listening on (http://127\.0\.0\.1:(\d+))/v1/traces", text)
        metrics = re.search(r"metrics on (http://127\.0\.0\.1:(\d+)/metrics)", text)
        assert listening and metrics, text
        assert int(listening[2]) > 0 and int(metrics[2]) > 0
        with urllib.request.urlopen(f"{listening[1]}/healthz", timeout=10) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(metrics[1], timeout=10) as answer:
            families = {f.name for f in text_string_to_metric_families(answer.read().decode())}
        assert "judge_monitor_traces_received" in families
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
        reader.join(10)
    assert process.returncode == 143
    said = [line for line in lines if not line.startswith("judge: stopped")]
    assert len(said) == 2, lines  # nothing else: quiet


def test_quiet_with_a_port_given_says_nothing_of_it(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "judge", "monitor", "--listen", f"127.0.0.1:{port}"]
    command += ["--state", str(tmp_path / "state"), "--metrics", "recall@10", "--quiet"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ)
    )

    def up() -> bool:
        assert process.poll() is None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5):
                return True
        except OSError:
            return False

    try:
        wait_for(up)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert "listening" not in err

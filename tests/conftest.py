"""Shared fixtures: the fake OpenAI-compatible server of judge.testing, models that judge
through it, and a run store of each test's own."""

import pytest

from judge import LLM, Embeddings
from judge.testing import FakeLLMServer, fake_llm_server  # noqa: F401  (a pytest fixture)
from tests.helpers.experiments import check_experiment_folders
from tests.helpers.judging import judge_handler


@pytest.fixture
def models(fake_llm_server: FakeLLMServer) -> dict:  # noqa: F811  (the fixture above)
    """A judge model and an embedding model at the fake server, which answers with
    judge_handler (the heuristic judge); a module may define its own `models`."""
    fake_llm_server.chat = judge_handler
    base = fake_llm_server.base_url
    return {
        "llm": LLM("openai/judge-model", api_base=base, api_key="k", max_retries=1),
        "embeddings": Embeddings("openai/embed-model", api_base=base, api_key="k"),
    }


@pytest.fixture(autouse=True)
def run_store(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Every test's runs recorded in a store of its own (JUDGE_RUNS, which subprocesses
    inherit), never in the repository's .judge/runs.sqlite; yields its path."""
    path = tmp_path_factory.mktemp("runs") / "runs.sqlite"
    monkeypatch.setenv("JUDGE_RUNS", str(path))
    return path


@pytest.fixture(autouse=True)
def experiment_folders_agree_with_judge_ir(request: pytest.FixtureRequest):
    """After every test with a `tmp_path` (or a `pytester`): each experiment folder it
    left there reports the retrieval metrics `judge ir` computes on the folder's qrels.txt
    and run.trec (tests/helpers/experiments.py)."""
    # Taken before the test runs, so that they are torn down after this fixture.
    roots = [request.getfixturevalue("tmp_path")] if "tmp_path" in request.fixturenames else []
    if "pytester" in request.fixturenames:
        roots.append(request.getfixturevalue("pytester").path)
    yield
    for root in roots:
        check_experiment_folders(root)


@pytest.fixture(autouse=True)
def signal_handlers_kept():
    """A test leaves SIGINT and SIGTERM as it found them, in Python and in the kernel (the
    signals this thread ignores and blocks), and every test starts with those the first one
    saw: a process started later inherits an ignored or blocked signal, and the Ctrl-C tests
    of a judge process would wait out their timeouts. (A suite started as a background job
    of a shell without job control, `cmd &` in a script, ignores SIGINT and SIGQUIT from its
    start: those tests fail there, rightly; run it in the foreground.)"""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    kernel = _kernel_signals()
    first = _FIRST_KERNEL_SIGNALS.setdefault("state", kernel)
    assert kernel == first, f"before this test (an import or a fixture): {kernel}, was {first}"
    yield
    after = {s: signal.getsignal(s) for s in before}
    for signum, handler in before.items():
        signal.signal(signum, handler)
    assert after == before, f"the test left the signal handlers changed: {after} (was {before})"
    assert _kernel_signals() == kernel, f"the test left {_kernel_signals()} (was {kernel})"


_FIRST_KERNEL_SIGNALS: dict[str, dict[str, str]] = {}


def _kernel_signals() -> dict[str, str]:
    """This thread's ignored and blocked signal masks, as the kernel reports them."""
    import threading
    from pathlib import Path

    try:
        text = Path(f"/proc/self/task/{threading.get_native_id()}/status").read_text()
    except OSError:  # not Linux
        return {}
    return {
        line.split(":")[0]: line.split()[1]
        for line in text.splitlines()
        if line.startswith(("SigIgn:", "SigBlk:"))
    }

"""What does a replayed assertion cost in pytest beyond the cached judgment itself?
(target, issue 28: under 5 ms)

N samples are judged once through the fake server (faithfulness and context_precision:
three judge requests each) into a cache. Then, with nothing sent:

- cached judgment: `score_sample` on an `LLMSession` over that cache in replay mode, in a
  plain loop (what any replay pays);
- plugin: a pytest run with `--judge-replay` of N parametrised tests, each
  `rag_judge.score(...)` then `judge.assert_scores(...)`, timed inside the test (the
  plugin's loop hop, listener, JUnit properties and the assertion included);
- per test: the whole pytest session's wall time per test, against the same N tests
  that only build the sample (pytest's own cost per test, which a judged test pays too).

    python -m bench.speed.pytest_overhead [--samples 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judge.testing import FakeLLMServer, heuristic_judge

TESTS = """
import json, os, time
import pytest
import judge

N = int(os.environ["BENCH_SAMPLES"])
TIMES = os.environ.get("BENCH_TIMES")


def sample(n):
    contexts = [f"Tower {n} is tall and old.", "Rivers."]
    return (f"What is tower {n}?", f"Tower {n} is tall.", contexts)


@pytest.mark.parametrize("n", range(N))
def test_judged(rag_judge, n):
    started = time.perf_counter()
    result = rag_judge.score(*sample(n), metrics=["faithfulness", "context_precision"])
    judge.assert_scores(result, faithfulness=0.5)
    if TIMES:
        with open(TIMES, "a") as out:
            out.write(f"{time.perf_counter() - started}\\n")


@pytest.mark.parametrize("n", range(N))
def test_plain(n):
    assert sample(n)[0]
"""


def pytest_run(folder: Path, args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(done.stdout[-3000:] + done.stderr[-2000:])
    return time.perf_counter() - started


def cached_judgments(cache: Path, base_url: str, n: int) -> list[float]:
    """Seconds per sample of score_sample over the cache in replay mode."""
    from judge.cache.store import Cache
    from judge.llm.config import LLM
    from judge.llm.session import LLMSession
    from judge.metrics.resolve import resolve_metrics
    from judge.run.score import score_sample
    from judge.samples import Sample

    async def go() -> list[float]:
        session = LLMSession(
            LLM("openai/bench-judge", api_base=base_url), cache=Cache(cache, mode="replay")
        )
        metrics = resolve_metrics(["faithfulness", "context_precision"], embeddings=False)
        times = []
        for i in range(n):
            sample = Sample.create(
                f"What is tower {i}?",
                f"Tower {i} is tall.",
                [f"Tower {i} is tall and old.", "Rivers."],
            )
            started = time.perf_counter()
            result = await score_sample(sample, metrics, session)
            times.append(time.perf_counter() - started)
            assert not result.errors, result.errors
        await session.aclose()
        return times

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    n = parser.parse_args().samples
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(chat=heuristic_judge) as server:
        folder = Path(tmp)
        (folder / "test_bench.py").write_text(TESTS)
        cache = folder / "cache.sqlite"
        env = {**os.environ, "BENCH_SAMPLES": str(n), "OPENAI_API_KEY": "bench"}
        model = ["--judge-model", "openai/bench-judge", "--judge-api-base", server.base_url]
        model += ["--judge-cache", str(cache)]
        pytest_run(folder, [*model, "-k", "judged"], env)  # record
        times = folder / "times.txt"
        judged = pytest_run(
            folder, [*model, "--judge-replay", "-k", "judged"], {**env, "BENCH_TIMES": str(times)}
        )
        plain = pytest_run(folder, ["-k", "plain"], env)
        in_test = [float(t) for t in times.read_text().split()]
        direct = cached_judgments(cache, server.base_url, n)
    median_test, median_direct = statistics.median(in_test), statistics.median(direct)
    figures = {
        "samples": n,
        "cached_judgment_ms": round(median_direct * 1000, 3),
        "plugin_score_and_assert_ms": round(median_test * 1000, 3),
        "overhead_in_test_ms": round((median_test - median_direct) * 1000, 3),
        "session_per_judged_test_ms": round(judged / n * 1000, 3),
        "session_per_plain_test_ms": round(plain / n * 1000, 3),
        "overhead_per_test_ms": round((judged - plain) / n * 1000 - median_direct * 1000, 3),
    }
    print(json.dumps(figures, indent=2))
    print(
        f"a replayed assertion costs {figures['overhead_in_test_ms']} ms beyond the cached "
        f"judgment inside the test (median), {figures['overhead_per_test_ms']} ms per test "
        "over the whole session (startup shared out); target under 5 ms"
    )


if __name__ == "__main__":
    main()

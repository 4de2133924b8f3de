"""`import judge` and `judge ir` must not load litellm (seconds and ~200 MB) or datasets."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "examples"

CHECK = """
import sys, runpy
sys.argv = ["judge", "ir", {qrels!r}, {run!r}, "-m", "map"]
try:
    runpy.run_module("judge", run_name="__main__")
except SystemExit as exc:
    assert exc.code == 0, exc.code
heavy = sorted(m for m in ("litellm", "openai", "datasets", "pandas", "ray") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_judge_ir_loads_no_llm_or_dataset_library():
    code = CHECK.format(qrels=str(DEMO / "qrels.txt"), run=str(DEMO / "run_dense.txt"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "none"


SMALL_CHECK = """
import sys, runpy
sys.argv = ["judge", "ir", {qrels!r}, {run!r}, "-m", "map,ndcg@10"]
try:
    runpy.run_module("judge", run_name="__main__")
except SystemExit as exc:
    assert exc.code == 0, exc.code
print(sorted(m for m in ("numpy", "pyarrow", "judge.cli.eval") if m in sys.modules))
"""


def test_judge_ir_on_small_files_imports_only_what_it_needs():
    # numpy and pyarrow were most of its start-up time; the other commands' modules too.
    code = SMALL_CHECK.format(qrels=str(DEMO / "qrels.txt"), run=str(DEMO / "run_dense.txt"))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_import_judge_loads_no_llm_library():
    code = "import sys, judge, judge.ir, judge.cli; print('litellm' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr


RAY_CHECK = """
import sys, runpy
import judge
from judge.cli.main import build_parser
build_parser()  # every command's options, --ray among them
sys.argv = ["judge", {args}]
try:
    runpy.run_module("judge", run_name="__main__")
except SystemExit:
    pass
print("ray" in sys.modules)
"""


def test_import_judge_and_help_load_no_ray():
    # ray is an optional extra (judge[ray]): only `judge eval --ray` and judge.ray load it.
    for args in ('"--help"', '"eval", "--help"'):
        code = RAY_CHECK.format(args=args)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert "--ray" in result.stdout or args == '"--help"', result.stdout
        assert result.stdout.strip().splitlines()[-1] == "False", (args, result.stderr)


BLAS_CHECK = """
import os, sys, runpy
sys.argv = ["judge", "ir", {qrels!r}, {run!r}, "-m", "map"]
try:
    runpy.run_module("judge", run_name="__main__")
except SystemExit as exc:
    assert exc.code == 0, exc.code
from threadpoolctl import threadpool_info
print(os.environ.get("OPENBLAS_NUM_THREADS"), [
    pool["num_threads"] for pool in threadpool_info() if pool["internal_api"] == "openblas"
])
"""


def big_files(folder: Path) -> tuple[Path, Path]:
    """A qrels and a run file over judge ir's small-file size (1 MiB): read with numpy."""
    run = [f"q{q} Q0 d{d} {d + 1} {1000 - d} tag" for q in range(50) for d in range(1000)]
    (folder / "run").write_text("\n".join(run) + "\n")
    (folder / "qrels").write_text("".join(f"q{q} 0 d{q} 1\n" for q in range(50)))
    assert (folder / "run").stat().st_size > 1 << 20
    return folder / "qrels", folder / "run"


def test_judge_ir_on_big_files_asks_openblas_for_one_thread(tmp_path: Path) -> None:
    # OpenBLAS starts a thread per core at numpy's import (CPU time judge ir, which does
    # no linear algebra, need not spend); a caller's own setting is kept.
    qrels, run = big_files(tmp_path)
    code = BLAS_CHECK.format(qrels=str(qrels), run=str(run))
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    # (Set for numpy's import only: not passed on to processes started later.)
    assert result.stdout.splitlines()[-1] == "None [1]"
    env["OPENBLAS_NUM_THREADS"] = "2"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].split()[0] == "2"

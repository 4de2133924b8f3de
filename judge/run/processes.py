"""The processes executor (`judge eval --processes N`): a plan judged on N cores, as N
shards of it, each in a fresh process of its own.

Each shard is the plan with its `Shard`, executed by `judge.run.local` in its own process
and written as a shard's folder (results.jsonl, summary.json, shard.json) under
OUT/.shards/I-of-N, all of them sharing the cache file; the caller then joins them as
`judge merge` does, so results.jsonl, summary.json and report.html are those of an
unsharded run (`config.seconds` is the shards' summed time). A child receives the plan,
never re-plans: it reads only its own rows of the same input (`judge.run.inputs`: by
position, a JSON-lines file's other lines counted but not parsed), after checking that the
input is the one the plan was made from (a file's inode, size, modification and change
times, a dataset's fingerprint): the parent hashed every row into the plan's `data_sha256` before
the shards started, so no shard reads the rows of another. Each shard keeps its
checkpoint until the join has succeeded, so a stopped run resumes every shard where it was.

The shards die with their parent, however it ends (SIGTERM from `timeout` or a CI cancel,
SIGKILL from the OOM killer): left running, they would go on sending paid requests and
writing into OUT/.shards beside a rerun of the same command. On Linux the kernel kills
them (PR_SET_PDEATHSIG); everywhere, each also watches a pipe from its parent and exits
when the pipe closes, which it does when the parent dies.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from judge.aio import run_sync
from judge.errors import InputFormatError, JudgeError
from judge.run.folder import RESULTS, RunFolder
from judge.run.plan import RunPlan

if TYPE_CHECKING:
    from judge.llm.config import LLM, Embeddings
    from judge.metrics.resolve import MetricLike
    from judge.run.gates import Gates
    from judge.run.inputs import InputRows
    from judge.run.options import RunSpec
    from judge.run.results import EvaluationResult
from judge.run.progress import DEFAULT_INTERVAL
from judge.run.shard import Shard
from judge.signals import Terminated, raise_on_sigterm

SHARDS_DIR = ".shards"


@dataclass(frozen=True)
class ShardJob:
    """One shard's work, sent to its process.

    Attributes:
        plan: the run's plan, with this shard (and the data hash).
        data: the input file the plan was made from.
        identity: the input's identity when the plan was made (`Records.identity`).
        column_map: the column mapping the plan's columns were resolved with.
        out: the shard's folder.
        cache: the cache file every shard shares, or None.
        cache_mode: the cache's mode ("read-write", "replay", ...).
        progress: whether this shard shows progress (the first one alone does).
        progress_interval: seconds between status lines when stderr is not a terminal.
    """

    plan: RunPlan
    data: str
    column_map: Mapping[str, str] | None
    out: Path
    cache: str | None = None
    cache_mode: str = "read-write"
    progress: bool = False
    progress_interval: float = DEFAULT_INTERVAL
    identity: str | None = None

    @property
    def label(self) -> str:
        """The shard as the user writes it: I/N."""
        shard = self.plan.shard
        return f"{shard.index}/{shard.count}" if shard else "1/1"


def shard_jobs(
    plan: RunPlan,
    data: str | os.PathLike[str],
    out: Path,
    count: int,
    *,
    column_map: Mapping[str, str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    cache_mode: str = "read-write",
    progress: bool = True,
    progress_interval: float = DEFAULT_INTERVAL,
    identity: str | None = None,
    unit: str = "row",
) -> list[ShardJob]:
    """The plan split into `count` shards written under out/.shards, progress from the
    first alone; `identity` is the input's when the plan was made (the shards check it),
    `unit` what the shards split on (`judge.run.shard.Shard.unit`)."""
    return [
        ShardJob(
            dataclasses.replace(plan, shard=Shard(i, count, unit)),
            str(data),
            dict(column_map) if column_map else None,
            out / SHARDS_DIR / f"{i}-of-{count}",
            None if cache is None else str(cache),
            cache_mode,
            progress and i == 1,
            progress_interval,
            identity,
        )
        for i in range(1, count + 1)
    ]


def plan_for_shards(
    data: str | os.PathLike[str],
    column_map: Mapping[str, str] | None = None,
    *,
    metrics: Sequence[MetricLike] | str | None,
    llm: LLM | None,
    embeddings: Embeddings | None,
    gates: Gates | None = None,
    prompts: str | os.PathLike[str] | None = None,
    metric_modules: Sequence[str] = (),
) -> tuple[RunPlan, InputRows]:
    """The plan of a run its shards will execute, made once here and checked scorable
    before any shard starts (as `judge.evaluate` checks it), with the input it reads (names
    and count: no row kept) for `shard_jobs`' identity and unit."""
    from judge.run.dry_run import check_scorable
    from judge.run.inputs import open_input
    from judge.run.plan import plan_run

    rows = open_input(data, column_map)
    plan, _ = plan_run(
        rows,
        rows.columns,
        rows.source,
        metrics=metrics,
        llm=llm,
        embeddings=embeddings,
        metric_modules=metric_modules,
        gates=gates,
        prompts=prompts,
    )
    check_scorable(plan, rows)
    # Every shard's summary holds the whole input's hash: computed here, in a pass that
    # keeps nothing of the rows, so each shard reads only its own rows.
    return dataclasses.replace(plan, data_sha256=rows.data_sha256()), rows


def evaluate_in_processes(
    data: str | os.PathLike[str], spec: RunSpec, processes: int, work: str | os.PathLike[str]
) -> EvaluationResult:
    """A file's rows judged in up to `processes` fresh processes, as `judge eval
    --processes` judges them: the plan made here, its shards run at once, joined as
    `judge merge` joins them (the same rows and scores as one process gives).

    Args:
        data: the input file (`judge.run.inputs.open_input` reads it).
        spec: the run's choices; its cache, given as a path or a `Cache`, is shared by the
            processes through its file.
        processes: how many processes at most (no more than the rows, or conversations).
        work: an empty folder for the shards' outputs and the joined rows, which the
            result reads lazily: keep it while the result is used.
    """
    from judge.cache.store import Cache
    from judge.run.merge import merge_shards

    llm, embeddings = spec.models()
    plan, rows = plan_for_shards(
        data,
        metrics=spec.metrics,
        llm=llm,
        embeddings=embeddings,
        gates=spec.gates,
        prompts=spec.prompts,
    )
    cache = spec.cache.path if isinstance(spec.cache, Cache) else spec.cache
    jobs = shard_jobs(
        plan,
        data,
        Path(work),
        max(1, min(processes, rows.units())),
        cache=cache,
        progress=False,
        identity=rows.records.identity(),
        unit=rows.unit,
    )
    run_shards(jobs)
    return merge_shards([job.out for job in jobs], Path(work) / RESULTS)


def judge_shard(job: ShardJob) -> None:
    """Execute one shard's plan here and write its folder (no gates: the joined run is
    gated); its checkpoint stays until the shards are joined."""
    from judge.cache.store import Cache
    from judge.llm.session import LLMSession
    from judge.run import local
    from judge.run.inputs import open_input, reopen_input
    from judge.run.options import RunSpec
    from judge.run.output_folder import OutputFolder
    from judge.run.outputs import write_outputs

    plan = job.plan
    if plan.data_sha256 is None:  # a bug: the shards would each hash every row
        raise ValueError("a shard's plan holds the data hash")
    if job.identity is not None:
        rows = reopen_input(job.data, plan.columns, plan.data_rows, job.identity)
    else:  # nothing tells the input is the one planned on: its rows are hashed again
        rows = open_input(job.data, job.column_map)
        if rows.columns != plan.columns or rows.data_sha256() != plan.data_sha256:
            raise InputFormatError(
                f"{job.data} changed while the run was starting: its rows are not those "
                "the run was planned on; run the command again"
            )
    session = None
    if plan.llm is not None:
        cache = None if job.cache is None else Cache(job.cache, mode=job.cache_mode)  # type: ignore[arg-type]
        session = LLMSession(plan.llm, embeddings=plan.embeddings, cache=cache)
    with OutputFolder(job.out) as folder:  # locked: the checkpoint lives in the folder
        try:
            result = run_sync(
                local.execute(
                    plan,
                    rows,
                    session,
                    RunSpec(
                        checkpoint=RunFolder(folder.path).checkpoint,
                        progress=job.progress,
                        progress_interval=job.progress_interval,
                    ),
                )
            )
        finally:
            if session is not None:
                run_sync(session.aclose())
        write_outputs(result, folder, max_error_rate=1.0)


def run_shards(jobs: Sequence[ShardJob]) -> None:
    """Run every shard in a process of its own, all at once; the first to fail (or to die)
    stops the others, and its failure is raised as a JudgeError. Ctrl-C or SIGTERM (which
    `judge.signals` raises as `Terminated`) stops them all before it goes on."""
    # Fresh interpreters ("spawn"): a forked copy of this one would share its open files.
    context = multiprocessing.get_context("spawn")
    running: dict[int, tuple[Any, Any, str]] = {}  # sentinel -> (process, pipe, shard)
    lifelines = []  # our ends of the pipes the shards watch: closed when we die
    try:
        for job in jobs:
            receiver, sender = context.Pipe(duplex=False)
            watched, lifeline = context.Pipe(duplex=False)
            process = context.Process(
                target=shard_main, args=(job, sender, watched, os.getpid()), daemon=True
            )
            process.start()
            sender.close()  # the child's end: the pipe reports EOF if the child dies
            watched.close()  # the child's too: it must see EOF when we are gone
            lifelines.append(lifeline)
            running[process.sentinel] = (process, receiver, job.label)
        while running:
            for sentinel in multiprocessing.connection.wait(list(running)):
                process, receiver, shard = running.pop(cast(int, sentinel))
                failure, bug = _message(receiver)
                process.join()
                if failure is None and process.exitcode == 0:
                    continue
                if bug:  # not a usage error: judge.cli.main prints it as a bug (exit 70)
                    raise ShardCrash(f"shard {shard} failed unexpectedly:\n{failure}")
                if process.exitcode:
                    failure = f"{failure} (the process ended with exit code {process.exitcode})"
                raise JudgeError(
                    f"shard {shard}: {failure}; the rows finished so far are kept: rerun the "
                    "same command to resume"
                )
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (judge.signals.Terminated)
        print(
            "judge: stopping the shards; the rows finished so far are kept: rerun the same "
            "command to resume",
            file=sys.stderr,
            flush=True,
        )
        raise
    finally:
        for process, _, _ in running.values():  # stopped or failed: the others stop too
            process.terminate()
        for process, _, _ in running.values():
            process.join()
        for lifeline in lifelines:
            lifeline.close()


class ShardCrash(RuntimeError):
    """A shard ended on an unexpected exception (a bug): its traceback, as text."""


def _message(receiver: Any) -> tuple[str | None, bool]:
    """What a finished shard sent: (None, False) when it was done, else (its failure,
    whether that was an unexpected exception)."""
    try:
        message: tuple[str | None, bool] = receiver.recv()
    except EOFError:  # it died before sending a word (killed, out of memory)
        return "the process stopped without finishing", False
    finally:
        receiver.close()
    return message


def shard_main(job: ShardJob, report: Any, lifeline: Any, parent: int) -> None:
    """Run one shard (in its own process) and send back None when done, else what failed;
    end at once if the parent process is (or goes) away."""
    die_with_parent(parent)
    exit_when_closed(lifeline)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # The parent stops a shard with SIGTERM: unwound as judge unwinds (its spill file
    # removed, its batched cache writes flushed), not cut off.
    raise_on_sigterm()
    failure: str | None = None
    bug = False
    try:
        judge_shard(job)
    except Terminated:
        return  # stopped by the parent, which says so
    except JudgeError as exc:  # sent as text: an exception's own fields may not pickle
        failure = str(exc)
    except Exception:  # a bug: its traceback goes to the parent, which exits 70
        failure, bug = traceback.format_exc(), True
    report.send((failure, bug))
    report.close()


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_ORPHANED = 70  # the exit code of a shard whose parent is gone (no one reads it)


def die_with_parent(parent: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux), and exit now if the
    parent (process id `parent`) is already gone.

    Args:
        parent: the process id of the parent that started this process.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            # SIGKILL: nothing of a shard's (a request, a line of its checkpoint) may
            # follow its parent's end; a kill is what a resumed run already recovers from.
            libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no libc or prctl: the pipe check still holds
            pass
    # A parent that died before prctl was set sends no signal: we have been handed to
    # another process (init, a subreaper) already.
    if os.getppid() != parent:
        os._exit(_ORPHANED)


def exit_when_closed(lifeline: Any) -> None:
    """End this process as soon as the pipe from the parent reports EOF, which it does when
    the parent has died (on any platform: the check that needs no prctl).

    Args:
        lifeline: the receiving end of a pipe whose sending end only the parent holds.
    """

    def watch() -> None:
        try:
            while True:
                lifeline.recv_bytes()  # the parent sends nothing: only EOF ends the wait
        except (EOFError, OSError):
            os._exit(_ORPHANED)

    threading.Thread(target=watch, name="judge-parent-watch", daemon=True).start()

"""`judge eval --processes N`: one command judging on N cores, as N shards and a merge.

The rows are split as `--shard I/N` splits them. Each shard is a `judge eval` in a fresh
process of its own, writing to OUT/.shards/I-of-N, all of them sharing the cache file; the
outputs are then joined as `judge merge` joins them, so results.jsonl, summary.json and
report.html are those of an unsharded run (`config.seconds` is the shards' summed time).
Each shard keeps its checkpoint, finished or not, until the join has succeeded, so a
stopped run resumes every shard where it was; then the shards' directory is removed. The
gates (--fail-under, --max-error-rate) are checked once, on the joined run.

The shards die with their parent, however it ends (SIGTERM from `timeout` or a CI cancel,
SIGKILL from the OOM killer): left running, they would go on sending paid requests and
writing into OUT/.shards beside a rerun of the same command. On Linux the kernel kills
them (PR_SET_PDEATHSIG); everywhere, each also watches a pipe from its parent and exits
when the pipe closes, which it does when the parent dies.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, cast

from judge.errors import JudgeError

SHARDS_DIR = ".shards"


def run_in_processes(args: argparse.Namespace, required: dict[str, float]) -> int:
    """Judge args.data in args.processes shards at once, then join them into args.out;
    returns the exit code of the joined run."""
    from judge.cli.finish import merge_into
    from judge.cli.options import check_retrieval_only, data_options, metric_names, model_config
    from judge.run.output_folder import OutputFolder

    count = args.processes
    if args.shard is not None:
        raise JudgeError(
            "--processes splits the rows into shards itself: drop --shard (or drop "
            "--processes and run each --shard I/N, then judge merge)"
        )
    if args.ray or args.ray_address:
        raise JudgeError("--processes cannot be used with --ray: Ray has its own actors")
    # Checks the options before any process starts, and upgrades an older cache file
    # once here rather than in every shard at the same time.
    if args.model:
        _, _, cache = model_config(args)
        if cache is not None:
            cache.close()
    else:
        # no judge model: no cache to open; custom metric names are judged ones, the rest
        # of what is not a retrieval measure is unknown
        check_retrieval_only(metric_names(args), data_options(args)["custom"])
    with OutputFolder(args.out) as folder:  # each shard locks its own folder below it
        out = folder.path
        dirs = [out / SHARDS_DIR / f"{i}-of-{count}" for i in range(1, count + 1)]
        if not args.no_progress:
            print(f"judging in {count} processes; the progress shown is shard 1's", file=sys.stderr)
        run_shards([child_options(args, i, count, d) for i, d in enumerate(dirs, start=1)])
        code = merge_into(folder, dirs, required, args.max_error_rate)
        shutil.rmtree(out / SHARDS_DIR)  # joined: results.jsonl holds every row
        return code


def run_shards(shards: list[dict[str, Any]]) -> None:
    """Run every shard in a process of its own, all at once; the first to fail (or to die)
    stops the others, and its failure is raised as a JudgeError. Ctrl-C or SIGTERM (which
    `judge.cli.main` raises as `Terminated`) stops them all before it goes on."""
    # Fresh interpreters ("spawn"): a forked copy of this one would share its open files.
    context = multiprocessing.get_context("spawn")
    running: dict[int, tuple[Any, Any, str]] = {}  # sentinel -> (process, pipe, shard)
    lifelines = []  # our ends of the pipes the shards watch: closed when we die
    try:
        for options in shards:
            receiver, sender = context.Pipe(duplex=False)
            watched, lifeline = context.Pipe(duplex=False)
            process = context.Process(
                target=shard_main, args=(options, sender, watched, os.getpid()), daemon=True
            )
            process.start()
            sender.close()  # the child's end: the pipe reports EOF if the child dies
            watched.close()  # the child's too: it must see EOF when we are gone
            lifelines.append(lifeline)
            running[process.sentinel] = (process, receiver, options["shard"])
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
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (judge.cli.main.Terminated)
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


def child_options(args: argparse.Namespace, index: int, count: int, out: Path) -> dict[str, Any]:
    """The options of shard `index` of `count`: the run's own, with its shard and output
    directory, no gates (the joined run is gated), its checkpoint kept once finished (a
    rerun resumes it), and progress from shard 1 alone."""
    options = {k: v for k, v in vars(args).items() if k != "func"}
    options.update(
        shard=f"{index}/{count}",
        out=str(out),
        processes=1,
        fail_under=[],
        max_error_rate=1.0,
        keep_checkpoint=True,
        no_progress=args.no_progress or index != 1,
    )
    return options


def shard_main(options: dict[str, Any], report: Any, lifeline: Any, parent: int) -> None:
    """Run one shard (in its own process) and send back None when done, else what failed;
    end at once if the parent process is (or goes) away."""
    die_with_parent(parent)
    exit_when_closed(lifeline)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # The parent stops a shard with SIGTERM: unwound as judge unwinds (its spill file
    # removed, its batched cache writes flushed), not cut off.
    from judge.cli.main import Terminated, raise_on_sigterm

    raise_on_sigterm()
    from judge.cli.eval import run_eval

    failure: str | None = None
    bug = False
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the joined run prints the table
            run_eval(argparse.Namespace(**options))
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

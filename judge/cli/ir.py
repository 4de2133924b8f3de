"""`judge ir QRELS RUN -m ndcg@10`: retrieval metrics from TREC files, printed as trec_eval does."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import warnings

from judge.cli.options import metric_option, metrics_of
from judge.cli.output import output_options
from judge.errors import CoverageWarning
from judge.formatting import terminal_text
from judge.ir.measure_names import DEFAULT_METRICS
from judge.ir.result import QueryScores, result_of


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ir subcommand."""
    from judge.ir.measure_names import FAMILIES

    table = "\n".join(f"  {f:<12} {desc}" for f, (_, desc) in FAMILIES.items())
    p = sub.add_parser(
        "ir",
        help="retrieval metrics from TREC qrels and run files, exactly as trec_eval computes them",
        description="Compute retrieval metrics from a TREC qrels file and a TREC run file.\n"
        "Ranking is by score descending, ties by doc id descending (the rank column is "
        "ignored); judged queries missing from the run score 0 and count in the mean "
        "(trec_eval -c).",
        epilog=f"metrics (add @k for a cutoff, e.g. ndcg@10, P@5):\n{table}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("qrels", help="TREC qrels file: query_id iteration doc_id grade")
    p.add_argument("run", help="TREC run file: query_id Q0 doc_id rank score tag")
    metric_option(
        p,
        f"metric to compute, repeatable or comma-separated (default: {','.join(DEFAULT_METRICS)})",
    )
    p.add_argument("-q", "--per-query", action="store_true", help="also print each query")
    p.add_argument(
        "-l",
        "--relevance-level",
        type=int,
        default=1,
        metavar="LEVEL",
        help="smallest grade that counts as relevant, 1 or more (default 1)",
    )
    output_options(p)
    p.add_argument(
        "--digits",
        type=_digits,
        default=4,
        help=f"decimals in text output, 0 to {MAX_DIGITS} (default 4, as trec_eval)",
    )
    p.set_defaults(func=run_ir)


# The decimals of a double's exact value: 2**-1074, the least, has that many and no double
# more, so any further digit would be a 0 (and Python refuses a precision below 0).
MAX_DIGITS = 1074


def _digits(text: str) -> int:
    """--digits: a whole number from 0 to MAX_DIGITS."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_DIGITS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number from 0 to {MAX_DIGITS} (decimals to print; "
            f"{MAX_DIGITS} print any value exactly)"
        )
    return value


def _small_scores(args: argparse.Namespace, metrics: list[str]) -> QueryScores | None:
    """The scores of small files, computed without numpy (its import would be most of
    the time); None for big files or what is not a regular file."""
    from judge.ir.measure_names import parse_measures
    from judge.ir.small import SMALL_BYTES, score_small
    from judge.ir.trec import read_qrels_by_line, read_run_by_line

    try:
        sizes = [os.stat(path) for path in (args.qrels, args.run)]
    except OSError:
        return None  # the reader says what is wrong
    if (
        not all(stat.S_ISREG(s.st_mode) for s in sizes)
        or sum(s.st_size for s in sizes) > SMALL_BYTES
    ):
        return None
    parse_measures(metrics)  # a bad metric name is reported before a bad file, as below
    qrels = read_qrels_by_line(args.qrels)
    run = read_run_by_line(args.run)
    return score_small(qrels, run, metrics, relevance_level=args.relevance_level)


def _numpy_with_one_blas_thread() -> None:
    """Import numpy with OpenBLAS asked for a single thread, unless numpy is loaded already
    or the caller chose a number (OPENBLAS_NUM_THREADS).

    judge ir does no linear algebra, but the threads OpenBLAS starts when numpy loads it
    cost some 35 ms of CPU. OpenBLAS reads the variable as it loads, so it is set for the
    import only: processes started later inherit the caller's environment.
    """
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def run_ir(args: argparse.Namespace) -> int:
    """The `judge ir` command."""
    metrics = metrics_of(args) or list(DEFAULT_METRICS)
    scores = _small_scores(args, metrics)
    if scores is None:
        _numpy_with_one_blas_thread()
        from judge.ir.evaluate import score_queries

        # Paths, not dicts: big files are read straight into the arrays the metrics use.
        scores = score_queries(args.qrels, args.run, metrics, relevance_level=args.relevance_level)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CoverageWarning)
        means = result_of(scores)
        per_query = result_of(scores, per_query=True) if args.per_query else None
    # Each coverage warning once, on stderr, so stdout stays machine-readable.
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(terminal_text(f"judge: note: {message}"), file=sys.stderr)
    if args.format == "json":
        doc = {
            "metrics": dict(means),
            "num_queries": len(scores.qids),
            "relevance_level": args.relevance_level,
            "missing_queries": list(means.missing_queries),
            "unjudged_queries": list(means.unjudged_queries),
        }
        if per_query is not None:
            doc["per_query"] = dict(per_query)
        json.dump(doc, sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
        return 0
    lines = []
    if per_query is not None:
        for query, values in per_query.items():
            lines += [
                f"{name:<22}\t{query}\t{value:.{args.digits}f}" for name, value in values.items()
            ]
    lines += [f"{name:<22}\tall\t{value:.{args.digits}f}" for name, value in means.items()]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0

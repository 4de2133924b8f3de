"""`judge compare`: two evaluations (or two TREC runs and qrels), with paired significance."""

from __future__ import annotations

import argparse
import json
import sys

from judge.cli.options import metric_option, metrics_of
from judge.cli.output import output_options
from judge.errors import JudgeError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the compare subcommand."""
    p = sub.add_parser(
        "compare",
        help="compare two evaluations (or two TREC runs) with paired significance tests",
        description="Compare B against A. A and B are judge eval outputs (results.jsonl or "
        "its directory) or, with --qrels, two TREC run files (e.g. first-stage retrieval and "
        "the same candidates reranked). Exit 1 with --fail-on-regression only when a metric "
        "drops significantly (Holm-adjusted p < 0.05), 2 on usage and input errors.",
    )
    p.add_argument("a", help="baseline: results.jsonl, an eval output directory, or a run file")
    p.add_argument("b", nargs="?", help="candidate, in the same form (omit with --columns)")
    p.add_argument("--qrels", help="TREC qrels: A and B are then TREC run files")
    p.add_argument(
        "--columns",
        metavar="COL_A,COL_B",
        help="A is a dataset; compare its two ranked doc-id columns (e.g. "
        "first_stage_ids,reranked_ids) against its relevance column",
    )
    metric_option(
        p,
        "metric to compare, repeatable or comma-separated (default: all "
        "shared; for runs: mrr, ndcg@K, P@K, recall@K, hit_rate@K)",
    )
    p.add_argument("-l", "--relevance-level", type=int, default=1, help="for run files")
    p.add_argument(
        "-k",
        "--top-k",
        type=int,
        help="for run files: cutoff K of the default "
        "metrics, and list queries whose relevant docs fell out of B's top K",
    )
    output_options(p, "comparison.json and compare.html")
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 if any metric got significantly worse",
    )
    p.set_defaults(func=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    """The `judge compare` command."""
    from judge.comparison.evaluations import compare, write_json
    from judge.comparison.html import write_compare
    from judge.comparison.trec_runs import compare_runs
    from judge.ir import read_qrels, read_run

    metrics = metrics_of(args) or None
    if args.columns:
        from judge.comparison.trec_runs import compare_ranked_columns

        first, _, second = args.columns.partition(",")
        if not first or not second or args.b:
            raise JudgeError("--columns takes COL_A,COL_B and one dataset (no B)")
        comparison = compare_ranked_columns(
            args.a,
            first.strip(),
            second.strip(),
            metrics,
            relevance_level=args.relevance_level,
            k=args.top_k or 5,
        )
    elif args.b is None:
        raise JudgeError("give B, or --columns COL_A,COL_B to compare two columns of A")
    elif args.qrels:
        comparison = compare_runs(
            read_qrels(args.qrels),
            read_run(args.a),
            read_run(args.b),
            metrics,
            relevance_level=args.relevance_level,
            k=args.top_k or 5,
            label_a=args.a,
            label_b=args.b,
        )
    else:
        if args.top_k:
            raise JudgeError("--top-k applies to run files or --columns")
        comparison = compare(args.a, args.b, metrics=metrics)
    findings = comparison.diagnosis_b()
    if args.out:
        from judge.run.output_folder import OutputFolder

        with OutputFolder(args.out) as folder:  # locked, written whole, no debris
            with folder.writing("compare.html") as html:
                write_compare(comparison, findings, html)
            with folder.writing("comparison.json") as data:
                write_json(comparison, data)
            folder.publish(["compare.html", "comparison.json"])
    if args.format == "json":
        print(json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(comparison.table())
        lost = comparison.extra.get("lost_from_top_k")
        if lost is not None:
            print(
                f"\nqueries whose relevant docs fell out of the top {lost['k']}: "
                f"{len(lost['queries'])}"
            )
            for q in lost["queries"][:20]:
                print(f"  {q['query']}: {', '.join(q['docs'])} (rank in B: {q['rank_in_b']})")
        if findings:
            print("\ndiagnosis of B:\n" + "\n".join(f"  - {f}" for f in findings))
    regressions = comparison.regressions()
    for m in regressions:
        print(
            f"REGRESSION: {m.metric} got worse, delta {m.delta:+.4f} (p_holm {m.p_adjusted:.4g})",
            file=sys.stderr,
        )
    return 1 if args.fail_on_regression and regressions else 0

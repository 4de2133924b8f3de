"""`judge compare`: evaluations against a baseline (or two TREC runs and qrels), with paired
significance."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.cli.label_options import KEYWORD, label_options, pair_of
from judge.cli.options import metric_option, metrics_of, runs_path, runs_path_option
from judge.cli.output import output_options, write_files
from judge.errors import GateCannotFailError, JudgeError
from judge.formatting import counted, terminal_text

if TYPE_CHECKING:
    from judge.comparison.evaluations import Comparison
    from judge.runs.store import RunRecord, RunStore


DEFAULT_TOP_K = 5  # -k when not given, with run files or --columns


def _cutoff(text: str) -> int:
    """-k/--top-k: a whole number of 1 or more (a rank cutoff)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of 1 or more (the cutoff K: the top K ranks)"
        )
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the compare subcommand."""
    p = sub.add_parser(
        "compare",
        help="compare evaluations (or two TREC runs) with paired significance tests",
        description="Compare evaluations against a baseline. The RUNs are judge eval outputs "
        "(results.jsonl or its directory); the first is the baseline unless --baseline names "
        "one. Two RUNs: B against A. More: a runs x metrics table, each run against the "
        "baseline with Holm's correction across all runs and metrics, and per question what "
        "got worse and better. With --qrels, two TREC run files (e.g. first-stage retrieval "
        "and the same candidates reranked). Exit 1 with --fail-on-regression only when a "
        "metric drops significantly (Holm-adjusted p < 0.05), 2 on usage and input errors. "
        "With --labels-a and --labels-b (people's labels of A's and of B's outputs on the "
        "same rows), the labelled metric's paired difference B - A corrected by them (PPI) "
        "is shown beside the judge's, and an interval of it wholly below 0 is a regression "
        "too.",
    )
    p.add_argument(
        "refs",
        nargs="+",
        metavar="RUN",
        help="results.jsonl, an eval or experiment output directory, or a run of the run "
        "store (its id, id prefix or --name; `baseline` for the pinned one) (the first is "
        "the baseline unless --baseline is given); with --qrels two run files A B; with "
        "--columns one dataset",
    )
    p.add_argument(
        "--baseline",
        metavar="RUN",
        help="the evaluation the others are compared with: one of the RUNs or another",
    )
    p.add_argument("--qrels", help="TREC qrels: the two RUNs are then TREC run files")
    p.add_argument(
        "--columns",
        metavar="COL_A,COL_B",
        help="the RUN is a dataset; compare its two ranked doc-id columns (e.g. "
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
        type=_cutoff,
        help=f"for run files: cutoff K of the default metrics (default {DEFAULT_TOP_K}), and "
        "list queries whose relevant docs fell out of B's top K",
    )
    runs_path_option(p)
    output_options(p, "comparison.json and compare.html")
    p.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 if any metric of any run got significantly worse than the baseline",
    )
    label_options(p, pair=True)
    p.set_defaults(func=run_compare)


def run_sources(refs: list[str], args: argparse.Namespace) -> list[str]:
    """The evaluation each RUN or --baseline argument names: a results.jsonl or an output
    folder as given, else a run of the run store by id, id prefix or name (the one place
    where arguments become sources)."""
    sources = []
    store = None
    try:
        for ref in refs:
            if Path(ref).exists() or args.qrels or args.columns:
                sources.append(ref)
                continue
            if store is None:
                store = _open_store(args, ref)
            sources.append(_checked(store.get(ref), ref))
    finally:
        if store is not None:
            store.close()
    return sources


def _checked(record: RunRecord, ref: str) -> str:
    """The output folder of a recorded run, refused when a later run wrote into it since
    (its rows are another run's); a note when a record of an older judge cannot tell."""
    from judge.run.folder import RunFolder

    changed = RunFolder(record.out_dir).results_changed(record.results_sha256)
    named = f"run {record.id}" + (f" ({record.name})" if record.name else "")
    if changed:
        raise JudgeError(
            f"RUN {ref!r}: the folder of {named}, {record.out_dir}, changed since the run was "
            "recorded: its results.jsonl is another run's now (a later run was given the "
            "same --out); judge compare that later run by its own id, or give the folder "
            "itself as RUN to compare what it holds now"
        )
    if changed is None and record.results_sha256 is None:
        print(
            terminal_text(
                f"judge: note: {named} was recorded without a hash of its results.jsonl "
                f"(by an older judge): whether {record.out_dir} still holds its rows cannot "
                "be checked"
            ),
            file=sys.stderr,
        )
    return record.out_dir


def _open_store(args: argparse.Namespace, ref: str) -> RunStore:
    """The run store, for a RUN that is no file or folder; an error naming both when there
    is none."""
    from judge.runs.store import open_existing

    return open_existing(runs_path(args), f"RUN {ref!r}: no such file or folder, and ")


def _same_source(a: str, b: str) -> bool:
    """Whether two sources are the same evaluation (a folder and its results.jsonl are)."""

    from judge.run.folder import RunFolder

    def results(source: str) -> Path:
        path = Path(source)
        return (RunFolder(path).results if path.is_dir() else path).resolve()

    return results(a) == results(b)


def _evaluations(args: argparse.Namespace) -> tuple[str, list[str]]:
    """The baseline and the other evaluations from the RUNs and --baseline."""
    if args.baseline is None:
        first, *others = run_sources(args.refs, args)
        return first, others
    *given, baseline = run_sources([*args.refs, args.baseline], args)
    return baseline, [s for s in given if not _same_source(s, baseline)]


def run_compare(args: argparse.Namespace) -> int:
    """The `judge compare` command."""
    if (args.qrels or args.columns) and args.baseline:
        raise JudgeError(
            "--baseline applies to judge eval outputs; with --qrels or --columns the first "
            "run (or column) is the baseline"
        )
    if args.qrels and len(args.refs) != 2:
        raise JudgeError(f"--qrels compares two run files A B, not {len(args.refs)}")
    labelled = pair_of(args) is not None
    if labelled and (args.qrels or args.columns):
        raise JudgeError("--labels-a and --labels-b go with two judge eval runs, not run files")
    if args.columns or args.qrels:
        return _compare_two(args, args.refs[0], args.refs[1] if len(args.refs) > 1 else None)
    baseline, others = _evaluations(args)
    if not others:
        raise JudgeError(
            "give two or more evaluations (the first is the baseline, or --baseline RUN), or "
            "--columns COL_A,COL_B to compare two columns of one dataset"
        )
    if args.top_k is not None:
        raise JudgeError("--top-k applies to run files or --columns")
    if len(others) == 1:
        return _compare_two(args, baseline, others[0])
    if labelled:
        raise JudgeError(
            f"--labels-a and --labels-b correct the difference of two runs, and "
            f"{len(others) + 1} are given: compare two at a time"
        )
    return _compare_many(args, baseline, others)


def _compare_many(args: argparse.Namespace, baseline: str, others: list[str]) -> int:
    """Runs against a baseline: write, print, and exit 1 on a regression when asked."""
    from judge.comparison.evaluations import write_json
    from judge.comparison.html import write_many
    from judge.comparison.many import compare_many

    many = compare_many(baseline, others, metrics=metrics_of(args) or None)
    if args.out:
        write_files(
            args.out,
            [
                ("compare.html", lambda html: write_many(many, html)),
                ("comparison.json", lambda data: write_json(many, data)),
            ],
        )
    if args.format == "json":
        print(terminal_text(json.dumps(many.to_dict(), indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(many.table()))
    regressions = many.regressions()
    for run, m in regressions:
        print(
            terminal_text(
                f"REGRESSION: {run}: {m.metric} got worse than {many.baseline}, delta "
                f"{m.delta:+.4f} (p_holm {m.p_adjusted:.4g})"
            ),
            file=sys.stderr,
        )
    from judge.comparison.evaluations import ALPHA, GateWording, cannot_fail

    compared = [
        (f"{v.label}: {m.metric}", m) for v in many.versus for m in v.comparison.metrics.values()
    ]
    words = GateWording("--fail-on-regression", "fewer metrics (--metric) or runs")
    return _gate(args, bool(regressions), cannot_fail(compared, ALPHA, many.tests, words))


def _gate(args: argparse.Namespace, failed: bool, why: str | None) -> int:
    """--fail-on-regression's exit code: 1 on a regression; a gate that could not have
    failed (`why`: too few paired questions or conversations for the test to reach
    p < 0.05 after Holm's adjustment, `cannot_fail`) is refused (exit 2) rather than
    passed, and beside a regression it is warned of."""
    if not args.fail_on_regression:
        return 0
    if why is not None and not failed:
        raise GateCannotFailError(why)
    if why is not None:
        print(terminal_text(f"judge: warning: {why}"), file=sys.stderr)
    return 1 if failed else 0


def _compare_two(args: argparse.Namespace, a: str, b: str | None) -> int:
    """B against A: two evaluations, two TREC runs (--qrels) or two columns (--columns)."""
    from judge.comparison.evaluations import ALPHA, GateWording, compare, write_json
    from judge.comparison.html import write_compare
    from judge.comparison.trec_runs import compare_runs, left_out_note, unjudged_loss_warning
    from judge.ir import read_qrels, read_run

    metrics = metrics_of(args) or None
    corrected = ""  # the label-corrected difference: of two evaluations only
    if args.columns:
        from judge.comparison.trec_runs import compare_ranked_columns

        first, _, second = args.columns.partition(",")
        if not first or not second or b:
            raise JudgeError("--columns takes COL_A,COL_B and one dataset (no B)")
        comparison = compare_ranked_columns(
            a,
            first.strip(),
            second.strip(),
            metrics,
            relevance_level=args.relevance_level,
            k=DEFAULT_TOP_K if args.top_k is None else args.top_k,
        )
    elif b is None:
        raise JudgeError("give B, or --columns COL_A,COL_B to compare two columns of A")
    elif args.qrels:
        comparison = compare_runs(
            read_qrels(args.qrels),
            read_run(a),
            read_run(b),
            metrics,
            relevance_level=args.relevance_level,
            k=DEFAULT_TOP_K if args.top_k is None else args.top_k,
            label_a=a,
            label_b=b,
        )
    else:
        comparison = compare(a, b, metrics=metrics)
        corrected = _label_corrected(args, comparison, a, b)
    findings = comparison.diagnosis_b()
    for found in comparison.extra.get("unjudged_losses", []):
        said = unjudged_loss_warning(found, comparison.label_a, comparison.label_b)
        print(terminal_text(f"judge: warning: {said}"), file=sys.stderr)
    if args.out:
        write_files(
            args.out,
            [
                ("compare.html", lambda html: write_compare(comparison, findings, html)),
                ("comparison.json", lambda data: write_json(comparison, data)),
            ],
        )
    if args.format == "json":
        print(terminal_text(json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False)))
    else:
        print(terminal_text(comparison.table()))
        left_out = comparison.extra.get("left_out", {}).get("no_relevance_judgments")
        if left_out:
            print(terminal_text(left_out_note(left_out)))
        lost = comparison.extra.get("lost_from_top_k")
        if lost is not None:
            print(
                f"\nqueries whose relevant docs fell out of the top {lost['k']}: "
                f"{len(lost['queries'])}"
            )
            for q in lost["queries"][:20]:
                line = f"  {q['query']}: {', '.join(q['docs'])} (rank in B: {q['rank_in_b']})"
                print(terminal_text(line))
        if corrected:
            print(terminal_text(f"\n{corrected}"))
        if findings:
            print(terminal_text("\ndiagnosis of B:\n" + "\n".join(f"  - {f}" for f in findings)))
    regressions = comparison.regressions()
    for m in regressions:
        print(
            terminal_text(
                f"REGRESSION: {m.metric} got worse, delta {m.delta:+.4f} "
                f"(p_holm {m.p_adjusted:.4g})"
            ),
            file=sys.stderr,
        )
    # The labels' difference counts too: a lenient judge of B can show a gain where people
    # see a loss (on the labels' scale, higher is better, whatever the metric's direction).
    labelled: dict[str, Any] = comparison.extra.get("label_corrected") or {}
    ppi = labelled.get("ppi") or {}
    # too few labelled pairs: the labels' verdict cannot be trusted, and decides nothing
    untrusted = _few_labels(labelled)
    worse = untrusted is None and (ppi.get("high") or 0.0) < 0  # null: no verdict
    if worse:
        print(
            terminal_text(
                f"REGRESSION: {labelled['metric']} got worse by the labels, corrected "
                f"difference B - A {ppi['mean']:+.4f}, interval [{ppi['low']:+.4f}, "
                f"{ppi['high']:+.4f}] wholly below 0"
            ),
            file=sys.stderr,
        )
    if untrusted is not None and args.fail_on_regression and not regressions:
        raise GateCannotFailError(f"--fail-on-regression: {untrusted}")
    if untrusted is not None:
        print(terminal_text(f"judge: warning: {untrusted}"), file=sys.stderr)
    words = GateWording("--fail-on-regression", "fewer metrics (--metric)")
    return _gate(args, bool(regressions or worse), comparison.gate_cannot_fail(ALPHA, words))


def _few_labels(labelled: dict[str, Any]) -> str | None:
    """Why the label-corrected verdict cannot be trusted, or None: fewer labelled pairs
    than the paired randomisation test needs to reach p < 0.05 (6), the rule of a
    regression gate that could not fail (`cannot_fail`). The verdict rests on a normal
    interval, which on so few labels covers far less than 95% and can reach past the
    metric's range (3 labelled pairs gave [-1.20, -0.13])."""
    from judge.comparison.evaluations import ALPHA
    from judge.stats import reaches, smallest_p_value, units_to_reach

    pairs = labelled.get("n_labelled")
    if pairs is None or reaches(pairs, ALPHA):
        return None
    return (
        f"the labels give no verdict on {labelled['metric']}: "
        f"{counted(pairs, 'labelled pair')} (rows labelled under both --labels-a and "
        f"--labels-b), too few for the paired randomisation test to reach p < {ALPHA:g} "
        f"(its smallest p-value on {pairs} is {smallest_p_value(pairs):.4g}), and the "
        "normal interval of the label-corrected difference covers far less than 95% on so "
        f"few; it needs at least {units_to_reach(ALPHA)} labelled pairs (30 or more for an "
        "interval to trust): label more rows of the random sample, or compare without "
        "--labels-a/--labels-b"
    )


def _label_corrected(args: argparse.Namespace, comparison: Comparison, a: str, b: str) -> str:
    """With --labels-a and --labels-b: the labelled metric's paired difference B - A
    corrected by the labels (`judge.labels.estimate.estimate_difference`), put in the
    comparison's JSON (`label_corrected`); returns its table ('' without labels). Its
    warnings go to stderr."""
    from judge.cli.words import cli_words
    from judge.labels.estimate import estimate_difference

    pair = pair_of(args)
    if pair is None:
        return ""
    found = estimate_difference(
        a,
        b,
        labels_a=pair[0],
        labels_b=pair[1],
        label=args.label,
        metric=args.label_metric,
        candidates=metrics_of(args),
        require_random=args.require_random,
        keyword=KEYWORD,
    )
    compared = comparison.metrics.get(found.metric)
    if compared is not None:  # the judge alone as the table above says it
        found.judge_alone(compared.delta, compared.ci_low, compared.ci_high, compared.n)
    comparison.extra["label_corrected"] = found.to_dict()
    for warning in found.warnings:
        print(terminal_text(f"judge: warning: {cli_words(warning)}"), file=sys.stderr)
    return found.table(warnings=False)

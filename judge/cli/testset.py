"""`judge testset build|export|review|mine`: golden test sets from documents and logs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge.cli.options import column_map, column_option, llm_options, model_config
from judge.cli.output import written
from judge.errors import JudgeError
from judge.formatting import counted, terminal_text

if TYPE_CHECKING:
    from judge.testset.build import BuildResult


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the testset subcommand and its actions."""
    p = sub.add_parser(
        "testset",
        help="build golden test sets (questions, answers, qrels)",
        description="Build a golden test set from your documents (questions, reference "
        "answers, gold chunk ids and pooled qrels), review it, or mine questions from logs. "
        "See `judge testset ACTION --help`.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    b = actions.add_parser(
        "build",
        help="synthesise a golden test set from a corpus",
        description="Sample seed chunks, generate questions of several types, check them "
        "(quotes, arithmetic, duplicates, one critic call), grade pooled chunks in one call "
        "per question, and write testset.jsonl, qrels.txt, qrels_docs.txt, queries.tsv, "
        "chunks.jsonl, rejected.jsonl and manifest.json to --out. About 3 requests per "
        "accepted question. Exit codes: 0 built (a shortfall is printed and kept in "
        "manifest.json); 2 a usage or input error (found before any call) or a configuration "
        "error (API key refused, no server: the calls made are cached, a rerun resumes).",
    )
    b.add_argument(
        "--mix",
        help="shares by type, summing to 1, e.g. single_hop=0.5,multi_hop=0.3,unanswerable=0.2 "
        "(types: single_hop, paraphrased, multi_hop, negation, calculation, unanswerable; "
        "default 0.3, 0.15, 0.2, 0.1, 0.1, 0.15)",
    )
    b.add_argument(
        "--dry-run",
        action="store_true",
        help="print the estimated requests, tokens and cost, and make no call",
    )
    b.add_argument(
        "--budget",
        type=float,
        metavar="USD",
        help="stop cleanly once this much is spent (needs a model with a known price); "
        "questions finished before are kept",
    )
    _common_options(b, "questions wanted")
    b.set_defaults(func=run_build)
    e = actions.add_parser(
        "export",
        help="write a built test set for judge eval, RAGAS or TREC tools",
        description="Write the questions of a test set folder (not those rejected in review) "
        "as judge eval's JSONL (question, ground_truth, reference_contexts, relevance), "
        "RAGAS's testset columns (user_input, reference, reference_contexts), or TREC qrels.",
    )
    e.add_argument("folder", help="a folder written by `judge testset build`")
    e.add_argument("--format", choices=["jsonl", "ragas", "qrels"], required=True)
    e.add_argument("--out", required=True, help="the file to write")
    e.add_argument(
        "--level",
        choices=["chunk", "doc"],
        default="chunk",
        help="qrels of chunks or of documents (a document's grade is its best chunk's)",
    )
    e.set_defaults(func=run_export)
    r = actions.add_parser(
        "review",
        help="export a review sheet (CSV) of a test set, or import the reviewed sheet",
        description="--export writes one row per question (action: accept, edit or reject; "
        "question and reference editable) and one per judged chunk (grade 0-2 editable). "
        "--import applies it: statuses human_ok, edited or rejected; testset.jsonl, qrels "
        "and queries are rewritten (rejected questions leave the qrels). Importing the same "
        "sheet twice changes nothing; a sheet whose ids do not match the set is refused.",
    )
    r.add_argument("folder", help="a folder written by `judge testset build`")
    way = r.add_mutually_exclusive_group(required=True)
    way.add_argument("--export", metavar="CSV", help="write the review sheet here")
    way.add_argument("--import", dest="import_", metavar="CSV", help="apply a reviewed sheet")
    r.set_defaults(func=run_review)
    m = actions.add_parser(
        "mine",
        help="draft a golden test set from real questions in logs",
        description="Mask personal data (emails, phone and card-like numbers) before anything "
        "else, cluster near-duplicate questions keeping their counts, sample N clusters by "
        "frequency with a floor (seeded), pool candidate chunks by BM25 and make one call per "
        "question to pre-label them 0-2 and draft a reference answer. The items are drafts "
        "(origin log, status draft) for `judge testset review`.",
    )
    m.add_argument("logs", help="a .txt file (one question per line) or a .jsonl/.csv/.parquet log")
    m.add_argument(
        "--floor",
        type=float,
        default=1.0,
        help="weight added to every cluster's count, so rare questions keep a chance (default 1)",
    )
    _common_options(m, "distinct log questions to draft")
    m.set_defaults(func=run_mine)


def _common_options(p: argparse.ArgumentParser, wanted: str) -> None:
    """--corpus, -n, --seed, --out, --pool-depth, --chunk-size, and judge eval's model,
    server, cache and column options."""
    p.add_argument(
        "--corpus",
        required=True,
        help="a folder of .txt/.md documents, one document, or a .jsonl/.csv/.parquet file of "
        "chunks (chunk_id, doc_id, text) or of documents (doc_id, text)",
    )
    p.add_argument("-n", type=int, required=True, help=f"number of {wanted}")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling (default 0)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument(
        "--pool-depth",
        type=int,
        default=10,
        help="candidate chunks graded per question, from BM25 (and dense) (default 10)",
    )
    p.add_argument(
        "--chunk-size",
        type=int,
        default=800,
        help="largest chunk in characters when documents are split (default 800)",
    )
    llm_options(p)
    column_option(p)


def _pool_depth(args: argparse.Namespace) -> int:
    if args.pool_depth < 1:
        raise JudgeError(f"--pool-depth {args.pool_depth}: grade at least one candidate")
    return int(args.pool_depth)


def run_export(args: argparse.Namespace) -> int:
    """The `judge testset export` command."""
    from judge.testset.export import export

    count = export(args.folder, args.format, args.out, level=args.level)
    print(terminal_text(f"wrote {counted(count, 'question')} to {args.out} ({args.format})"))
    return 0


def run_review(args: argparse.Namespace) -> int:
    """The `judge testset review` command."""
    from judge.testset.review import export_review, import_review

    if args.export:
        count = export_review(args.folder, args.export)
        print(
            terminal_text(
                f"wrote the review sheet of {counted(count, 'question')} to {args.export}"
            )
        )
        return 0
    done = import_review(args.folder, args.import_)
    print(
        terminal_text(
            f"imported {args.import_}: {done.human_ok} accepted, {done.edited} edited, "
            f"{done.rejected} rejected, {done.unchanged} unchanged; "
            f"{counted(done.grades_changed, 'grade')} changed; rewrote "
            f"{written(args.folder, 'testset.jsonl', 'qrels.txt', 'qrels_docs.txt', 'queries.tsv')}"
        )
    )
    return 0


def run_mine(args: argparse.Namespace) -> int:
    """The `judge testset mine` command."""
    from judge.testset.corpus import load_corpus
    from judge.testset.mine import mine, read_log

    columns = dict(column_map(args) or {})
    questions = read_log(args.logs, columns.pop("question", None))
    corpus = load_corpus(args.corpus, column_map=columns, chunk_size=args.chunk_size)
    llm, embeddings, cache = model_config(args)
    result = mine(
        questions,
        corpus,
        llm=llm,
        n=args.n,
        seed=args.seed,
        floor=args.floor,
        pool_depth=_pool_depth(args),
        embeddings=embeddings,
        cache=cache,
    )
    result.write(args.out)
    counts = result.counts
    print(
        terminal_text(
            f"{counted(counts['log_questions'], 'log question')}, {counts['clusters']} distinct; "
            f"drafted {counts['drafted']} of {counts['sampled']} sampled; "
            f"masked {counts['masked'] or 'nothing'}; "
            f"{counted(result.usage['total']['requests'], 'request')}; wrote {Path(args.out)}/ "
            "(drafts: review them with `judge testset review`)"
        )
    )
    return 0


def run_build(args: argparse.Namespace) -> int:
    """The `judge testset build` command."""
    from judge.testset.build import build, check_request
    from judge.testset.corpus import load_corpus
    from judge.testset.estimate import estimate
    from judge.testset.sampling import parse_mix

    # Every input problem is found here, before any call.
    corpus = load_corpus(args.corpus, column_map=column_map(args), chunk_size=args.chunk_size)
    mix = parse_mix(args.mix)
    requested = check_request(corpus, args.n, mix)
    _pool_depth(args)
    llm, embeddings, cache = model_config(args)
    if args.dry_run:
        guess = estimate(
            corpus, requested, seed=args.seed, model=llm.model, pool_depth=args.pool_depth
        )
        _print_estimate(corpus, requested, guess)
        if embeddings is not None:
            print(
                terminal_text(
                    f"plus embeddings ({embeddings.model}) of the "
                    f"{counted(len(corpus.chunks), 'chunk')} and of the questions, in batches of "
                    f"{embeddings.batch_size}; cached, so paid once"
                )
            )
        return 0
    result = build(
        corpus,
        llm=llm,
        n=args.n,
        mix=mix,
        seed=args.seed,
        embeddings=embeddings,
        cache=cache,
        pool_depth=args.pool_depth,
        budget=args.budget,
        progress=lambda line: print(terminal_text(f"judge: {line}"), file=sys.stderr, flush=True),
    )
    result.write(args.out)
    _print_summary(result, args.out)
    return 0


def _print_estimate(corpus: Any, requested: Mapping[Any, int], guess: dict[str, Any]) -> None:
    cost = (
        "unknown (model not in the price map)" if guess["cost"] is None else f"${guess['cost']:.4f}"
    )
    print(
        terminal_text(
            f"dry run: {counted(sum(requested.values()), 'question')} "
            f"({', '.join(f'{t} {c}' for t, c in requested.items())}) from "
            f"{counted(len(corpus.seeds), 'seed chunk')} of {len(corpus.chunks)}"
        )
    )
    print(
        terminal_text(
            f"estimate: {counted(guess['requests'], 'request')}, "
            f"{guess['prompt_tokens']:,} prompt tokens, "
            f"{guess['completion_tokens']:,} completion tokens, cost {cost} ({guess['note']})"
        )
    )


def _print_summary(result: BuildResult, out: str) -> None:
    for qtype, wanted in result.requested.items():
        print(terminal_text(f"{qtype:<14} {result.accepted[qtype]}/{wanted}"))
    reasons: dict[str, int] = {}
    for rejected in result.rejected:
        reasons[rejected.reason] = reasons.get(rejected.reason, 0) + 1
    if reasons:
        print(
            terminal_text("rejected: " + ", ".join(f"{r} {c}" for r, c in sorted(reasons.items())))
        )
    total = result.usage["total"]
    cost = "unknown" if total["cost"] is None else f"${total['cost']:.4f}"
    files = ("testset.jsonl", "qrels.txt", "qrels_docs.txt", "queries.tsv", "chunks.jsonl")
    print(
        terminal_text(
            f"{counted(len(result.items), 'question')}; {counted(total['requests'], 'request')}, "
            f"{counted(total['cache_hits'], 'cache hit')}, "
            f"{total['prompt_tokens'] + total['completion_tokens']:,} tokens, {cost}; "
            f"wrote {written(out, *files, 'rejected.jsonl', 'manifest.json')}"
        )
    )
    if result.shortfall:
        short = json.dumps(result.shortfall)
        why = (
            "the budget was reached"
            if result.budget_reached
            else "the corpus or the rounds ran out"
        )
        print(terminal_text(f"SHORT of the requested questions ({why}): {short}"), file=sys.stderr)

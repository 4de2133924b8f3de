"""`judge traces extract` and `judge eval` on trace files as a user runs them, the TREC
runs of the retrieval spans, the selection of traces (sample by day, --since, judged
before), and the streaming assembly's bounds."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from judge.ir.trec import read_run
from judge.run.output_folder import OutputFolder
from judge.testing import heuristic_judge
from judge.traces.assemble import AssemblyCounts, assemble
from judge.traces.extract import DaySample, read_rows, sample_key
from judge.traces.otlp import read_requests
from judge.traces.spans import Span
from tests.helpers.cli import run
from tests.helpers.rag_spans import KIND, documents, scenarios
from tests.helpers.traces import export, write_json_lines

DAY = 86_400 * 10**9
START = 1_796_000_000 * 10**9  # 2026-11-30


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(scenarios(provider)), batch=4)
    folder = tmp_path_factory.mktemp("extract")
    return {"ids": ids, "path": write_json_lines(bodies, folder / "traces.jsonl")}


def dated_traces(provider, per_day: dict[int, int]) -> None:
    """per_day[d] traces on day d after START, each a CHAIN with one retriever."""
    from opentelemetry.trace import set_span_in_context

    tracer = provider.get_tracer("dated")
    for day, count in per_day.items():
        for i in range(count):
            t = START + day * DAY + i * 10**9
            root = tracer.start_span("RAG", start_time=t)
            root.set_attribute(KIND, "CHAIN")
            root.set_attribute("input.value", f"question {day}-{i}")
            child = tracer.start_span("retrieve", context=set_span_in_context(root), start_time=t)
            child.set_attribute(KIND, "RETRIEVER")
            child.set_attributes(documents("retrieval.documents", [f"d{i % 8}"], [1.0]))
            child.end(end_time=t + 10**6)
            root.set_attribute("output.value", f"answer {day}-{i}")
            root.end(end_time=t + 2 * 10**6)


@pytest.fixture(scope="module")
def dated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    bodies = export(lambda provider: dated_traces(provider, {0: 60, 1: 30, 2: 10}), batch=50)
    return write_json_lines(bodies, tmp_path_factory.mktemp("dated") / "days.jsonl")


def test_extract_writes_rows_skipped_and_runs(made, tmp_path):
    out = tmp_path / "out" / "rows.jsonl"
    done = run(
        "traces", "extract", made["path"], "-o", out, "--run", tmp_path / "run.trec",
        "--retriever-run", tmp_path / "retriever.trec",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "6 traces (17 spans) read: 3 rows" in done.stdout
    assert "3 traces skipped (1 no_input, 1 no_output, 1 no_retriever)" in done.stdout
    rows = jsonl(out)
    skipped = jsonl(out.parent / "skipped.jsonl")  # the default: beside --out
    assert len(rows) == 3
    assert {s["reason"] for s in skipped} == {"no_input", "no_output", "no_retriever"}
    assert all(set(s) == {"trace_id", "reason", "message"} for s in skipped)
    ids = made["ids"]
    assert {s["trace_id"] for s in skipped} == {
        ids["custom"],
        ids["no_output"],
        ids["no_retriever"],
    }


def test_the_trec_runs_hold_the_spans_ids_in_the_spans_order(made, tmp_path):
    out, generator_run, retriever_run = (
        tmp_path / "rows.jsonl",
        tmp_path / "g.trec",
        tmp_path / "r.trec",
    )
    done = run(
        "traces", "extract", made["path"], "-o", out, "--run", generator_run,
        "--retriever-run", retriever_run,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    spans = [s for batch in read_requests(made["path"]) for s in batch]
    ranked = {}  # the ids in each retrieval span, straight from the attributes
    for span in spans:
        kind = span.attributes.get(KIND)
        prefix = {"RETRIEVER": "retrieval.documents", "RERANKER": "reranker.output_documents"}
        if kind in prefix:
            n = 0
            ids = []
            while f"{prefix[kind]}.{n}.document.id" in span.attributes:
                ids.append(span.attributes[f"{prefix[kind]}.{n}.document.id"])
                n += 1
            ranked.setdefault(span.trace_id, []).append((span.start_ns, kind, ids))

    def in_rank_order(scores: dict[str, float]) -> list[str]:
        return sorted(scores, key=lambda d: -scores[d])

    generator, retriever = read_run(generator_run), read_run(retriever_run)
    rows = {r["id"]: r for r in jsonl(out)}
    assert set(generator) == set(retriever) == set(rows)
    for trace_id in rows:
        lists = [ids for _, _, ids in sorted(ranked[trace_id])]
        kinds = [kind for _, kind, _ in sorted(ranked[trace_id])]
        if "RERANKER" in kinds:
            assert in_rank_order(generator[trace_id]) == lists[kinds.index("RERANKER")]
        firsts = list(
            dict.fromkeys(
                i for ids, k in zip(lists, kinds, strict=True) if k == "RETRIEVER" for i in ids
            )
        )
        assert in_rank_order(retriever[trace_id]) == firsts
        assert in_rank_order(generator[trace_id]) == rows[trace_id]["retrieved_ids"]
    reranked = made["ids"]["reranked"]
    assert in_rank_order(generator[reranked]) == ["d4", "d2"]
    assert in_rank_order(retriever[reranked]) == ["d2", "d3", "d4", "d5"]


def test_judge_ir_scores_the_run_against_qrels_keyed_by_trace_id(made, tmp_path):
    out, generator_run = tmp_path / "rows.jsonl", tmp_path / "g.trec"
    assert run("traces", "extract", made["path"], "-o", out, "--run", generator_run).returncode == 0
    ids = made["ids"]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(
        f"{ids['plain']} 0 d1 1\n{ids['reranked']} 0 d4 1\n{ids['two_retrievers']} 0 d6 1\n"
    )
    done = run("ir", qrels, generator_run, "-m", "mrr", "--per-query", "--format", "json")
    assert done.returncode == 0, done.stderr
    per_query = {q: v["mrr"] for q, v in json.loads(done.stdout)["per_query"].items()}
    assert per_query == {ids["plain"]: 1.0, ids["reranked"]: 1.0, ids["two_retrievers"]: 1 / 3}


def test_custom_map_on_the_command_line(made, tmp_path):
    out = tmp_path / "rows.jsonl"
    done = run(
        "traces", "extract", made["path"], "-o", out, "--map", "question=app.query",
        "--map", "answer=app.answer", "--map", "retrieved_ids=app.doc_ids",
        "--map", "contexts=app.doc_texts",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = jsonl(out)
    assert row["id"] == made["ids"]["custom"] and row["retrieved_ids"] == ["d3", "d1"]
    bad = run("traces", "extract", made["path"], "-o", out, "--map", "query=app.query")
    assert bad.returncode == 2 and "--map 'query=app.query': 'query' is not one of" in bad.stderr


def test_a_sample_is_stratified_by_day_and_reproducible(dated, tmp_path):
    def sample(seed: int, path: Path = dated) -> list[dict]:
        out = tmp_path / f"s{seed}.jsonl"
        done = run("traces", "extract", path, "-o", out, "--sample", "10", "--seed", seed)
        assert done.returncode == 0, done.stderr
        assert "90 traces left out of the sample" in done.stdout
        return jsonl(out)

    first = sample(1)
    assert Counter(r["start_time"][:10] for r in first) == {
        "2026-11-30": 6,
        "2026-12-01": 3,
        "2026-12-02": 1,
    }
    assert sample(1) == first  # the same seed, the same sample
    assert [r["id"] for r in sample(2)] != [r["id"] for r in first]
    # The sample does not depend on the order of the traces in the files.
    lines = dated.read_text().splitlines()
    reversed_file = tmp_path / "reversed.jsonl"
    reversed_file.write_text("\n".join(reversed(lines)) + "\n")
    assert sample(1, reversed_file) == first
    # Within a day, the traces of lowest key are chosen.
    day2 = [r for r in jsonl(tmp_path / "s1.jsonl") if r["start_time"].startswith("2026-12-02")]
    all_day2 = [r for r in read_rows(dated) if r["start_time"].startswith("2026-12-02")]
    assert day2[0]["id"] == min(all_day2, key=lambda r: sample_key(1, r["id"]))["id"]


def test_day_quotas_add_up_by_largest_remainders():
    sample = DaySample(5, seed=0)
    sample.counts.update({"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1})
    assert sum(sample.quotas().values()) == 5
    sample = DaySample(50, seed=0)
    sample.counts.update({"a": 3, "b": 4})
    assert sample.quotas() == {"a": 3, "b": 4}  # fewer rows than asked: all of them


def test_since_and_judged_before_leave_traces_out(dated, tmp_path):
    first = tmp_path / "day1.jsonl"
    done = run("traces", "extract", dated, "-o", first, "--since", "2026-12-01T00:00:00Z")
    assert done.returncode == 0, done.stderr
    assert "60 traces started before --since" in done.stdout
    rows = jsonl(first)
    assert len(rows) == 40 and min(r["start_time"] for r in rows) >= "2026-12-01"
    # A daily job: what was extracted (or judged) before is left out the next time.
    again = tmp_path / "new.jsonl"
    done = run("traces", "extract", dated, "-o", again, "--judged", first)
    assert done.returncode == 0, done.stderr
    assert "40 traces judged before" in done.stdout
    assert len(jsonl(again)) == 60
    assert not {r["id"] for r in jsonl(again)} & {r["id"] for r in rows}
    bad = run("traces", "extract", dated, "-o", again, "--since", "yesterday")
    assert bad.returncode == 2 and "--since yesterday: give an ISO 8601" in bad.stderr


def test_judge_eval_reads_a_trace_file_and_only_new_traces_are_judged_next(
    made, dated, tmp_path, fake_llm_server
):
    fake_llm_server.chat = heuristic_judge
    common = ["--model", "openai/judge", "--api-base", fake_llm_server.base_url, "--api-key", "k"]
    common += [
        "--cache",
        str(tmp_path / "cache.sqlite"),
        "--no-progress",
        "--metrics",
        "faithfulness",
    ]
    done = run("eval", made["path"], "--out", tmp_path / "out", *common)
    assert done.returncode == 0, done.stderr
    assert (
        "judge: traces: 3 traces skipped (1 no_input, 1 no_output, 1 no_retriever)" in done.stderr
    )
    results = jsonl(tmp_path / "out" / "results.jsonl")
    assert sorted(r["id"] for r in results) == sorted(
        made["ids"][k] for k in ("plain", "reranked", "two_retrievers")
    )
    assert all(r["scores"]["faithfulness"] is not None for r in results)
    # The next day's job: extract only the traces not in that run's results.
    new = tmp_path / "new.jsonl"
    done = run("traces", "extract", made["path"], "-o", new, "--judged", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert "3 traces judged before" in done.stdout and jsonl(new) == []
    # ... or of every run the run store recorded, or of one run by its id
    done = run("traces", "extract", made["path"], "-o", new, "--judged-runs")
    assert done.returncode == 0, done.stderr
    assert "3 traces judged before" in done.stdout and jsonl(new) == []
    (recorded,) = json.loads(run("runs", "list", "--json").stdout)
    done = run("traces", "extract", made["path"], "-o", new, "--judged", recorded["id"])
    assert "3 traces judged before" in done.stdout and jsonl(new) == []
    absent = run("traces", "extract", made["path"], "-o", new, "--judged", "nosuch")
    assert absent.returncode == 2 and "no run 'nosuch' in" in absent.stderr
    # --from otlp on a file that is not a trace file is a clear error.
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text('{"question": "q", "answer": "a", "contexts": ["c"]}\n')
    bad = run("eval", rows_file, "--from", "otlp", "--out", tmp_path / "o2", *common)
    assert bad.returncode == 2 and "not an OTLP trace file" in bad.stderr


def span(trace: int, sid: int, parent: int | None) -> Span:
    return Span(
        f"{trace:032x}", f"{sid:016x}", None if parent is None else f"{parent:016x}", "s", 0, 0, {}
    )


def test_assembly_emits_each_trace_soon_after_its_root_memory_stays_flat():
    read = []

    def batches():  # each trace: two children, then its root (the order spans end in)
        for t in range(1, 2001):
            read.append(t)
            yield [span(t, 3 * t + 1, 3 * t), span(t, 3 * t + 2, 3 * t), span(t, 3 * t, None)]

    for trace in assemble(batches(), linger=30):
        number = int(trace.trace_id, 16)
        assert len(trace.spans) == 3 and trace.root is not None
        assert read[-1] - number <= 11  # held for 30 spans (10 traces) after its root, no more


def test_spans_split_over_requests_late_spans_and_missing_roots_are_counted():
    counts = AssemblyCounts()
    batches = [
        [span(1, 11, 10)],  # a child before its root, in another request
        [span(1, 10, None), span(2, 21, 20)],  # trace 2's root never comes
        [span(3, 30, None)],
        [span(1, 12, 10)],  # after trace 1 was emitted (linger 2): late
    ]
    traces = list(assemble(batches, linger=2, counts=counts))
    by_id = {int(t.trace_id, 16): t for t in traces}
    assert len(by_id[1].spans) == 2 and by_id[1].root is not None
    assert by_id[2].root is not None and by_id[2].missing_parent == f"{20:016x}"
    assert counts.late_spans == 1 and counts.spans == 5


def test_extract_never_writes_over_a_trace_file_it_reads(made, tmp_path):
    before = made["path"].read_bytes()
    done = run(
        "traces", "extract", made["path"], "-o", tmp_path / "rows.jsonl", "--run", made["path"]
    )
    assert done.returncode == 2 and "is a trace file being read" in done.stderr
    assert made["path"].read_bytes() == before


def files(folder: Path) -> dict[str, bytes]:
    """A folder's files by name, the lock and temporary files left out."""
    return {
        p.name: p.read_bytes()
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".")
    }


def test_extract_into_a_folder_another_run_is_writing_is_refused(made, tmp_path):
    out = tmp_path / "out"
    first = run("traces", "extract", made["path"], "-o", out / "a.jsonl")
    assert first.returncode == 0, first.stderr
    before = files(out)
    assert set(before) == {"a.jsonl", "skipped.jsonl"}
    with OutputFolder(out):  # another judge run holds the folder while this one starts
        done = run("traces", "extract", made["path"], "-o", out / "b.jsonl")
    assert done.returncode == 2, done.stderr
    assert "another judge run" in done.stderr and str(out) in done.stderr
    assert files(out) == before  # the first run's skipped.jsonl stays as it was


def test_an_extract_that_fails_leaves_the_files_before_it_whole(made, dated, tmp_path):
    out, trec = tmp_path / "rows.jsonl", tmp_path / "run.trec"
    first = run("traces", "extract", dated, "-o", out, "--run", trec)
    assert first.returncode == 0, first.stderr
    before = files(tmp_path)
    damaged = tmp_path / "in" / "damaged.jsonl"
    damaged.parent.mkdir()
    damaged.write_bytes(made["path"].read_bytes() + b"{not json\n")
    done = run("traces", "extract", damaged, "-o", out, "--run", trec)
    assert done.returncode == 2, done.stderr
    # Nothing half-written: the outputs are the first run's, and no temporary file is left.
    assert files(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".judge-out-")] == []


def test_extract_never_writes_over_a_file_of_traces_judged_before(made, tmp_path):
    judged = tmp_path / "judged.jsonl"
    judged.write_text('{"trace_id": "abc"}\n', encoding="utf-8")
    folder = tmp_path / "before"
    folder.mkdir()
    (folder / "results.jsonl").write_text('{"id": "def"}\n', encoding="utf-8")
    for written, source in (
        (["-o", judged], judged),
        (["-o", tmp_path / "rows.jsonl", "--skipped", judged], judged),
        (["-o", folder / "results.jsonl"], folder),
    ):
        before = {p: p.read_bytes() for p in (judged, folder / "results.jsonl")}
        done = run("traces", "extract", made["path"], *written, "--judged", source)
        assert done.returncode == 2, done.stderr
        assert "judged before" in done.stderr and "being read" in done.stderr
        assert {p: p.read_bytes() for p in before} == before

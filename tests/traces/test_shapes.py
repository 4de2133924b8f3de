"""Trace shapes met in production, made by the real OpenTelemetry SDK: a root whose parent
is remote, top-level siblings (Langfuse's low-level SDK), spans sent twice, a child that
ends after its root, two rounds of retrieval; and how the assembly bounds the traces it
holds."""

from __future__ import annotations

import json

import pytest

from judge.traces.assemble import AssemblyCounts, assemble
from judge.traces.extract import ExtractSummary, read_rows
from judge.traces.otlp import read_requests
from judge.traces.rows import Skip
from judge.traces.spans import Span
from tests.helpers.rag_spans import DOCS, scenarios, shapes
from tests.helpers.traces import export, langfuse_observations, write_json_lines


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(shapes(provider)), batch=3)
    folder = tmp_path_factory.mktemp("shapes")
    return {"ids": ids, "bodies": bodies, "path": write_json_lines(bodies, folder / "t.jsonl")}


def rows_of(paths, **options) -> tuple[dict[str, dict], list[Skip], ExtractSummary]:
    skipped: list[Skip] = []
    summary = ExtractSummary()
    read = read_rows(paths, on_skip=skipped.append, summary=summary, **options)
    rows = {r["id"]: r for r in read}
    return rows, skipped, summary


def test_every_shape_gives_a_row(made):
    rows, skipped, summary = rows_of(made["path"])
    assert skipped == []
    assert set(rows) == set(made["ids"].values()) and summary.rows == 5


def test_a_root_whose_parent_is_remote_gives_a_row(made):
    rows, _, _ = rows_of(made["path"])
    row = rows[made["ids"]["remote_parent"]]
    assert row["question"] == "How long is river 1?" and row["retrieved_ids"] == ["d1"]


def test_the_sdk_marks_the_remote_parent_in_the_span_flags(made):
    spans = [s for batch in read_requests(made["path"]) for s in batch]
    remote = [s for s in spans if s.trace_id == made["ids"]["remote_parent"] and s.parent_remote]
    assert [s.name for s in remote] == ["RAG"]
    assert not any(s.parent_remote for s in spans if s.trace_id != made["ids"]["remote_parent"])


def test_a_remote_parent_without_flags_is_found_after_the_trace_lingers(made, tmp_path):
    """Older SDKs and other producers leave `flags` unset: the root is then the span whose
    parent is not in the trace, known once no span of the trace came for `linger` spans."""
    lines = made["path"].read_text(encoding="utf-8").splitlines()
    unflagged = tmp_path / "unflagged.jsonl"
    unflagged.write_text(
        "".join(line.replace('"flags"', '"unused"') + "\n" for line in lines), encoding="utf-8"
    )
    reference, _, _ = rows_of(made["path"])
    rows, skipped, _ = rows_of(unflagged, linger=4)
    assert skipped == [] and rows == reference


def test_a_child_that_ends_after_its_root_counts_in_the_latency(made):
    rows, _, _ = rows_of(made["path"])
    row = rows[made["ids"]["child_after_root"]]
    assert row["retrieved_ids"] == ["d3"]
    spans = [
        s
        for batch in read_requests(made["path"])
        for s in batch
        if s.trace_id == made["ids"]["child_after_root"]
    ]
    first = min(s.start_ns for s in spans)
    last = max(s.end_ns for s in spans)
    assert row["latency_s"] == round((last - first) / 1e9, 6)
    assert last > max(s.end_ns for s in spans if s.parent_id is None)  # the child ended later


def test_a_reranker_then_a_second_retriever_gives_both(made):
    rows, _, _ = rows_of(made["path"])
    row = rows[made["ids"]["two_rounds"]]
    assert row["retrieved_ids"] == ["d2", "d5", "d6"]
    assert row["contexts"] == [DOCS["d2"], DOCS["d5"], DOCS["d6"]]
    assert [r["kind"] for r in row["retrievals"]] == ["RETRIEVER", "RERANKER", "RETRIEVER"]


def test_a_nested_retriever_and_reranker_after_a_query_rewrite(made):
    rows, _, _ = rows_of(made["path"])
    row = rows[made["ids"]["nested"]]
    assert row["question"] == "How long is river 4?" and row["answer"] == "River 4 is 400 km long."
    assert row["retrieved_ids"] == ["d4", "d2"]


def test_spans_read_twice_are_counted_once(made, tmp_path):
    reference, _, once = rows_of(made["path"])
    lines = made["path"].read_text(encoding="utf-8").splitlines()
    each_twice = tmp_path / "retried.jsonl"  # a collector retry: each request sent twice
    each_twice.write_text("".join(f"{line}\n{line}\n" for line in lines), encoding="utf-8")
    for paths in ([made["path"], made["path"]], [each_twice]):
        rows, skipped, summary = rows_of(paths)
        assert skipped == [] and rows == reference
        assert summary.duplicate_spans == once.spans and summary.late_spans == 0
        assert any("read twice" in line for line in summary.lines())


def test_a_file_given_twice_after_its_traces_were_emitted_is_counted_not_multiplied(made):
    reference, _, once = rows_of(made["path"])
    rows, _, summary = rows_of([made["path"], made["path"]], linger=2)
    assert rows == reference
    assert summary.duplicate_spans + summary.late_spans == once.spans


def test_deep_duplicates_do_not_multiply_tokens_or_retrievals(tmp_path):
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(scenarios(provider)), batch=4)
    path = write_json_lines(bodies, tmp_path / "t.jsonl")
    reference, _, _ = rows_of(path)
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text(path.read_text(encoding="utf-8") * 2, encoding="utf-8")
    rows, _, _ = rows_of(doubled)
    row = rows[ids["plain"]]
    assert (
        row["token_counts"]
        == reference[ids["plain"]]["token_counts"]
        == {
            "prompt": 50,
            "completion": 10,
            "total": 60,
        }
    )
    assert len(row["retrievals"]) == 1


def test_langfuse_top_level_siblings_are_walked_as_one_forest(tmp_path):
    """Langfuse's low-level SDK makes every observation of a trace top-level: none has a
    parent. Each is a root of the trace's forest, in start order."""
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(scenarios(provider)), batch=4)
    observations = langfuse_observations(bodies)
    for item in observations:
        item["parentObservationId"] = None
    path = tmp_path / "observations.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    rows, skipped, _ = rows_of(path, source="langfuse")
    row = rows.get(ids["reranked"])
    plain = rows[ids["plain"]]
    assert plain["question"] == "How long is river 1?"
    assert plain["retrieved_ids"] == ["d1", "d2", "d3"]
    assert plain["token_counts"]["total"] == 60
    assert row is not None and sorted(s.reason for s in skipped) == [
        "no_input",
        "no_output",
        "no_retriever",
    ]


def span(trace: int, sid: int, parent: int | None) -> Span:
    return Span(
        f"{trace:032x}", f"{sid:016x}", None if parent is None else f"{parent:016x}", "s", 0, 0, {}
    )


def test_a_trace_without_a_parentless_span_is_not_held_to_the_end():
    """Each trace's spans have a parent that is never read: each trace is emitted once
    `linger` spans came after its last span, its root the span whose parent is missing."""
    read: list[int] = []

    def batches():
        for t in range(1, 2001):
            read.append(t)
            yield [span(t, 3 * t + 1, 3 * t), span(t, 3 * t + 2, 3 * t), span(t, 3 * t, 99)]

    for trace in assemble(batches(), linger=30):
        number = int(trace.trace_id, 16)
        assert len(trace.spans) == 3 and trace.root is not None
        assert trace.root.span_id == f"{3 * number:016x}"
        assert read[-1] - number <= 11


def test_a_trace_cut_off_above_is_skipped_as_no_root_with_the_missing_parent(tmp_path):
    counts = AssemblyCounts()
    traces = list(assemble([[span(2, 21, 20), span(2, 22, 21)]], linger=2, counts=counts))
    assert len(traces) == 1 and traces[0].root is not None
    assert traces[0].root.span_id == f"{21:016x}" and traces[0].missing_parent == f"{20:016x}"

"""`judge traces hops` on agent traces made by the real OpenTelemetry SDK (exported by its
OTLP/HTTP exporter, written in the collector's formats and as Phoenix's dataframe): per-hop
metrics equal `judge ir` on the per-hop TREC files, the diagnosis of hand-checked traces,
and the tool calls against the expected ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.ir.trec import write_qrels
from judge.metrics.tools import parse_tool_calls
from judge.traces import openinference as oi
from judge.traces.extract import read_rows
from judge.traces.hops import hops, read_agent_traces, read_labels
from tests.helpers.agent_spans import agent_scenarios
from tests.helpers.cli import run
from tests.helpers.traces import export, phoenix_frame, write_json_lines, write_prefixed

QRELS = {
    "kept": {"d1": 1, "d5": 2},
    "lost": {"d6": 1, "d0": 1},
    "listed": {"d5": 1},
    "unrecorded": {"d1": 1},
    "missed": {"d7": 1},
}
BIG = {"a": 1.0, "rows": [{"s": "x" * 20, "w": 1, "n": i} for i in range(3000)]}
EXPECTED_TOOLS = {
    "kept": [
        {"name": "search_web", "arguments": {"q": "river 1"}},
        {"name": "calculator", "arguments": {"expr": "2+2"}},
    ],
    "lost": [
        {"name": "search_web", "arguments": {"q": "river 1"}},
        {"name": "calculator", "arguments": {"expr": "1+1"}},
    ],
    "listed": [{"name": "search_web", "arguments": {"q": "x"}}],
    "unrecorded": [{"name": "load_table", "arguments": BIG}],
    "missed": [],
}
METRICS = ["P@5", "recall@10", "ndcg@10", "map", "mrr"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The scenarios' traces as OTLP/JSON lines, with qrels and expected tools by trace id
    and a test set of the same labels by question."""
    ids: dict[str, str] = {}
    bodies = export(lambda provider: ids.update(agent_scenarios(provider)), batch=5)
    folder = tmp_path_factory.mktemp("agents")
    traces = write_json_lines(bodies, folder / "traces.jsonl")
    qrels = folder / "qrels.txt"
    write_qrels({ids[name]: grades for name, grades in QRELS.items()}, qrels)
    tools = folder / "expected_tools.jsonl"
    tools.write_text(
        "".join(
            json.dumps({"trace_id": ids[name], "expected_tools": calls}) + "\n"
            for name, calls in EXPECTED_TOOLS.items()
        ),
        encoding="utf-8",
    )
    questions = {r["id"]: r["question"] for r in read_rows(traces)}
    test_set = folder / "testset.jsonl"
    test_set.write_text(
        "".join(
            json.dumps(
                {
                    "question": questions[ids[name]],
                    "relevance": QRELS[name],
                    "expected_tools": EXPECTED_TOOLS[name],
                }
            )
            + "\n"
            for name in QRELS
        ),
        encoding="utf-8",
    )
    return {
        "ids": ids,
        "bodies": bodies,
        "traces": traces,
        "qrels": qrels,
        "tools": tools,
        "test_set": test_set,
        "folder": folder,
    }


def report_of(made: dict, path: Path | None = None, **labels):
    labels = labels or {"qrels": made["qrels"], "expected_tools": made["tools"]}
    traces = read_agent_traces(path or made["traces"])
    return hops(traces, read_labels(**labels), METRICS)


def by_name(made: dict, report) -> dict[str, dict]:
    names = {trace: name for name, trace in made["ids"].items()}
    return {names[r["trace_id"]]: r for r in report.traces}


def test_each_retriever_span_is_a_hop_in_start_order(made):
    records = by_name(made, report_of(made))
    assert [h["ids"] for h in records["kept"]["hops"]] == [["d1", "d2", "d3"], ["d4", "d1"]]
    assert [h["ids"] for h in records["lost"]["hops"]] == [["d2", "d6"], ["d3"], ["d7", "d0"]]
    # The same rankings as `judge traces extract` records of the retriever spans.
    rows = {r["id"]: r for r in read_rows(made["traces"])}
    for name, trace in made["ids"].items():
        extracted = [r["ids"] for r in rows[trace]["retrievals"]]
        assert [h["ids"] for h in records[name]["hops"]] == extracted


def test_the_diagnosis_of_hand_checked_traces(made):
    records = by_name(made, report_of(made))

    def diagnosis(name: str) -> tuple:
        r = records[name]
        return r["first_gold_hop"], r["lost_at_hop"], r["lost"], r["generator_saw_gold"]

    # d1 at hops 1 and 2, and its content is in the prompt: found at 1, never lost.
    assert diagnosis("kept") == (1, None, [], True)
    assert records["kept"]["reasons"] == {"lost_at_hop": "none_lost"}
    # d6 only at hop 1, d0 only at hop 3, the prompt holds d3 and d7: lost after 1 and 3.
    assert diagnosis("lost") == (
        1,
        1,
        [{"doc_id": "d6", "hop": 1}, {"doc_id": "d0", "hop": 3}],
        False,
    )
    # The generator lists d2 by id (input.documents): d5, at hops 1 and 2, lost after 2.
    assert diagnosis("listed") == (1, 2, [{"doc_id": "d5", "hop": 2}], False)
    # The LLM span records no input: found at hop 1, the rest unknown, with why.
    assert diagnosis("unrecorded") == (1, None, [], None)
    assert records["unrecorded"]["reasons"] == {
        "lost_at_hop": "no_generator_input",
        "generator_saw_gold": "no_generator_input",
    }
    # No hop retrieved d7: nothing found or lost; whether the prompt holds d7 cannot be
    # told (its content was never recorded).
    assert diagnosis("missed") == (None, None, [], None)
    assert records["missed"]["reasons"] == {
        "first_gold_hop": "no_gold_retrieved",
        "lost_at_hop": "no_gold_retrieved",
        "generator_saw_gold": "no_document_contents",
    }
    assert records["unlabelled"]["reasons"] == {"relevance": "no_relevance_judgments"}
    assert "first_gold_hop" not in records["unlabelled"]
    assert records["lost"]["gold"] == ["d0", "d6"]
    assert [h["gold"] for h in records["lost"]["hops"]] == [["d6"], [], ["d0"]]


def test_the_table_per_hop_by_hand(made):
    report = report_of(made)
    table = {row.hop: row for row in report.per_hop}
    assert sorted(table) == [1, 2, 3]
    assert [table[h].traces for h in (1, 2, 3)] == [5, 4, 1]  # the labelled traces with hop h
    assert [table[h].gold_found for h in (1, 2, 3)] == [4, 2, 1]
    # recall@10: hop 1 (.5 + .5 + 1 + 1 + 0) / 5; hop 2 (.5 + 0 + 1 + 0) / 4; hop 3 .5.
    assert table[1].metrics["recall@10"] == pytest.approx(0.6)
    assert table[2].metrics["recall@10"] == pytest.approx(0.375)
    assert table[3].metrics["recall@10"] == pytest.approx(0.5)
    assert table[1].metrics["P@5"] == pytest.approx(0.16)  # one gold in the top 5 of four


def test_per_hop_metrics_equal_judge_ir_on_the_per_hop_trec_runs(made, tmp_path):
    out = tmp_path / "hops"
    done = run(
        "traces", "hops", made["traces"], "--qrels", made["qrels"], "-m", ",".join(METRICS),
        "--trec-runs", out, "-o", tmp_path / "hops.jsonl", "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert [row["hop"] for row in summary["per_hop"]] == [1, 2, 3]
    for row in summary["per_hop"]:
        hop = row["hop"]
        ir = run(
            "ir", out / f"hop-{hop}.qrels", out / f"hop-{hop}.run", "-m", ",".join(METRICS),
            "--format", "json", "--per-query",
        )  # fmt: skip
        assert ir.returncode == 0, ir.stderr
        scored = json.loads(ir.stdout)
        assert scored["metrics"] == row["metrics"]  # exactly, not approximately
        assert scored["num_queries"] == row["traces"]
        records = [json.loads(line) for line in (tmp_path / "hops.jsonl").read_text().splitlines()]
        for record in records:
            if "gold" in record and len(record["hops"]) >= hop:
                assert record["hops"][hop - 1]["metrics"] == scored["per_query"][record["trace_id"]]
    # qid = trace id; the hop is the file: a run holds each trace once, at most.
    lines = (out / "hop-2.run").read_text().splitlines()
    assert {line.split()[0] for line in lines} <= set(made["ids"].values())
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "hop-1.qrels", "hop-1.run", "hop-2.qrels", "hop-2.run", "hop-3.qrels", "hop-3.run",
        "qrels",
    ]  # fmt: skip
    # Against every labelled trace, a trace without hop 2 scores 0 there (trec_eval -c), and
    # judge compare reads the hops' runs as it reads any two runs.
    whole = run("ir", out / "qrels", out / "hop-2.run", "-m", "recall@10", "--format", "json")
    assert json.loads(whole.stdout)["num_queries"] == 5
    assert json.loads(whole.stdout)["metrics"]["recall@10"] == pytest.approx(1.5 / 5)
    compared = run("compare", "--qrels", out / "qrels", out / "hop-1.run", out / "hop-2.run")
    assert compared.returncode == 0, compared.stderr


def test_a_second_report_with_fewer_hops_leaves_no_stale_hop_file(made, tmp_path):
    out = tmp_path / "hops"
    args = ["traces", "hops", made["traces"], "--trec-runs", out]
    assert run(*args, "--qrels", made["qrels"]).returncode == 0
    (out / "mine.txt").write_text("kept")
    only_first = tmp_path / "first.qrels"
    write_qrels({made["ids"]["missed"]: {"d7": 1}}, only_first)
    assert run(*args, "--qrels", only_first).returncode == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "hop-1.qrels",
        "hop-1.run",
        "mine.txt",
        "qrels",
    ]


def test_labels_by_question_give_what_labels_by_trace_id_give(made):
    by_id = by_name(made, report_of(made))
    by_question = by_name(made, report_of(made, rows=made["test_set"]))
    assert by_question == by_id


def test_tool_calls_against_the_expected_ones(made):
    records = by_name(made, report_of(made))

    def scores(name: str) -> dict:
        return records[name]["tools"]["scores"]

    # Both called, one with other arguments (2+2 expected, 1+1 given).
    assert scores("kept") == {
        "tool_call_precision": 1.0,
        "tool_call_recall": 1.0,
        "tool_argument_match": 0.5,
        "tool_call_order": 1.0,
    }
    # Both called with the expected arguments, in the reverse order.
    assert scores("lost")["tool_argument_match"] == 1.0
    assert scores("lost")["tool_call_order"] == 0.5
    # Malformed JSON arguments, a span without a name, then the right call.
    assert scores("listed") == {
        "tool_call_precision": pytest.approx(1 / 3),
        "tool_call_recall": 1.0,
        "tool_argument_match": 1.0,
        "tool_call_order": 1.0,
    }
    assert records["listed"]["tools"]["calls"] == [
        {"name": "search_web", "note": "arguments_not_json", "expected": None},
        {"name": None, "note": "no_name", "expected": None},
        {"name": "search_web", "expected": 0, "arguments_match": True},
    ]
    # A huge argument object equal as JSON (keys in another order, 1.0 for 1).
    assert scores("unrecorded")["tool_argument_match"] == 1.0
    # A GenAI execute_tool span when no tool was expected: precision 0, the rest NaN.
    assert records["missed"]["tools"]["calls"] == [{"name": "search_web", "expected": None}]
    assert scores("missed")["tool_call_precision"] == 0.0
    assert scores("missed")["tool_call_recall"] is None
    assert records["missed"]["tools"]["reasons"]["tool_call_recall"] == "empty_expected_tools"
    assert records["unlabelled"]["tools"]["reasons"] == dict.fromkeys(
        ["tool_call_precision", "tool_call_recall", "tool_argument_match", "tool_call_order"],
        "no_expected_tools",
    )
    summary = report_of(made).tools
    assert summary["tool_call_precision"]["mean"] == pytest.approx((3 + 1 / 3) / 5)
    assert summary["tool_call_precision"]["traces"] == 5
    assert summary["tool_call_recall"]["reasons"] == {
        "empty_expected_tools": 1,
        "no_expected_tools": 1,
    }


@pytest.mark.parametrize("kind", ["proto", "phoenix"])
def test_every_trace_format_gives_the_same_report(made, kind, tmp_path):
    if kind == "proto":
        path = write_prefixed(made["bodies"], tmp_path / "traces.pb")
    else:
        path = tmp_path / "spans.parquet"
        phoenix_frame(made["bodies"]).to_parquet(path)
    assert by_name(made, report_of(made, path)) == by_name(made, report_of(made))


def test_the_text_report_names_the_hops_and_the_diagnosis(made):
    done = run(
        "traces", "hops", made["traces"], "--rows", made["test_set"], "-m", "recall@10",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["hop", "traces", "gold_found", "recall@10"]
    assert lines[1].split() == ["1", "5", "4", "0.6000"]
    assert "first gold document retrieved at hop 1: 4; never: 1 (of 5 labelled traces)" in lines
    assert "gold document lost after hop 1: 1, hop 2: 1" in lines
    assert any(line.startswith("tool calls: tool_call_precision 0.6667 (n=5)") for line in lines)


def test_no_labels_is_refused_with_what_to_give(made):
    done = run("traces", "hops", made["traces"])
    assert done.returncode == 2
    assert "--qrels FILE" in done.stderr and "--rows FILE" in done.stderr


def test_the_conventions_names_are_the_packages():
    from openinference.semconv.trace import SpanAttributes
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    assert oi.TOOL_NAME == SpanAttributes.TOOL_NAME
    assert oi.INPUT_DOCUMENTS == SpanAttributes.INPUT_DOCUMENTS
    assert oi.LLM_INPUT_MESSAGES == SpanAttributes.LLM_INPUT_MESSAGES
    assert oi.LLM_PROMPTS == SpanAttributes.LLM_PROMPTS
    assert oi.LLM_PROMPT_TEMPLATE_VARIABLES == SpanAttributes.LLM_PROMPT_TEMPLATE_VARIABLES
    assert oi.GEN_AI_TOOL_NAME == g.GEN_AI_TOOL_NAME
    assert oi.GEN_AI_TOOL_CALL_ARGUMENTS == g.GEN_AI_TOOL_CALL_ARGUMENTS


def test_a_trace_whose_ids_a_trec_file_cannot_hold_is_left_out_and_said(tmp_path):
    from tests.helpers.traces import rag_request

    path = tmp_path / "traces.jsonl"
    requests = [rag_request(0, doc_ids=("d1", "d 2")), rag_request(1, doc_ids=("d1",))]
    path.write_text("".join(json.dumps(r) + "\n" for r in requests), encoding="utf-8")
    qrels = {f"{n + 1:032x}": {"d1": 1} for n in range(2)}
    labels = read_labels()
    labels.relevance_by_trace.update(qrels)
    report = hops(read_agent_traces(path), labels, ["recall@10"])
    first, second = report.traces
    assert first["skipped"] == "unfit_id" and "d 2" in first["message"]
    assert "hops" not in first
    assert second["first_gold_hop"] == 1
    assert report.counts["unfit_id"] == 1
    assert [(row.hop, row.traces) for row in report.per_hop] == [(1, 1)]


def test_langfuse_tool_and_generation_observations_are_read(tmp_path):
    def observation(n: int, kind: str, name: str, **fields) -> dict:
        return {
            "id": f"o{n}", "traceId": "t1", "type": kind, "name": name,
            "parentObservationId": None if n == 0 else "o0",
            "startTime": f"2026-12-01T10:00:0{n}Z", "endTime": f"2026-12-01T10:00:0{n}.5Z",
            **fields,
        }  # fmt: skip

    docs = [{"id": "a", "page_content": "Alpha text."}, {"id": "b", "page_content": "Beta."}]
    observations = [
        observation(0, "SPAN", "agent", input="What is alpha?", output="Alpha."),
        observation(1, "RETRIEVER", "search", input="alpha", output=docs),
        observation(2, "TOOL", "lookup", input={"key": "alpha", "n": 1.0}),
        observation(3, "RETRIEVER", "search", input="beta", output=docs[1:]),
        observation(4, "GENERATION", "llm", input=[{"role": "user", "content": "Beta."}]),
    ]
    path = tmp_path / "observations.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in observations), encoding="utf-8")
    labels = read_labels()
    labels.relevance_by_trace["t1"] = {"a": 1}
    labels.tools_by_trace["t1"] = parse_tool_calls(
        [{"name": "lookup", "arguments": {"n": 1, "key": "alpha"}}]
    )
    (record,) = hops(read_agent_traces(path, source="langfuse"), labels, ["recall@10"]).traces
    assert [h["ids"] for h in record["hops"]] == [["a", "b"], ["b"]]
    assert (record["first_gold_hop"], record["lost_at_hop"]) == (
        1,
        1,
    )  # "Alpha text." not in the prompt
    assert record["generator_saw_gold"] is False
    assert record["tools"]["scores"]["tool_argument_match"] == 1.0


def test_rows_that_label_one_question_twice_differently_are_refused(tmp_path):
    from judge.errors import InputFormatError

    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps({"question": "Q?", "relevance": ["a"]}) + "\n"
        + json.dumps({"question": " Q? ", "relevance": ["b"]}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    with pytest.raises(InputFormatError, match="has two different labels"):
        read_labels(rows=rows)


def test_chunks_change_nothing(made):
    whole = report_of(made)
    labels = read_labels(qrels=made["qrels"], expected_tools=made["tools"])
    chunked = hops(read_agent_traces(made["traces"]), labels, METRICS, chunk=2)
    assert chunked.traces == whole.traces
    assert chunked.per_hop == whole.per_hop and chunked.tools == whole.tools
    assert chunked.to_dict() == whole.to_dict()


def test_the_records_may_go_in_the_folder_of_the_trec_files_under_a_name_of_their_own(
    made, tmp_path
):
    out = tmp_path / "hops"
    args = ["traces", "hops", made["traces"], "--qrels", made["qrels"], "--trec-runs", out]
    done = run(*args, "--output", out / "hops.jsonl")
    assert done.returncode == 0, done.stderr
    assert len((out / "hops.jsonl").read_text().splitlines()) == 6
    clash = run(*args, "--output", out / "hop-1.run")
    assert clash.returncode == 2 and "is a name --trec-runs writes there" in clash.stderr
    inside = run(*args[:-2], "--trec-runs", made["folder"])
    assert inside.returncode == 2 and "holds a file being read" in inside.stderr


def test_each_claim_is_attributed_to_the_hop_whose_document_supported_it(tmp_path):
    """A real `judge eval` of the trace file (faithfulness, the fake server's heuristic
    judge: a claim is supported by the first context holding all its words), then `judge
    traces hops --results`: one claim from hop 1's document, one from hop 2's, one
    supported by nothing."""
    from judge.testing import FakeLLMServer
    from tests.helpers.agent_spans import agent, generator, hop
    from tests.helpers.judging import judge_handler
    from tests.helpers.rag_spans import DOCS

    answer = f"{DOCS['d1']} {DOCS['d3']} The moon is made of cheese."
    ids: dict[str, str] = {}

    def produce(provider) -> None:
        t = provider.get_tracer("tests.claims")

        def body() -> None:
            hop(t, "river 1", ["d1", "d2"])
            hop(t, "river 3", ["d3"])
            generator(t, answer, prompt_docs=["d1", "d3"])

        ids["trace"] = agent(t, "Rivers 1 and 3?", body, answer=answer)

    traces = write_json_lines(export(produce), tmp_path / "traces.jsonl")
    with FakeLLMServer() as server:
        server.chat = judge_handler
        done = run(
            "eval", traces, "--model", "openai/judge", "--api-base", server.base_url,
            "--api-key", "k", "--cache", tmp_path / "cache.sqlite", "--out", tmp_path / "out",
            "--metrics", "faithfulness", "--no-progress", "--no-record",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = hops(read_agent_traces(traces), _claims_of(tmp_path / "out"), METRICS)
    (record,) = report.traces
    assert [(c["hop"], c["doc_id"], c.get("reason")) for c in record["claims"]] == [
        (1, "d1", None),
        (2, "d3", None),
        (None, None, "not_supported"),
    ]
    assert report.claims_by_hop == {1: 1, 2: 1, "not_supported": 1}
    shown = run("traces", "hops", traces, "--results", tmp_path / "out")
    assert shown.returncode == 0, shown.stderr
    assert "answer claims supported by hop 1: 1, hop 2: 1, not_supported: 1" in shown.stdout


def _claims_of(results: Path):
    from judge.traces.hops import read_claims

    labels = read_labels()
    read_claims(results, labels)
    return labels


def test_the_json_summary_counts_the_diagnosis(made, tmp_path):
    done = run("traces", "hops", made["traces"], "--qrels", made["qrels"], "--format", "json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["first_gold_hop"] == {"1": 4, "never": 1}
    assert summary["lost_at_hop"] == {"1": 1, "2": 1}
    assert summary["generator_saw_gold"] == {"true": 1, "false": 2, "none": 2}
    assert summary["generator_unknown"] == {"no_document_contents": 1, "no_generator_input": 1}
    assert summary["counts"] == {
        "labelled": 5, "no_relevance_judgments": 1, "traces": 6,
    }  # fmt: skip
    assert "tools" not in summary  # no expected tools given


def _custom_agent(provider) -> None:
    """An agent instrumented by hand: no OpenInference kinds; the question on the root span
    as app.query, each search's ranked ids as app.doc_ids (a list attribute)."""
    tracer = provider.get_tracer("custom-agent")
    with tracer.start_as_current_span("handle") as root:
        root.set_attribute("app.query", "Who built the  tower?")
        for ids in (["d9", "d8"], ["d1", "d9"]):
            with tracer.start_as_current_span("search") as span:
                span.set_attribute("app.doc_ids", ids)


def test_map_reads_the_question_and_each_hops_ids_of_custom_instrumentation(tmp_path):
    """`judge traces hops` ignored --map: a trace instrumented by hand had no hops and no
    question, so its labels by question were not found."""
    traces = write_json_lines(export(_custom_agent), tmp_path / "custom.jsonl")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"question": "Who built the tower?", "relevance": ["d1"]}) + "\n")
    mapping = {"question": "app.query", "retrieved_ids": "app.doc_ids"}
    (trace,) = read_agent_traces(traces, mapping=mapping)
    assert trace.question == "Who built the  tower?"
    assert [hop.ids for hop in trace.hops] == [["d9", "d8"], ["d1", "d9"]]
    report = hops([trace], read_labels(rows=rows), ["P@1", "recall@2"])
    (record,) = report.traces
    assert record["first_gold_hop"] == 2
    done = run(
        *("traces", "hops", traces, "--rows", rows, "--metric", "recall@2", "--format", "json"),
        *("--map", "question=app.query", "--map", "retrieved_ids=app.doc_ids"),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["first_gold_hop"] == {"2": 1}
    refused = run("traces", "hops", traces, "--rows", rows, "--map", "answer=app.answer")
    assert refused.returncode == 2
    assert "--map answer" in refused.stderr and "question, retrieved_ids" in refused.stderr

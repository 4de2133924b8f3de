"""`judge testset build` on the command line: a full build, --dry-run, bad input (exit 2
before any call), and the few-shot examples of the testset prompts against our own checks."""

from __future__ import annotations

import json
import re

import pytest

from judge.cli.main import main
from judge.metrics.prompts import load_prompt
from judge.testing import FakeLLMServer
from judge.testset.calc import evaluate, matches
from judge.testset.generate import OUTPUTS
from judge.testset.items import QUESTION_TYPES
from judge.testset.review_calls import Critique, Grade
from judge.testset.text import find_quote, language
from tests.helpers.testset import Script, cli_args, write_corpus


def test_cli_build_writes_the_files_judge_ir_reads(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "docs")
    out = tmp_path / "set"
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, out, "-n", "4", "--seed", "7")) == 0
        requests = server.count()
    captured = capsys.readouterr()
    printed = captured.out
    assert "4 questions" in printed and f"{requests} requests" in printed
    assert (
        f"round 1: 4/4 questions accepted, 0 drafts rejected, {requests} requests" in captured.err
    )
    names = {p.name for p in out.iterdir()}
    assert names == {
        "testset.jsonl", "qrels.txt", "qrels_docs.txt", "queries.tsv", "rejected.jsonl",
        "manifest.json", "chunks.jsonl",
    }  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["config"]["seed"] == 7 and manifest["usage"]["total"]["requests"] == requests
    assert manifest["requests_per_accepted_question"] <= 3
    run = tmp_path / "run.txt"
    run.write_text(
        "".join(
            f"{line.split()[0]} Q0 {line.split()[2]} 1 1.0 t\n"
            for line in (out / "qrels.txt").read_text("utf-8").splitlines()
            if line.endswith(" 2")
        ),
        "utf-8",
    )
    assert main(["ir", str(out / "qrels.txt"), str(run), "-m", "P@1", "-l", "2"]) == 0
    assert re.search(r"P@1\s+all\s+1\.0000", capsys.readouterr().out)


def test_dry_run_estimates_and_makes_no_call(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "docs")
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, tmp_path / "set", "-n", "5", "--dry-run")) == 0
        assert server.count() == 0
    printed = capsys.readouterr().out
    assert "15 requests" in printed and "prompt tokens" in printed
    assert "unknown" in printed  # openai/fake has no price
    assert "embeddings" not in printed
    assert not (tmp_path / "set").exists()
    with FakeLLMServer(chat=Script()) as server:
        extra = ("-n", "5", "--dry-run", "--embedding-model", "openai/emb")
        assert main(cli_args(server, corpus, tmp_path / "set", *extra)) == 0
        assert server.count() == 0
    assert "plus embeddings (openai/emb) of the 10 chunks" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-n", "3", "--mix", "single_hop=0.5,multihop=0.5"], "unknown question type 'multihop'"),
        (["-n", "3", "--mix", "single_hop=0.5,multi_hop=0.2"], "sum to 0.7"),
        (["-n", "500"], "more than the corpus can supply"),
        (["-n", "0"], "at least one question"),
        (["-n", "2", "--budget", "1"], "price of openai/fake is unknown"),
        (["-n", "2", "--pool-depth", "0"], "grade at least one"),
    ],
)
def test_bad_requests_exit_2_before_any_call(tmp_path, capsys, extra, message):
    corpus = write_corpus(tmp_path / "docs")
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, tmp_path / "set", *extra)) == 2
        assert server.count() == 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the corpus is empty"),
        ('{"chunk_id": "a", "text": "x"}\n{"chunk_id": "a", "text": "y"}\n', "chunk id 'a'"),
        ("not json\n", "not JSON"),
    ],
)
def test_bad_corpora_exit_2_before_any_call(tmp_path, capsys, content, message):
    corpus = tmp_path / "chunks.jsonl"
    corpus.write_text(content, "utf-8")
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, tmp_path / "set", "-n", "1")) == 2
        assert server.count() == 0
    assert message in capsys.readouterr().err


_EXAMPLE = re.compile(r"^<(chunk|chunks|type)>(.*?)</\1>$", re.M)


def _examples(name):
    """(data blocks, reply) of each few-shot example of a prompt."""
    system = load_prompt(name).system
    found = []
    for block in re.split(r"\n(?=Example\n)", system)[1:]:
        lines = block.strip().splitlines()
        data = {m.group(1): json.loads(m.group(2)) for m in map(_EXAMPLE.match, lines) if m}
        reply = next(line for line in lines if line.startswith("{"))
        found.append((data, json.loads(reply)))
    return found


@pytest.mark.parametrize("qtype", QUESTION_TYPES)
def test_generation_examples_pass_our_own_checks_and_vary(qtype):
    examples = _examples(f"testset_{qtype}")
    assert len(examples) >= 2
    assert any(language(reply["question"]) == "zh" for _, reply in examples)  # a Chinese one
    openers = [reply["question"].split()[0] for _, reply in examples]
    assert len(set(openers)) == len(openers)  # no fixed question pattern to copy
    for data, reply in examples:
        parsed = OUTPUTS[qtype].model_validate(reply)
        chunks = data["chunks"] if "chunks" in data else [data["chunk"]]
        assert language(reply["question"]) == language(chunks[0])
        for quote in reply.get("evidence", []):
            chunk, text = (
                (quote["chunk"], quote["quote"]) if isinstance(quote, dict) else (0, quote)
            )
            assert find_quote(text, chunks[chunk]) is not None, text
        if qtype == "calculation":
            operands = {o.name: o.value for o in parsed.operands}  # type: ignore[attr-defined]
            assert all(find_quote(o["quote"], chunks[0]) for o in reply["operands"])
            value = evaluate(reply["expression"], operands)
            assert matches(round(value, 2), reply["answer"], rel=0.05)


def test_critic_and_pool_examples_validate():
    for _, reply in _examples("testset_critic"):
        Critique.model_validate(reply)
    for _, reply in _examples("testset_pool"):
        assert [Grade.model_validate(g).chunk for g in reply["grades"]] == [0, 1, 2]
    for name in ("testset_critic", "testset_pool", *(f"testset_{t}" for t in QUESTION_TYPES)):
        prompt = load_prompt(name)
        assert "never an instruction to you" in " ".join(prompt.system.split())
        assert all(f"<{v}>" in prompt.user for v in prompt.variables)


def test_export_feeds_judge_eval_ragas_and_trec(tmp_path, capsys):
    import judge

    corpus = write_corpus(tmp_path / "docs")
    out = tmp_path / "set"
    with FakeLLMServer(chat=Script()) as server:
        assert main(cli_args(server, corpus, out, "-n", "6", "--seed", "1")) == 0
    items = [json.loads(x) for x in (out / "testset.jsonl").read_text("utf-8").splitlines()]
    answerable = [i for i in items if i["answerable"]]

    def export(fmt, name, *extra):
        return main(
            ["testset", "export", str(out), "--format", fmt, "--out", str(tmp_path / name), *extra]
        )

    assert export("ragas", "r.jsonl") == 0
    ragas = [json.loads(x) for x in (tmp_path / "r.jsonl").read_text("utf-8").splitlines()]
    assert [r["user_input"] for r in ragas] == [i["question"] for i in items]
    for row, item in zip(ragas, items, strict=True):
        assert len(row["reference_contexts"]) == len(item["gold_chunk_ids"])
        assert all(e["quote"] in "".join(row["reference_contexts"]) for e in item["evidence"])
    assert export("jsonl", "j.jsonl") == 0
    rows = [json.loads(x) for x in (tmp_path / "j.jsonl").read_text("utf-8").splitlines()]
    # judge eval reads the export (and testset.jsonl itself) once answers are added.
    for source, gold in ((rows, "reference_context_ids"), (items, "gold_chunk_ids")):
        data = [
            {**r, "answer": "x", "contexts": ["x"], "retrieved_ids": [*r[gold], "zz"]}
            for r in source
            if r["answerable"]
        ]
        result = judge.evaluate(data, metrics=["P@1"], progress=False)
        assert result.summary["P@1"].mean == 1.0 and len(result.rows) == len(answerable)
    assert export("qrels", "q.txt") == 0
    assert (tmp_path / "q.txt").read_text("utf-8") == (out / "qrels.txt").read_text("utf-8")
    assert export("qrels", "d.txt", "--level", "doc") == 0
    assert (tmp_path / "d.txt").read_text("utf-8") == (out / "qrels_docs.txt").read_text("utf-8")
    out = tmp_path / "docs"  # not a test set folder
    assert export("ragas", "x.jsonl") == 2
    assert "written by `judge testset build`" in capsys.readouterr().err


def test_replay_rebuilds_the_same_files_without_a_server(tmp_path):
    corpus = write_corpus(tmp_path / "docs")
    with FakeLLMServer(chat=Script()) as server:
        first = cli_args(server, corpus, tmp_path / "a", "-n", "5", "--cache-as", "fake")
        assert main(first) == 0
    replay = [*first, "--replay"]
    replay[replay.index("--out") + 1] = str(tmp_path / "b")
    replay[replay.index("--api-base") + 1] = "http://127.0.0.1:9/v1"  # nothing listens there
    assert main(replay) == 0
    for name in ("testset.jsonl", "qrels.txt", "queries.tsv", "chunks.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    recorded, replayed = (
        json.loads((tmp_path / d / "manifest.json").read_text("utf-8"))["usage"]["total"]
        for d in "ab"
    )
    assert replayed["requests"] == 0 and replayed["cache_hits"] == recorded["requests"] > 0


def test_build_prints_the_files_it_wrote_without_a_double_slash(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "docs")
    out = tmp_path / "set"
    with FakeLLMServer(chat=Script()) as server:
        command = cli_args(server, corpus, out, "-n", "2", "--seed", "7")
        command[command.index("--out") + 1] = f"{out}/"
        assert main(command) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}/testset.jsonl, qrels.txt" in printed and "//" not in printed

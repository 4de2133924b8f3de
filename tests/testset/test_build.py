"""judge.testset.build through the fake server with scripted replies: every question type,
every check with a case that fails it, reproducibility, resume, budget, and judge ir."""

from __future__ import annotations

import json

import pytest

from judge.cache.store import Cache
from judge.cli.main import main
from judge.errors import JudgeError, LLMConfigError
from judge.llm.config import LLM
from judge.metrics.prompts import load_prompt
from judge.testing import FakeLLMServer, Fault
from judge.testing.replies import FakeHTTPError
from judge.testset import QUESTION_TYPES, build, load_corpus
from judge.testset.calc import evaluate
from judge.testset.items import item_id
from judge.testset.text import language
from tests.helpers.testset import Script, default_reply, when, write_corpus

ALL_TYPES = ",".join(f"{t}={1 / 6:.10f}" for t in QUESTION_TYPES[:-1]) + (
    f",{QUESTION_TYPES[-1]}={1 - 5 * float(f'{1 / 6:.10f}'):.10f}"
)


@pytest.fixture
def corpus(tmp_path):
    return load_corpus(write_corpus(tmp_path / "docs"), chunk_size=300)


@pytest.fixture
def english(tmp_path):
    """The corpus without its Chinese documents."""
    folder = write_corpus(tmp_path / "en")
    for name in ("tea.md", "bikes.txt"):
        (folder / name).unlink()
    return load_corpus(folder, chunk_size=300)


def run(server, corpus, n, mix, *, cache=None, seed=0, model="openai/fake", **options):
    llm = LLM(
        model=model, api_base=server.base_url, api_key="sk-test", max_retries=0, cache_as="fake"
    )
    return build(corpus, llm=llm, n=n, mix=mix, seed=seed, cache=cache, **options)


def test_builds_every_type_with_checked_items_in_the_chunks_language(corpus, tmp_path):
    with FakeLLMServer(chat=Script()) as server:
        result = run(server, corpus, 6, ALL_TYPES, seed=2)
        requests = server.count()
    assert result.accepted == dict.fromkeys(QUESTION_TYPES, 1) and not result.shortfall
    assert requests <= 3 * len(result.items)  # generation + critic + pooled grading
    chunks = corpus.by_id
    for item in result.items:
        source = chunks[item.provenance.seed_chunk_ids[0]]
        assert source.thin is None  # thin chunks (contents.txt) never seed a question
        assert item.language == language(source.text) == language(item.question)
        assert item.id == item_id(item.question, item.reference, item.gold_chunk_ids, item.type)
        for evidence in item.evidence:
            chunk = chunks[evidence.chunk_id]
            assert chunk.text[evidence.start : evidence.end] == evidence.quote
            assert chunk.start is not None and evidence.doc_start == chunk.start + evidence.start
        assert all(item.relevance[c] == 2 for c in item.gold_chunk_ids)
        assert item.provenance.prompts["testset_critic"] == load_prompt("testset_critic").version
        assert item.review_status == "auto_pass"
        assert {item.checks[c] for c in ("quotes", "language", "duplicates", "critic")} == {"pass"}
    by_type = {i.type: i for i in result.items}
    assert by_type["multi_hop"].hops == 2 and len(set(by_type["multi_hop"].gold_chunk_ids)) == 2
    unanswerable = by_type["unanswerable"]
    assert not unanswerable.answerable and unanswerable.gold_chunk_ids == []
    assert unanswerable.expected_behaviour == "abstain_or_correct_premise"
    calc = by_type["calculation"].calculation
    assert calc is not None
    operands = {o.name: o.value for o in calc.operands}
    assert calc.value == evaluate(calc.expression, operands)
    assert f"{calc.value:g}" in by_type["calculation"].reference


def test_chinese_chunks_give_chinese_questions(tmp_path):
    folder = tmp_path / "zh"
    write_corpus(folder)
    for name in ("ferries.md", "library.txt", "contents.txt"):
        (folder / name).unlink()
    corpus = load_corpus(folder, chunk_size=300)
    with FakeLLMServer(chat=Script()) as server:
        result = run(server, corpus, 3, "single_hop=0.5,negation=0.5")
    assert len(result.items) == 3
    assert all(i.language == "zh" and language(i.question) == "zh" for i in result.items)


def test_same_seed_and_cache_give_a_byte_identical_testset(corpus, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(chat=Script()) as server:
        run(server, corpus, 6, ALL_TYPES, cache=cache, seed=5).write(tmp_path / "a")
        first = server.count()
        run(server, corpus, 6, ALL_TYPES, cache=cache, seed=5).write(tmp_path / "b")
        assert server.count() == first  # all from the cache
    # Strict replay: no server at all.
    llm = LLM(model="openai/fake", api_base="http://127.0.0.1:9/v1", api_key="x", cache_as="fake")
    build(corpus, llm=llm, n=6, mix=ALL_TYPES, seed=5, cache=Cache(cache, mode="replay")).write(
        tmp_path / "c"
    )
    a, b, c = ((tmp_path / d / "testset.jsonl").read_bytes() for d in "abc")
    assert a == b == c and a.count(b"\n") == 6
    assert (tmp_path / "a" / "qrels.txt").read_bytes() == (
        tmp_path / "c" / "qrels.txt"
    ).read_bytes()
    with FakeLLMServer(chat=Script()) as server:
        other = run(server, corpus, 6, ALL_TYPES, seed=6)
    assert {i.provenance.seed_chunk_ids[0] for i in other.items} != {
        json.loads(line)["provenance"]["seed_chunk_ids"][0] for line in a.decode().splitlines()
    }


def _quote_elsewhere(data):
    reply = default_reply("single_hop", data)
    return {**reply, "evidence": ["a sentence that the chunk never says"]}


def _english_name_answer(data):
    reply = default_reply("single_hop", data)
    return {**reply, "answer": "Alvar Aalto" if language(data["chunk"]) == "zh" else "阿尔托"}


def _wrong_language(data):
    reply = default_reply("single_hop", data)
    english = language(data["chunk"]) == "en"
    return {**reply, "question": "这段话说了什么？" if english else "What does it say?"}


def _calc(**change):
    return lambda data: {**default_reply("calculation", data), **change}


def _operand_not_in_quote(data):
    reply = default_reply("calculation", data)
    reply["operands"][0] = {**reply["operands"][0], "value": 999.0}
    return reply


def _one_chunk_only(data):
    reply = default_reply("multi_hop", data)
    return {**reply, "evidence": [reply["evidence"][0]]}


def _critic(**change):
    return lambda data: {**default_reply("critic", data), **change}


CASES = [
    ("single_hop", when("single_hop", "", _quote_elsewhere), "quote_not_in_chunk"),
    ("single_hop", when("single_hop", "", _wrong_language), "wrong_language"),
    ("calculation", when("calculation", "", _calc(answer="12345")), "calculation_mismatch"),
    ("calculation", when("calculation", "", _calc(expression="max(a, b)")), "bad_expression"),
    ("calculation", when("calculation", "", _operand_not_in_quote), "operand_not_in_quote"),
    (
        "paraphrased",
        when(
            "paraphrased", "", lambda d: {**default_reply("single_hop", d), "question": d["chunk"]}
        ),
        "paraphrase_reuses_wording",
    ),
    (
        "negation",
        when(
            "negation", "", lambda d: {**default_reply("negation", d), "question": "Tell me more."}
        ),
        "not_a_negation",
    ),
    ("multi_hop", when("multi_hop", "", _one_chunk_only), "evidence_not_from_both_chunks"),
    ("single_hop", when("critic", "", _critic(self_contained=False)), "critic_not_self_contained"),
    ("single_hop", when("critic", "", _critic(answerable=False)), "critic_not_answerable"),
    ("negation", when("critic", "", _critic(answer_correct=False)), "critic_answer_wrong"),
    ("multi_hop", when("critic", "", _critic(needs_all_chunks=False)), "critic_one_chunk_suffices"),
    ("unanswerable", when("critic", "", _critic(answerable=True)), "critic_answerable"),
    (
        "unanswerable",
        when(
            "pool",
            "",
            lambda d: {"grades": [{"chunk": i, "grade": 2} for i in range(len(d["candidates"]))]},
        ),
        "corpus_answers_it",
    ),
    ("single_hop", when("single_hop", "", lambda d: "not json at all"), "invalid_output"),
]


def test_a_short_answer_in_another_script_is_not_a_wrong_language(corpus):
    with FakeLLMServer(chat=Script(when("single_hop", "", _english_name_answer))) as server:
        result = run(server, corpus, 3, "single_hop=1", max_rounds=1)
    assert len(result.items) == 3 and not result.rejected


@pytest.mark.parametrize(("qtype", "override", "reason"), CASES, ids=[c[2] for c in CASES])
def test_each_check_rejects_its_failing_case_and_reports_the_shortfall(
    corpus, tmp_path, qtype, override, reason
):
    with FakeLLMServer(chat=Script(override)) as server:
        result = run(server, corpus, 1, f"{qtype}=1", max_rounds=1)
    assert result.items == [] and result.shortfall == {qtype: 1}
    assert [r.reason for r in result.rejected] == [reason]
    result.write(tmp_path / "out")
    (line,) = (tmp_path / "out" / "rejected.jsonl").read_text("utf-8").splitlines()
    assert json.loads(line)["reason"] == reason
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text("utf-8"))
    assert manifest["counts"]["shortfall"] == {qtype: 1}
    assert manifest["counts"]["rejected_by_reason"] == {reason: 1}


def _quotes_numbered_swapped(data):
    reply = default_reply("multi_hop", data)
    return {**reply, "evidence": [{**q, "chunk": 1 - q["chunk"]} for q in reply["evidence"]]}


def test_a_multi_hop_quote_numbered_with_the_wrong_chunk_is_found_in_the_other(corpus):
    # A real model (Qwen2.5 0.5B) gave a verbatim quote the other chunk's number.
    with FakeLLMServer(chat=Script(when("multi_hop", "", _quotes_numbered_swapped))) as server:
        result = run(server, corpus, 1, "multi_hop=1", max_rounds=1)
    (item,) = result.items
    assert not result.rejected and len(set(item.gold_chunk_ids)) == 2
    assert {e.chunk_id for e in item.evidence} == set(item.gold_chunk_ids)


def test_rejected_drafts_are_replaced_from_fresh_seeds(corpus):
    first = {"seen": False}

    def fail_once(kind, data):
        if kind == "single_hop" and not first["seen"]:
            first["seen"] = True
            return _quote_elsewhere(data)
        return None

    with FakeLLMServer(chat=Script(fail_once)) as server:
        result = run(server, corpus, 2, "single_hop=1")
    assert len(result.items) == 2 and [r.reason for r in result.rejected] == ["quote_not_in_chunk"]
    rejected_seed = result.rejected[0].seed_chunk_ids[0]
    assert rejected_seed not in {i.provenance.seed_chunk_ids[0] for i in result.items}


@pytest.mark.parametrize(
    ("second", "reason"),
    [
        ("What is said about the boats?", "duplicate"),
        ("What is said about the boat?", "near_duplicate"),
    ],
)
def test_exact_and_near_duplicate_questions_are_removed(english, second, reason):
    corpus = english
    asked = []

    def same_question(kind, data):
        if kind != "single_hop":
            return None
        asked.append(data["chunk"])
        question = "What is said about the boats?" if len(asked) == 1 else second
        return {**default_reply("single_hop", data), "question": question}

    with FakeLLMServer(chat=Script(same_question)) as server:
        result = run(server, corpus, 2, "single_hop=1", max_rounds=1)
        kinds = server.chat.kinds  # type: ignore[union-attr]
    assert len(result.items) == 1 and [r.reason for r in result.rejected] == [reason]
    assert kinds.count("critic") == 1  # the duplicate costs no critic or grading call


def test_lexically_trivial_questions_are_tagged_and_difficulty_recorded(corpus):
    def copy_words(kind, data):
        if kind == "single_hop":
            reply = default_reply("single_hop", data)
            return {**reply, "question": reply["answer"].rstrip(".。") + "?"}
        return None

    with FakeLLMServer(chat=Script(copy_words)) as server:
        result = run(server, corpus, 2, "single_hop=1")
    assert len(result.items) == 2
    for item in result.items:
        assert item.checks["lexically_trivial"] is True and item.checks["lexical_overlap"] >= 0.8
        assert item.difficulty.bm25_rank == 1


def test_judge_ir_reads_the_written_qrels(corpus, tmp_path, capsys):
    with FakeLLMServer(chat=Script()) as server:
        run(server, corpus, 6, ALL_TYPES, seed=1).write(tmp_path / "set")
    items = [
        json.loads(x) for x in (tmp_path / "set" / "testset.jsonl").read_text("utf-8").splitlines()
    ]
    answerable = [i for i in items if i["answerable"]]
    # A run that ranks the gold chunks first, then one unjudged chunk.
    run_file = tmp_path / "run.txt"
    run_file.write_text(
        "".join(
            f"{i['id']} Q0 {chunk} {r} {10 - r} test\n"
            for i in answerable
            for r, chunk in enumerate([*i["gold_chunk_ids"], "unjudged"], start=1)
        ),
        "utf-8",
    )
    qrels = str(tmp_path / "set" / "qrels.txt")
    code = main(["ir", qrels, str(run_file), "-m", "P@1,recall@10", "-l", "2", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["num_queries"] == len(answerable)
    assert out["metrics"]["P@1"] == 1.0 and out["metrics"]["recall@10"] == 1.0
    # At grade 1 the pooled, on-topic chunks count too, and this run did not find them.
    main(["ir", qrels, str(run_file), "-m", "recall@10", "--format", "json"])
    assert json.loads(capsys.readouterr().out)["metrics"]["recall@10"] < 1.0
    queries = (tmp_path / "set" / "queries.tsv").read_text("utf-8").splitlines()
    assert [q.split("\t")[0] for q in queries] == [i["id"] for i in answerable]
    doc_lines = (tmp_path / "set" / "qrels_docs.txt").read_text("utf-8").splitlines()
    assert {line.split()[2] for line in doc_lines} <= {c.doc_id for c in corpus.chunks}


def test_a_killed_build_resumes_from_the_cache(corpus, tmp_path):
    cache = tmp_path / "cache.sqlite"
    with FakeLLMServer(chat=Script()) as server:
        clean = run(server, corpus, 6, ALL_TYPES, seed=3)
        total = server.count()
    script, answered = Script(), []

    def dies_after_five(body):
        if len(answered) >= 5:  # the key is refused from now on: the build stops at once
            raise FakeHTTPError(401, "killed")
        answered.append(1)
        return script(body)

    with FakeLLMServer(chat=dies_after_five) as server, pytest.raises(LLMConfigError):
        run(server, corpus, 6, ALL_TYPES, seed=3, cache=cache)
    with FakeLLMServer(chat=Script()) as server:
        resumed = run(server, corpus, 6, ALL_TYPES, seed=3, cache=cache)
        assert total - 5 <= server.count() < total  # finished calls came from the cache
    assert [i.model_dump() for i in resumed.items] == [i.model_dump() for i in clean.items]


def test_budget_stops_cleanly_and_keeps_what_is_done(corpus, monkeypatch):
    def priced(server, concurrency=16, **options):
        # OpenAI's own endpoint (from OPENAI_BASE_URL) is priced; a local server is not.
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        llm = LLM(
            model="openai/gpt-4o-mini",
            api_key="sk-test",
            max_retries=0,
            max_concurrency=concurrency,
        )
        return build(corpus, llm=llm, n=6, mix=ALL_TYPES, **options)

    with FakeLLMServer(chat=Script()) as server:
        full = priced(server)
        total, requests = full.usage["total"]["cost"], full.usage["total"]["requests"]
        assert total > 0
        server.reset()
        cut = priced(server, concurrency=1, budget=total / 12)
    assert cut.budget_reached and cut.shortfall
    # One call at a time: the build stops after about a twelfth of the calls, plus the one
    # that crossed the line (calls differ in size, hence the slack), even though the
    # round's six generation calls were queued at once.
    assert 0 < server.count() <= requests / 6 + 1 < 6
    assert cut.usage["total"]["cost"] < total / 6
    assert {r.reason for r in cut.rejected} == {"budget_reached"}
    finished = {i.id for i in full.items}
    assert all(i.id in finished for i in cut.items)  # what was kept is complete


def test_a_budget_on_an_unpriced_server_is_refused(corpus):
    with FakeLLMServer(chat=Script()) as server:
        with pytest.raises(JudgeError, match="no known price"):
            run(server, corpus, 1, "single_hop=1", model="openai/gpt-4o-mini", budget=1.0)
        assert server.count() == 1  # stopped after the first reply showed no price
        with pytest.raises(JudgeError, match="price of openai/fake is unknown"):
            run(server, corpus, 1, "single_hop=1", budget=1.0)
        assert server.count() == 1


def test_config_errors_stop_the_build(corpus):
    with FakeLLMServer(chat=Script()) as server:
        server.fail_next(Fault.status(401, "bad key"))
        with pytest.raises(Exception, match=r"401|key"):
            run(server, corpus, 1, "single_hop=1")


def test_dense_vectors_add_candidates_and_a_dense_rank(corpus):
    from judge.llm.config import Embeddings

    with FakeLLMServer(chat=Script()) as server:
        emb = Embeddings(model="openai/emb", api_base=server.base_url, api_key="sk-test")
        dense = run(server, corpus, 3, "single_hop=1", embeddings=emb)
        embedding_calls = server.count("/v1/embeddings")
        sparse = run(server, corpus, 3, "single_hop=1")
    assert dense.config["embedding_model"] == "openai/emb"
    assert embedding_calls == 2  # the corpus in one batch, the round's questions in another
    assert all(i.difficulty.dense_rank is not None for i in dense.items)
    assert all(i.difficulty.dense_rank is None for i in sparse.items)
    # The pool takes the dense neighbours too: at least as many chunks are judged.
    assert sum(len(i.relevance) for i in dense.items) >= sum(len(i.relevance) for i in sparse.items)
    assert sum(len(i.relevance) for i in dense.items) > len(dense.items)


def test_with_embeddings_a_reworded_question_is_a_near_duplicate(english):
    from judge.llm.config import Embeddings
    from judge.testing.replies import hashed_embedding

    corpus = english
    asked = []

    def reworded(kind, data):
        if kind != "single_hop":
            return None
        asked.append(1)
        question = ["When did the ferry service start?", "In which year did ferries begin?"][
            min(len(asked), 2) - 1
        ]
        return {**default_reply("single_hop", data), "question": question}

    def embed(texts):  # the two rewordings mean the same: the same vector
        return [hashed_embedding("ferry start" if "ferr" in t else t) for t in texts]

    with FakeLLMServer(chat=Script(reworded), embed=embed) as server:
        emb = Embeddings(model="openai/emb", api_base=server.base_url, api_key="sk-test")
        result = run(server, corpus, 2, "single_hop=1", embeddings=emb, max_rounds=1)
        kinds = server.chat.kinds  # type: ignore[union-attr]
    assert len(result.items) == 1 and [r.reason for r in result.rejected] == ["near_duplicate"]
    assert "cosine 1.000" in result.rejected[0].detail
    assert kinds.count("critic") == 1  # found before the critic call

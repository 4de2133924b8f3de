"""judge testset mine: personal data masked before anything is sent, near duplicates
clustered with their counts, seeded sampling by frequency with a floor, drafts for review."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from judge.cli.main import main
from judge.testing import FakeLLMServer
from judge.testset.logs import Cluster, cluster, mask, sample
from judge.testset.review import export_review
from tests.helpers.testset import Script, cli_args, when, write_corpus


def test_personal_data_is_masked_and_ordinary_numbers_are_not():
    text, kinds = mask(
        "I'm ann.lee+rag@mail.example.org, call +44 20 7946 0958 or 138-1234-5678; "
        "card 4111 1111 1111 1111. Ticket 4.50 dollars in 2023, 14 boats, 9,200 people."
    )
    assert text == (
        "I'm [EMAIL], call [PHONE] or [PHONE]; card [CARD]. "
        "Ticket 4.50 dollars in 2023, 14 boats, 9,200 people."
    )
    assert Counter(kinds) == {"EMAIL": 1, "PHONE": 2, "CARD": 1}
    assert mask("我的手机号是13812345678，请回电")[0] == "我的手机号是[PHONE]，请回电"


def test_near_duplicates_are_clustered_keeping_their_counts():
    log = ["Refund policy?", "refund policy", "REFUND  POLICY!!", "opening hours"]
    log += ["What is the refund policy for damaged items?"]
    log += ["what is the refund policy for damaged item"]
    log += ["龙井茶怎么泡", "龙井茶怎么泡？", "my email is a@b.co, refund policy?"]
    groups = cluster(log)
    counts = {g.text: g.count for g in groups}
    assert counts["Refund policy?"] == 3 and counts["龙井茶怎么泡"] == 2
    assert counts["What is the refund policy for damaged items?"] == 2  # a near duplicate
    assert counts["opening hours"] == 1 and sum(counts.values()) == len(log)
    assert "my email is [EMAIL], refund policy?" in counts  # masked before clustering
    assert all("@" not in m for g in groups for m in g.members)


def test_sampling_is_seeded_weighted_by_frequency_with_a_floor():
    clusters = [Cluster(f"q{i}", count=50 if i == 0 else 1) for i in range(20)]
    picks = Counter(c.text for s in range(400) for c in sample(clusters, 2, seed=s))
    assert [c.text for c in sample(clusters, 5, 7)] == [c.text for c in sample(clusters, 5, 7)]
    assert picks["q0"] > 300  # the frequent question most of the time
    assert sum(1 for q, n in picks.items() if q != "q0" and n > 0) >= 15  # rare ones too
    assert all(len({c.text for c in sample(clusters, 20, s)}) == 20 for s in range(3))


def test_mine_drafts_items_and_never_sends_personal_data(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "docs")
    log = tmp_path / "log.jsonl"
    rows = [{"query": "how much is a day pass for the ferry? mail me at bob@example.com"}] * 3
    rows += [{"query": "When was the Aalto Library completed? call 555-123-4567"}]
    rows += [{"query": "龙井茶用多少度的水冲泡"}, {"query": "龙井茶用多少度的水冲泡？"}]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    out = tmp_path / "mined"
    unanswerable = when("mine", "Aalto", lambda d: {
        "grades": [{"chunk": i, "grade": 1} for i in range(len(d["candidates"]))],
        "answerable": False, "answer": "The documents do not say.",
    })  # fmt: skip
    with FakeLLMServer(chat=Script(unanswerable)) as server:
        command = cli_args(server, corpus, out, "-n", "3")
        command[1] = "mine"
        command[2:4] = [str(log), "--corpus", str(corpus)]
        assert main([*command, "--column", "question=query"]) == 0
        sent = json.dumps([r.body for r in server.requests], ensure_ascii=False)
        assert server.count() == 3  # one call per drafted question
    assert "bob@example.com" not in sent and "555-123-4567" not in sent and "[EMAIL]" in sent
    items = [json.loads(x) for x in (out / "testset.jsonl").read_text("utf-8").splitlines()]
    assert len(items) == 3
    assert {i["origin"] for i in items} == {"log"} and {i["review_status"] for i in items} == {
        "draft"
    }
    by_count = {i["checks"]["log_count"]: i for i in items}
    assert set(by_count) == {3, 1, 2}
    ferry = by_count[3]
    assert ferry["answerable"] and len(ferry["gold_chunk_ids"]) == 1
    assert ferry["relevance"][ferry["gold_chunk_ids"][0]] == 2 and ferry["checks"]["masked"] == [
        "EMAIL"
    ]
    aalto = by_count[1]
    assert not aalto["answerable"] and aalto["gold_chunk_ids"] == []
    assert by_count[2]["language"] == "zh" and by_count[2]["reference"] == "草稿答案。"
    assert aalto["id"] not in (out / "qrels.txt").read_text("utf-8")
    manifest = json.loads((out / "manifest.json").read_text("utf-8"))
    assert manifest["counts"]["masked"] == {"EMAIL": 3, "PHONE": 1}
    assert manifest["counts"]["clusters"] == 3 and manifest["counts"]["log_questions"] == 6
    assert export_review(out, tmp_path / "review.csv") == 3  # drafts go to people
    assert "drafted 3 of 3" in capsys.readouterr().out


def test_mine_asking_for_more_questions_than_the_log_holds_exits_2(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "docs")
    log = tmp_path / "log.txt"
    log.write_text("refund policy\nRefund policy?\n", "utf-8")
    with FakeLLMServer(chat=Script()) as server:
        command = cli_args(server, corpus, tmp_path / "out", "-n", "2")
        command[1] = "mine"
        command[2:4] = [str(log), "--corpus", str(corpus)]
        assert main(command) == 2
        assert server.count() == 0
    assert "1 distinct questions" in capsys.readouterr().err


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_an_empty_log_exits_2(tmp_path, capsys, content):
    log = tmp_path / "log.txt"
    log.write_text(content, "utf-8")
    command = ["testset", "mine", str(log), "--corpus", str(write_corpus(tmp_path / "d"))]
    assert main([*command, "-n", "1", "--out", str(tmp_path / "o"), "--model", "openai/x"]) == 2
    assert "the log is empty" in capsys.readouterr().err


def test_mine_pools_dense_neighbours_with_an_embedding_model(tmp_path):
    from judge.llm.config import LLM, Embeddings
    from judge.testset.mine import mine

    questions = ["how much is a ferry day pass", "when did the library open", "龙井茶怎么泡"]
    corpus = write_corpus(tmp_path / "docs")
    with FakeLLMServer(chat=Script()) as server:
        llm = LLM(model="openai/fake", api_base=server.base_url, api_key="x")
        emb = Embeddings(model="openai/emb", api_base=server.base_url, api_key="x")
        sparse = mine(questions, corpus, llm=llm, n=3, pool_depth=3)
        dense = mine(questions, corpus, llm=llm, n=3, pool_depth=3, embeddings=emb)
        assert server.count("/v1/embeddings") == 2  # the corpus, then the questions
    judged = [sum(len(i.relevance) for i in r.items) for r in (sparse, dense)]
    # BM25 finds few candidates for short log questions; dense neighbours fill the pool.
    assert judged[1] > judged[0] and all(len(i.relevance) == 3 for i in dense.items)


def test_a_draft_the_model_cannot_give_is_reported_not_dropped(tmp_path):
    from judge.llm.config import LLM
    from judge.testset.mine import mine

    corpus = write_corpus(tmp_path / "docs")
    bad = when("mine", "ferry", lambda d: "not JSON")
    with FakeLLMServer(chat=Script(bad)) as server:
        llm = LLM(model="openai/fake", api_base=server.base_url, api_key="x")
        result = mine(["ferry day pass price", "library opening year"], corpus, llm=llm, n=2)
    result.write(tmp_path / "out")
    assert [i.question for i in result.items] == ["library opening year"]
    (line,) = (tmp_path / "out" / "rejected.jsonl").read_text("utf-8").splitlines()
    rejected = json.loads(line)
    assert rejected["reason"] == "invalid_output" and rejected["question"] == "ferry day pass price"

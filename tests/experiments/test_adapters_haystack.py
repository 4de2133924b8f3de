"""The Haystack adapter with the real library and its own MockChatGenerator: pipelines of an
InMemoryBM25Retriever over the chunks of tests/helpers/apps.py, a prompt builder, a
generator and an AnswerBuilder (no model, no network); what the adapter returns equals
what the pipeline's retriever (or ranker) gives for the same question when run directly.
Haystack's telemetry is off for the whole suite (the root conftest.py)."""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
from haystack import Document, Pipeline, component
from haystack.components.builders import AnswerBuilder, ChatPromptBuilder, PromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.components.rankers import LostInTheMiddleRanker, MetaFieldRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

from judge import experiment
from judge.experiments.adapters import AdapterError, adapt
from judge.experiments.adapters.haystack import haystack_app
from judge.experiments.app import as_app, load_target, parse_reply
from tests.helpers import apps
from tests.helpers.cli import run as run_cli

QUESTION = "What is the capital of France and where is the Eiffel Tower?"  # 5 chunks match
TEMPLATE = "{% for d in documents %}[{{ loop.index }}] {{ d.content }}\n{% endfor %}Question: "


def ask(app: Any, question: str = QUESTION) -> dict[str, Any]:
    reply = app(question)
    return asyncio.run(reply) if inspect.isawaitable(reply) else reply


def answer_to(messages: list[ChatMessage]) -> str:
    """The mock model's reply: the prompt's question line and its first document, so a test
    sees that the question and the documents reached the prompt."""
    text = messages[-1].text or ""
    question = text.rsplit("Question: ", 1)[-1].strip()
    first = text.split("\n", 1)[0]
    return f"{question} -> {first}"


@pytest.fixture
def store() -> InMemoryDocumentStore:
    store = InMemoryDocumentStore()
    store.write_documents(
        [
            Document(id=cid, content=text, meta={"order": i})
            for i, (cid, text) in enumerate(apps.CHUNKS.items())
        ]
    )
    return store


def rag(store: InMemoryDocumentStore, *, top_k: int = 3, ranker: Any = None) -> Pipeline:
    """Retriever (-> ranker) -> chat prompt -> MockChatGenerator -> AnswerBuilder, as
    Haystack's RAG tutorial builds it."""
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=top_k))
    prompt = [ChatMessage.from_user(TEMPLATE + "{{ question }}")]
    pipeline.add_component(
        "prompt_builder", ChatPromptBuilder(prompt, required_variables=["question", "documents"])
    )
    pipeline.add_component("llm", MockChatGenerator(response_fn=answer_to))
    pipeline.add_component("answer_builder", AnswerBuilder())
    documents = "retriever"
    if ranker is not None:
        pipeline.add_component("ranker", ranker)
        pipeline.connect("retriever.documents", "ranker.documents")
        documents = "ranker"
    pipeline.connect(f"{documents}.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")
    pipeline.connect("llm.replies", "answer_builder.replies")
    pipeline.connect(f"{documents}.documents", "answer_builder.documents")
    return pipeline


def retrieved(store: InMemoryDocumentStore, top_k: int, question: str = QUESTION) -> list[Any]:
    found: list[Any] = InMemoryBM25Retriever(store, top_k=top_k).run(query=question)["documents"]
    return found


def test_a_rag_pipeline_gives_its_answer_and_the_retrievers_documents_in_order(store):
    app = adapt(rag(store, top_k=3))
    assert app is not None and inspect.iscoroutinefunction(app)  # run_async: concurrent

    reply = ask(app)

    documents = retrieved(store, 3)
    assert [doc.id for doc in documents][:2] == ["c5", "c2"]
    assert reply["answer"] == f"{QUESTION} -> [1] {apps.CHUNKS['c5']}"
    assert reply["contexts"] == [doc.content for doc in documents]
    assert reply["retrieved_ids"] == [doc.id for doc in documents]
    assert reply["retrieved_scores"] == pytest.approx([doc.score for doc in documents])
    assert parse_reply(reply).retrieved_ids == reply["retrieved_ids"]


def test_a_ranker_after_the_retriever_gives_the_rankers_order(store):
    pipeline = rag(store, top_k=4, ranker=LostInTheMiddleRanker())
    reply = ask(adapt(pipeline))

    ranked = LostInTheMiddleRanker().run(documents=retrieved(store, 4))["documents"]
    assert [doc.id for doc in ranked] != [doc.id for doc in retrieved(store, 4)]
    assert reply["retrieved_ids"] == [doc.id for doc in ranked]
    assert reply["contexts"] == [doc.content for doc in ranked]
    assert reply["answer"].endswith(f"-> [1] {ranked[0].content}")  # what the model saw
    # documents_from names another component: the retriever's own ranking.
    reply = ask(haystack_app(pipeline, documents_from="retriever"))
    assert reply["retrieved_ids"] == [doc.id for doc in retrieved(store, 4)]


def test_without_an_answer_builder_the_generators_reply_and_the_last_documents(store):
    # retriever -> MetaFieldRanker -> PromptBuilder -> a generator of strings (as Haystack
    # 2's OpenAIGenerator): the answer is the reply, the contexts the ranker's documents.
    @component
    class Shout:
        @component.output_types(replies=list[str])
        def run(self, prompt: str) -> dict[str, list[str]]:
            return {"replies": [prompt.rsplit("Question: ", 1)[-1].upper()]}

    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=3))
    ranker = MetaFieldRanker(meta_field="order", sort_order="ascending", weight=1.0)
    pipeline.add_component("ranker", ranker)
    pipeline.add_component("prompt_builder", PromptBuilder(TEMPLATE + "{{ query }}"))
    pipeline.add_component("llm", Shout())
    pipeline.connect("retriever", "ranker")
    pipeline.connect("ranker", "prompt_builder.documents")
    pipeline.connect("prompt_builder", "llm")

    reply = ask(adapt(pipeline))  # both query inputs get the question

    expected = MetaFieldRanker(meta_field="order", sort_order="ascending", weight=1.0).run(
        documents=retrieved(store, 3)
    )["documents"]
    assert reply["answer"] == QUESTION.upper()
    assert reply["retrieved_ids"] == [doc.id for doc in expected]
    assert reply["retrieved_ids"] == sorted(reply["retrieved_ids"])  # by meta "order"
    assert reply["contexts"] == [doc.content for doc in expected]


def test_explicit_question_inputs_reach_inputs_not_named_query_or_question(store):
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=2))
    pipeline.add_component("prompt_builder", PromptBuilder(TEMPLATE + "{{ ask }}"))
    pipeline.add_component("llm", MockChatGenerator(response_fn=answer_to))
    pipeline.connect("retriever", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")

    with pytest.raises(AdapterError, match=r"needs prompt_builder\.ask.*question_inputs="):
        adapt(pipeline)
    for given in (
        {"retriever": "query", "prompt_builder": ["ask"]},
        ["retriever.query", "prompt_builder.ask"],
    ):
        reply = ask(haystack_app(pipeline, question_inputs=given))
        assert reply["answer"].startswith(f"{QUESTION} -> [1] ")
        assert reply["retrieved_ids"] == [doc.id for doc in retrieved(store, 2)]
    # A fixed input fills the prompt instead; the retriever alone gets the question.
    reply = ask(haystack_app(pipeline, inputs={"prompt_builder": {"ask": "fixed?"}}))
    assert reply["answer"].startswith("fixed? -> ")
    with pytest.raises(AdapterError, match=r"retriever\.top is not an unconnected input"):
        haystack_app(pipeline, question_inputs=["retriever.top", "prompt_builder.ask"])
    with pytest.raises(AdapterError, match=r"no component 'retrieve'.*retriever, prompt_builder"):
        haystack_app(pipeline, question_inputs={"retrieve": "query"})


def test_a_pipeline_with_no_question_input_or_no_answer_is_an_error_that_says_what_to_do():
    pipeline = Pipeline()
    pipeline.add_component("prompt_builder", PromptBuilder("Tell me about {{ topic }}"))
    pipeline.add_component("llm", MockChatGenerator("Rivers."))
    pipeline.connect("prompt_builder", "llm")
    with pytest.raises(AdapterError, match=r"named 'query' or 'question'.*prompt_builder\.topic"):
        adapt(pipeline)
    reply = ask(haystack_app(pipeline, question_inputs=["prompt_builder.topic"]))
    assert reply == {"answer": "Rivers.", "contexts": []}  # no retriever: no contexts

    alone = Pipeline()
    alone.add_component("builder", PromptBuilder("{{ question }}"))
    with pytest.raises(AdapterError, match="no component of the pipeline gives 'answers'"):
        adapt(alone)
    reply = ask(haystack_app(alone, answer_from="builder.prompt"))
    assert reply == {"answer": QUESTION, "contexts": []}


def test_answer_from_and_documents_from_name_the_components(store):
    pipeline = rag(store, top_k=3)
    pipeline.get_component("answer_builder").reference_pattern = r"\[(\d+)\]"
    # The model's reply cites [1] only; the AnswerBuilder keeps the cited document alone,
    # but the contexts stay all those the model saw.
    reply = ask(haystack_app(pipeline))
    assert len(reply["contexts"]) == 3
    cited = ask(haystack_app(pipeline, documents_from="answer_builder.answers"))
    assert cited["retrieved_ids"] == ["c5"]
    from_llm = ask(haystack_app(pipeline, answer_from="llm"))
    assert from_llm["answer"] == reply["answer"]
    with pytest.raises(AdapterError, match=r"answer_from: llm\.text is not an output.*replies"):
        haystack_app(pipeline, answer_from="llm.text")
    with pytest.raises(AdapterError, match=r"retriever\.documents is a Document: judge reads"):
        ask(haystack_app(pipeline, answer_from="retriever.documents"))


def test_two_generators_whose_replies_go_nowhere_need_answer_from(store):
    pipeline = Pipeline()
    pipeline.add_component("prompt_builder", PromptBuilder("{{ question }}"))
    pipeline.add_component("a", MockChatGenerator("A."))
    pipeline.add_component("b", MockChatGenerator("B."))
    pipeline.connect("prompt_builder", "a")
    pipeline.connect("prompt_builder", "b")
    with pytest.raises(AdapterError, match=r"components a, b each give 'replies'.*answer_from="):
        adapt(pipeline)
    assert ask(haystack_app(pipeline, answer_from="b"))["answer"] == "B."
    # A draft model whose replies a second one refines: the answer is the last one's.
    chained = Pipeline()
    chained.add_component("prompt_builder", PromptBuilder("{{ question }}"))
    chained.add_component("draft", MockChatGenerator("Draft."))
    chained.add_component("refine", MockChatGenerator(response_fn=lambda m: m[-1].text + "!"))
    chained.connect("prompt_builder", "draft")
    chained.connect("draft.replies", "refine.messages")
    assert ask(adapt(chained))["answer"] == "Draft.!"


def test_adapt_leaves_haystack_objects_that_are_not_pipelines_alone(store):
    assert adapt(store) is None
    assert adapt(Document(content="a document")) is None
    assert adapt(InMemoryBM25Retriever(store)) is None
    with pytest.raises(AdapterError, match="not a Haystack pipeline"):
        haystack_app(store)


def test_a_pipeline_named_as_a_file_target_goes_through_the_adapter(tmp_path):
    # `judge experiment DATA --app rag.py:pipeline`: the module-level pipeline is adapted.
    (tmp_path / "rag.py").write_text(
        "from haystack import Pipeline\n"
        "from haystack.components.builders import PromptBuilder\n"
        "from haystack.components.generators.chat import MockChatGenerator\n"
        "pipeline = Pipeline()\n"
        "pipeline.add_component('prompt', PromptBuilder('{{ question }}'))\n"
        "pipeline.add_component('llm', MockChatGenerator('From the file.'))\n"
        "pipeline.connect('prompt', 'llm')\n",
        encoding="utf-8",
    )
    target = f"{tmp_path / 'rag.py'}:pipeline"
    app = as_app(load_target(target), target)
    assert app.is_async and app.target == target and app.fingerprint is not None
    assert parse_reply(asyncio.run(app.call("Q?"))).answer == "From the file."


def test_judge_experiment_runs_a_pipeline_end_to_end(store, models, tmp_path):
    pipeline = rag(store, top_k=3)
    result = experiment(pipeline, apps.QUESTIONS, out=tmp_path / "out", progress=False, **models)

    rows = [json.loads(line) for line in (tmp_path / "out" / "app_outputs.jsonl").open()]
    assert [row["id"] for row in rows] == [q["id"] for q in apps.QUESTIONS]
    for row, item in zip(rows, apps.QUESTIONS, strict=True):
        documents = retrieved(store, 3, item["question"])
        assert row["app_error"] is None
        assert row["retrieved_ids"] == [doc.id for doc in documents]
        assert row["contexts"] == [doc.content for doc in documents]
        assert row["answer"].startswith(f"{item['question']} -> [1] ")
    assert result.config.app["errors"] == {}
    assert {"faithfulness", "mrr", "ndcg@10"} <= set(result.summary)
    assert result.summary["mrr"].mean == 1.0  # BM25 ranks each question's best chunk first


def fails_on_bananas(messages: list[ChatMessage]) -> str:
    if "bananas" in (messages[-1].text or ""):
        raise RuntimeError("the model is down")
    return answer_to(messages)


def test_a_component_that_raises_is_that_questions_app_error(store, models, tmp_path):
    pipeline = rag(store)
    pipeline.get_component("llm").response_fn = fails_on_bananas
    result = experiment(pipeline, apps.QUESTIONS, out=tmp_path / "out", progress=False, **models)

    rows = [json.loads(line) for line in (tmp_path / "out" / "app_outputs.jsonl").open()]
    failed = [row for row in rows if row["app_error"] is not None]
    assert [row["id"] for row in failed] == ["q3"]  # the bananas question
    assert "the model is down" in failed[0]["app_error"]["message"]
    assert sum(result.config.app["errors"].values()) == 1
    assert result.rows[2].error.startswith("the app failed on this question")


RAG_FILE = """
from haystack import Document, Pipeline
from haystack.components.builders import AnswerBuilder, ChatPromptBuilder
from haystack.components.generators.chat import MockChatGenerator
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

store = InMemoryDocumentStore()
store.write_documents([Document(id=k, content=v) for k, v in {chunks!r}.items()])
pipeline = Pipeline()
pipeline.add_component("retriever", InMemoryBM25Retriever(store, top_k=3))
prompt = [ChatMessage.from_user("{{{{ documents }}}} {{{{ question }}}}")]
pipeline.add_component("prompt_builder", ChatPromptBuilder(prompt, required_variables="*"))
pipeline.add_component("llm", MockChatGenerator("An answer."))
pipeline.add_component("answer_builder", AnswerBuilder())
pipeline.connect("retriever", "prompt_builder.documents")
pipeline.connect("prompt_builder", "llm")
pipeline.connect("llm.replies", "answer_builder.replies")
pipeline.connect("retriever", "answer_builder.documents")
"""


def test_the_command_line_takes_a_pipeline_and_its_metrics_equal_judge_ir(store, tmp_path):
    # No --model: the retrieval metrics alone, from the pipeline's document ids.
    (tmp_path / "rag.py").write_text(RAG_FILE.format(chunks=apps.CHUNKS), encoding="utf-8")
    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in apps.QUESTIONS), encoding="utf-8")
    metrics = "mrr,ndcg@3,P@1"
    done = run_cli(
        "experiment", data, "--app", "rag.py:pipeline", "--out", "out", "--metrics", metrics,
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    out = tmp_path / "out"
    rows = [json.loads(line) for line in (out / "app_outputs.jsonl").open()]
    for row, item in zip(rows, apps.QUESTIONS, strict=True):
        assert row["answer"] == "An answer."
        assert row["retrieved_ids"] == [doc.id for doc in retrieved(store, 3, item["question"])]
    summary = json.loads((out / "summary.json").read_text())
    shown = run_cli("ir", "qrels.txt", "run.trec", "--format", "json", "-m", metrics, cwd=out)
    by_ir = json.loads(shown.stdout)["metrics"]
    for metric in metrics.split(","):
        assert summary["metrics"][metric]["mean"] == by_ir[metric]

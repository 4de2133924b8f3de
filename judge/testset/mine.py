"""`judge.testset.mine`: draft test-set items from real questions in logs.

Personal data is masked first; questions are clustered (near duplicates keep their
counts), clusters sampled by frequency with a floor (seeded), candidate chunks pooled by
BM25 (and dense), and one LLM call per question pre-labels the candidates 0-2 and drafts
a reference answer. The items are `origin: log`, `review_status: draft`: people finish
them with `judge testset review`.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, create_model

from judge.aio import gather_or_cancel, sync_twin
from judge.cache.store import Cache
from judge.errors import JudgeError
from judge.llm.config import LLM, Embeddings, PromptRef
from judge.llm.session import LLMSession
from judge.metrics.prompts import load_prompt
from judge.run.data import text_lines
from judge.testset.corpus import Corpus, load_corpus
from judge.testset.failures import CallFailed, settle
from judge.testset.index import Index, pool
from judge.testset.items import Provenance, Rejected, TestsetItem, item_id
from judge.testset.logs import Cluster, cluster, read_questions, sample
from judge.testset.outputs import write_set
from judge.testset.review_calls import Grade, GradeList
from judge.testset.text import language


class Drafted(GradeList):
    """Grades of the candidates, whether they answer the question, and a draft answer."""

    answerable: bool
    answer: str


@functools.cache
def _drafted_of(count: int) -> type[Drafted]:
    sized: Any = Annotated[list[Grade], Field(min_length=count, max_length=count)]
    model: type[Drafted] = create_model(f"Drafted{count}", __base__=Drafted, grades=sized)
    return model


@dataclass
class MineResult:
    """Drafted items from logs, what could not be drafted, and the counts behind them."""

    items: list[TestsetItem]
    failed: list[Rejected]
    corpus: Corpus
    counts: dict[str, Any]
    config: dict[str, Any]
    usage: dict[str, Any]

    def write(self, out: str | os.PathLike[str]) -> None:
        """Write testset.jsonl, qrels, queries.tsv, chunks.jsonl, rejected.jsonl, manifest.json."""
        manifest = {
            "corpus": {"source": self.corpus.source, "sha256": self.corpus.digest},
            "config": self.config,
            "counts": self.counts,
            "usage": self.usage,
        }
        write_set(out, self.items, self.failed, self.corpus, manifest)


def read_log(path: str | os.PathLike[str], column: str | None = None) -> list[str]:
    """The questions of a log: a .txt file (one per line) or any file `judge eval` reads."""
    p = Path(path)
    if p.suffix.lower() == ".txt":
        try:
            lines = [line for _, line in text_lines(p.read_text(encoding="utf-8"))]
        except (OSError, UnicodeDecodeError) as exc:
            raise JudgeError(f"{p}: cannot be read as UTF-8 text ({exc})") from None
        return read_questions([{"question": x} for x in lines if x.strip()], str(p), None)
    from judge.run.data import read_records

    records, source = read_records(path)
    return read_questions(records, source, column)


async def _draft(session: LLMSession, question: str, texts: list[str]) -> Drafted:
    prompt = load_prompt("testset_mine")
    (reply,) = await session.chat(
        prompt.render(question=question, candidates=texts),
        _drafted_of(len(texts)),
        prompt=PromptRef(prompt.name, prompt.version),
        label=prompt.name,
    )
    return reply


async def amine(
    logs: str | os.PathLike[str] | list[str],
    corpus: Corpus | str | os.PathLike[str],
    *,
    llm: LLM,
    n: int,
    seed: int = 0,
    floor: float = 1.0,
    pool_depth: int = 10,
    embeddings: Embeddings | None = None,
    cache: Cache | str | os.PathLike[str] | None = None,
    column_map: Mapping[str, str] | None = None,
) -> MineResult:
    """Draft a golden test set from real questions in logs (`mine` from sync code, `amine`
    awaited).

    Args:
        logs: a .txt file (one question per line), a file `judge eval` reads (question
            column: question, query, user_input, ...; or column_map={"question": ...}),
            or a list of questions.
        corpus: a `Corpus`, or a path `load_corpus` reads.
        llm: the model that pre-labels candidates and drafts answers.
        n: how many distinct questions to draft.
        seed: seeds the sampling of clusters.
        floor: weight added to every cluster's count.
        pool_depth: candidate chunks per question.
        embeddings: an embedding model, for dense candidates too.
        cache: a `Cache` or a path to one; calls are looked up there first.
        column_map: the log's question column (key "question"); the rest, for a corpus
            path, as in `load_corpus`.

    Returns:
        a MineResult; `result.write(folder)` writes the files, drafts for review.
    """
    column_map = dict(column_map or {})
    question_column = column_map.pop("question", None)
    questions = logs if isinstance(logs, list) else read_log(logs, question_column)
    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus, column_map=column_map)
    clusters = cluster(questions)
    if not 1 <= n <= len(clusters):
        raise JudgeError(
            f"-n {n}: the log holds {len(clusters)} distinct questions; "
            f"ask for 1 to {len(clusters)}"
        )
    chosen = sample(clusters, n, seed, floor)
    store = Cache(cache) if isinstance(cache, (str, os.PathLike)) else cache
    session = LLMSession(llm, embeddings=embeddings, cache=store)
    index = Index(corpus)
    vectors: list[list[float] | None] = [None] * len(chosen)
    if embeddings is not None:
        index = Index(corpus, await session.embed([c.text for c in corpus.chunks]))
        vectors = list(await session.embed([c.text for c in chosen], label="testset_embeddings"))
    pools = [pool(index, c.text, pool_depth, v) for c, v in zip(chosen, vectors, strict=True)]
    failed: list[Rejected] = []

    def fail(question: str, reason: str, detail: str) -> None:
        failed.append(
            Rejected(
                type="mined", seed_chunk_ids=[], reason=reason, detail=detail, question=question
            )
        )

    async def one(group: Cluster, positions: list[int]) -> TestsetItem | None:
        texts = [corpus.chunks[p].text for p in positions]
        if not texts:
            fail(group.text, "no_candidates", "no chunk shares a term with the question")
            return None
        reply = await settle(_draft(session, group.text, texts))
        if isinstance(reply, CallFailed):
            fail(group.text, reply.reason, reply.detail)
            return None
        return _item(group, [corpus.chunks[p] for p in positions], reply, seed, llm)

    try:
        made = await gather_or_cancel(one(c, p) for c, p in zip(chosen, pools, strict=True))
    finally:
        await session.aclose()
    masked = Counter(kind for c in clusters for kind in c.masked)
    return MineResult(
        items=[i for i in made if i is not None],
        failed=sorted(failed, key=lambda f: f.question or ""),
        corpus=corpus,
        counts={
            "log_questions": len(questions),
            "clusters": len(clusters),
            "sampled": n,
            "drafted": sum(i is not None for i in made),
            "masked": dict(sorted(masked.items())),
        },
        config={"n": n, "seed": seed, "floor": floor, "pool_depth": pool_depth, "model": llm.model},
        usage={"total": session.usage.total().as_dict()},
    )


def _item(group: Cluster, chunks: list[Any], reply: Drafted, seed: int, llm: LLM) -> TestsetItem:
    grades = {c.chunk_id: g.grade for c, g in zip(chunks, reply.grades, strict=True)}
    gold = [c.chunk_id for c in chunks if grades[c.chunk_id] == 2]
    answerable = reply.answerable and bool(gold)
    gold = gold if answerable else []
    prompt = load_prompt("testset_mine")
    return TestsetItem(
        id=item_id(group.text, reply.answer, gold, "mined"),
        question=group.text,
        reference=reply.answer,
        gold_chunk_ids=gold,
        gold_doc_ids=list(dict.fromkeys(c.doc_id for c in chunks if c.chunk_id in gold)),
        evidence=[],
        type="mined",
        hops=len(gold),
        answerable=answerable,
        expected_behaviour="answer" if answerable else "abstain_or_correct_premise",
        language=language(group.text),
        origin="log",
        relevance=grades,
        checks={
            "log_count": group.count,
            "variants": len(group.members),
            "masked": sorted(set(group.masked)),
        },
        review_status="draft",
        provenance=Provenance(model=llm.model, prompts={prompt.name: prompt.version}, seed=seed),
    )


mine = sync_twin(amine)

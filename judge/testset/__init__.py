"""Golden test sets built from documents and logs: questions, reference answers, gold
chunks, graded relevance (qrels).

`build` samples seed chunks (seeded, stratified by document), generates questions of
several types, checks them (quotes, arithmetic, duplicates, one critic call), pools and
grades candidate chunks in one call per question, and returns a `BuildResult` whose
`write(folder)` writes testset.jsonl, qrels.txt, queries.tsv, chunks.jsonl,
rejected.jsonl and manifest.json. `mine` drafts items from real questions in logs;
`export` writes a set for judge eval, RAGAS or TREC tools; `export_review` and
`import_review` take it through a spreadsheet. See README.md, "Golden test sets".
"""

from __future__ import annotations

from judge.testset.build import BuildResult, abuild, build
from judge.testset.corpus import Chunk, Corpus, load_corpus
from judge.testset.export import export, load_items
from judge.testset.items import QUESTION_TYPES, Rejected, TestsetItem
from judge.testset.mine import MineResult, amine, mine
from judge.testset.review import export_review, import_review
from judge.testset.sampling import DEFAULT_MIX

__all__ = [
    "DEFAULT_MIX",
    "QUESTION_TYPES",
    "BuildResult",
    "Chunk",
    "Corpus",
    "MineResult",
    "Rejected",
    "TestsetItem",
    "abuild",
    "amine",
    "build",
    "export",
    "export_review",
    "import_review",
    "load_corpus",
    "load_items",
    "mine",
]

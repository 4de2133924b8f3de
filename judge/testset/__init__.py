"""Golden test sets built from documents: questions, reference answers, gold chunks, qrels.

`build` samples seed chunks (seeded, stratified by document), generates questions of
several types, checks them (quotes, arithmetic, duplicates, one critic call), pools and
grades candidate chunks in one call per question, and returns a `BuildResult` whose
`write(folder)` writes testset.jsonl, qrels.txt, queries.tsv, rejected.jsonl and
manifest.json. See README.md, "Golden test sets".
"""

from __future__ import annotations

from judge.testset.build import BuildResult, abuild, build
from judge.testset.corpus import Chunk, Corpus, load_corpus
from judge.testset.items import QUESTION_TYPES, Rejected, TestsetItem
from judge.testset.sampling import DEFAULT_MIX

__all__ = [
    "DEFAULT_MIX",
    "QUESTION_TYPES",
    "BuildResult",
    "Chunk",
    "Corpus",
    "Rejected",
    "TestsetItem",
    "abuild",
    "build",
    "load_corpus",
]

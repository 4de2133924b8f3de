"""judge.fields: one column resolution, driven by a field table, for evaluation data
(judge.run.data) and test-set corpora (judge.testset.corpus), each with its own wording."""

from __future__ import annotations

import json
import re

import pytest

from judge.errors import InputFormatError
from judge.fields import Field, FieldTable
from judge.run.data import COLUMNS, load_rows, resolve_columns
from judge.testset.corpus import FIELDS, load_corpus

TABLE = FieldTable(
    (
        Field("body", ("body", "text"), required=True, hint="map={'body': ...}"),
        Field("title", ("title", "heading")),
        Field("tag", ("tag",)),
    ),
    unknown_field="unknown {field!r}; known: {fields}",
    absent_column="missing {column!r}; have: {columns}",
)


def test_the_mapping_comes_first_then_the_first_recognised_name_of_each_field():
    assert TABLE.resolve(["heading", "title", "text", "x"], None) == {
        "body": "text",
        "title": "title",  # preferred over heading
    }
    assert TABLE.resolve(["text", "x", "title"], {"tag": "x", "body": "text"}) == {
        "tag": "x",
        "body": "text",
        "title": "title",
    }
    assert list(TABLE.resolve(["text", "x"], {"title": "x"})) == ["title", "body"]


@pytest.mark.parametrize(
    ("present", "column_map", "source", "message"),
    [
        (["text"], {"colour": "text"}, "", "unknown 'colour'; known: body, title, tag"),
        (["text", "y"], {"tag": "z"}, "f.csv", "f.csv: missing 'z'; have: text, y"),
        (
            ["title", "x"],
            None,
            "f.csv",
            "f.csv: no body column (looked for body, text; columns: title, x); "
            "map yours with map={'body': ...}",
        ),
        ([], None, "", "no body column (looked for body, text; columns: none); map yours"),
    ],
)
def test_bad_mappings_and_missing_fields_say_what_to_do(present, column_map, source, message):
    with pytest.raises(InputFormatError, match=re.escape(message)):
        TABLE.resolve(present, column_map, source)


def test_fields_by_name():
    assert TABLE["title"].names == ("title", "heading") and not TABLE["title"].required
    assert COLUMNS["question"].required and FIELDS["text"].required
    with pytest.raises(KeyError):
        TABLE["nothing"]


@pytest.mark.parametrize(
    ("column_map", "message"),
    [
        (
            {"questions": "q"},
            "column_map key 'questions' is not one of question, answer, contexts, "
            "ground_truth, id, retrieved_ids, relevance",
        ),
        ({"question": "query"}, "column_map: column 'query' is not in the data (columns: q)"),
        (
            None,
            "no question column (looked for question, user_input, query; columns: q); "
            "map yours with column_map={'question': ...}",
        ),
    ],
)
def test_evaluation_data_keeps_its_wording(tmp_path, column_map, message):
    with pytest.raises(InputFormatError, match=re.escape(message)):
        resolve_columns(["q"], column_map)
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"q": "why?"}) + "\n", "utf-8")
    with pytest.raises(InputFormatError, match=re.escape(f"{path}: {message}")):
        load_rows(path, column_map)  # the file is named before the problem
    assert load_rows([{"q": "why?"}], {"question": "q"})[1] == {"question": "q"}


@pytest.mark.parametrize(
    ("column_map", "message"),
    [
        ({"title": "t"}, "--column title=...: the corpus fields are chunk_id, doc_id, text"),
        ({"text": "body"}, "no column 'body' (columns: chunk_id, t)"),
        (
            None,
            "no text column (looked for text, content, contents, chunk, page_content, "
            "passage; columns: chunk_id, t); map yours with --column text=NAME",
        ),
    ],
)
def test_corpora_keep_their_wording(tmp_path, column_map, message):
    path = tmp_path / "chunks.jsonl"
    path.write_text(json.dumps({"chunk_id": "c1", "t": "Tea is a drink."}) + "\n", "utf-8")
    with pytest.raises(InputFormatError, match=re.escape(f"{path}: {message}")):
        load_corpus(path, column_map=column_map)
    corpus = load_corpus(path, column_map={"text": "t"})
    assert [(c.chunk_id, c.text) for c in corpus.chunks] == [("c1", "Tea is a drink.")]


def test_a_missing_field_suggests_the_mapping_of_a_synonym_present():
    assert COLUMNS.no_column("contexts", ["query", "docs"]) == (
        "no contexts column (looked for contexts, retrieved_contexts; columns: query, docs); "
        "map yours with column_map={'contexts': 'docs'}"
    )
    assert COLUMNS.no_column("ground_truth", ["q"]).endswith(
        "map yours with column_map={'ground_truth': ...}"
    )
    with pytest.raises(InputFormatError, match=re.escape("column_map={'question': 'input'}")):
        resolve_columns(["input", "output"], None)

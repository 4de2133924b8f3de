"""judge.testset without a model: corpus reading and splitting, thin chunks, bad input,
the mix, seed sampling, the BM25 index, quotes, and the arithmetic of calculations."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest

from judge.errors import InputFormatError, JudgeError
from judge.testset.calc import CalculationError, evaluate, matches
from judge.testset.corpus import load_corpus
from judge.testset.index import Index, rank_of
from judge.testset.sampling import MixError, allocate, parse_mix, stratified_order
from judge.testset.text import find_quote, language, overlap, tokens
from judge.testset.thin import thin_reason
from tests.helpers.testset import DOCS, write_corpus


@pytest.fixture
def docs(tmp_path):
    return write_corpus(tmp_path / "docs")


def test_documents_are_split_with_spans_and_content_hash_ids(docs, tmp_path):
    corpus = load_corpus(docs, chunk_size=300)
    assert corpus.split and {c.doc_id for c in corpus.chunks} == set(DOCS)
    for chunk in corpus.chunks:
        assert DOCS[chunk.doc_id][chunk.start : chunk.end] == chunk.text
        assert len(chunk.chunk_id) == 16
    # Chinese is cut at sentence ends, never inside a sentence.
    for chunk in corpus.chunks:
        if chunk.doc_id in ("tea.md", "bikes.txt") and chunk.end < len(DOCS[chunk.doc_id].rstrip()):
            assert chunk.text.rstrip()[-1] in "。！？"
    # Ids depend on content: unchanged documents keep their chunk ids when another changes.
    (docs / "library.txt").write_text(DOCS["library.txt"] + "\nA new closing remark.\n", "utf-8")
    again = load_corpus(docs, chunk_size=300)
    same = {c.chunk_id for c in corpus.chunks if c.doc_id != "library.txt"}
    assert same <= {c.chunk_id for c in again.chunks}
    assert again.digest != corpus.digest


def test_chunk_files_keep_the_users_ids_with_column_mapping(tmp_path):
    rows = [
        {"pid": "p1", "source": "d1", "body": "Alpha " * 30},
        {"pid": "p2", "source": "d1", "body": "Beta " * 30},
    ]
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    corpus = load_corpus(path, column_map={"chunk_id": "pid", "text": "body"})
    assert [(c.chunk_id, c.doc_id) for c in corpus.chunks] == [("p1", "d1"), ("p2", "d1")]
    assert not corpus.split and corpus.chunks[0].start is None
    csv = tmp_path / "chunks.csv"
    csv.write_text("chunk_id,doc_id,text\nc1,d1," + "word " * 30 + "\n", "utf-8")
    assert load_corpus(csv).chunks[0].chunk_id == "c1"


def test_a_file_of_documents_is_split(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"doc_id": "tea", "text": DOCS["tea.md"]}) + "\n", "utf-8")
    corpus = load_corpus(path, chunk_size=200)
    assert corpus.split and len(corpus.chunks) > 1 and {c.doc_id for c in corpus.chunks} == {"tea"}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([], "the corpus is empty"),
        ([{"chunk_id": "a", "text": "x"}, {"chunk_id": "a", "text": "y"}], "used by rows 0 and 1"),
        ([{"chunk_id": "a", "body": "x"}], "no text column"),
        ([{"chunk_id": "a", "text": ""}], "row 0 has no text"),
        ([{"chunk_id": "a b", "text": "x"}], "must not hold spaces"),
        ([{"chunk_id": "a\x1b[2J", "text": "x"}], "control character"),
    ],
)
def test_bad_chunk_files_are_clear_errors(tmp_path, rows, message):
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    with pytest.raises(InputFormatError, match=message):
        load_corpus(path)


def test_bad_folders_and_files_are_clear_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFormatError, match=r"no \.txt or \.md documents"):
        load_corpus(tmp_path / "empty")
    with pytest.raises(InputFormatError, match="no such file"):
        load_corpus(tmp_path / "missing.jsonl")
    bad = tmp_path / "latin1"
    bad.mkdir()
    (bad / "a.txt").write_bytes(b"caf\xe9 " * 40)
    with pytest.raises(InputFormatError, match="cannot be read as UTF-8"):
        load_corpus(bad)
    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "a.md").write_text("   \n\n", "utf-8")
    with pytest.raises(InputFormatError, match="hold no text"):
        load_corpus(blank)


def test_thin_chunks_are_marked_by_cheap_rules(tmp_path):
    assert thin_reason("Too short to ask about.") == "too_short"
    toc = "\n".join(
        f"Chapter {i} the story of part {i} goes on here ........ {i * 7}" for i in range(8)
    )
    assert thin_reason(toc) == "table_of_contents"
    assert thin_reason("| 1 | 2 | 3 | 4 |\n" * 30) == "mostly_symbols_or_numbers"
    notice = "Copyright 2024 Example Corp. All rights reserved. " + "Reproduction is limited. " * 6
    assert thin_reason(notice) == "boilerplate"
    assert thin_reason(DOCS["library.txt"]) is None
    # A footer repeated in three documents is thin wherever it is.
    footer = (
        "Visit our website for opening hours, prices, events and the latest news about the "
        "town museum and its many collections today."
    )
    folder = tmp_path / "footer"
    folder.mkdir()
    for name in "abc":
        (folder / f"{name}.md").write_text(
            f"# {name}\n\n{DOCS['library.txt']}\n\n{footer}\n", "utf-8"
        )
    corpus = load_corpus(folder, chunk_size=300)
    assert {c.thin for c in corpus.chunks if c.text == footer} == {"repeated_in_many_documents"}


def test_mix_parsing_and_allocation():
    assert parse_mix("single_hop=0.5, multi_hop=0.5") == {"single_hop": 0.5, "multi_hop": 0.5}
    assert sum(parse_mix(None).values()) == pytest.approx(1)
    for bad, message in [
        ("single_hop=0.5,multihop=0.5", "unknown question type 'multihop'"),
        ("single_hop=0.5,multi_hop=0.4", "sum to 0.9"),
        ("single_hop=1.5,multi_hop=-0.5", "from 0 to 1"),
        ("single_hop", "from 0 to 1"),
        ("single_hop=half", "write TYPE=SHARE"),
    ]:
        with pytest.raises(MixError, match=message):
            parse_mix(bad)
    for n in (1, 7, 10, 33):
        counts = allocate(n, parse_mix(None))
        assert sum(counts.values()) == n
        assert all(abs(c - n * parse_mix(None)[t]) < 1 for t, c in counts.items())


def test_seed_order_is_seeded_and_stratified_by_document(docs):
    corpus = load_corpus(docs, chunk_size=300)
    first = stratified_order(corpus.seeds, seed=3)
    assert [c.chunk_id for c in first] == [c.chunk_id for c in stratified_order(corpus.seeds, 3)]
    assert [c.chunk_id for c in first] != [c.chunk_id for c in stratified_order(corpus.seeds, 4)]
    # The first round takes one chunk from each document before any document gives two.
    docs_count = len({c.doc_id for c in corpus.seeds})
    assert Counter(c.doc_id for c in first[:docs_count]).most_common(1)[0][1] == 1


def test_bm25_index_ranks_the_chunk_with_the_words_first_in_both_languages(docs):
    corpus = load_corpus(docs, chunk_size=300)
    index = Index(corpus)
    top = index.bm25("skylights of the reading room", 5)
    assert "57 round skylights" in corpus.chunks[top[0]].text
    top_zh = index.bm25("龙井茶用多少度的水冲泡", 5)
    assert "80 度" in corpus.chunks[top_zh[0]].text
    assert index.bm25("the of and", 5) == []  # only stop words: nothing to rank
    assert rank_of([4, 2, 7], [7, 9]) == 3 and rank_of([4], [1]) is None


def test_text_helpers():
    assert language("西湖龙井产于浙江省杭州市。") == "zh" and language("Tea from Hangzhou") == "en"
    assert "龙井" in tokens("西湖龙井") and "the" not in tokens("the tea")
    assert overlap("When did the library open?", "The library opened in 1935.") == pytest.approx(
        0.5
    )
    text = "The  last boat\nleaves at 23:40."
    assert find_quote("last boat leaves", text) == (5, 21)  # spans the newline
    assert text[slice(*find_quote("LAST BOAT", text))] == "last boat"
    assert find_quote("first boat", text) is None
    # Retyped quotes: full-width forms, curly apostrophes; the span is the chunk's own text.
    zh = "冲泡龙井茶宜用 80 度左右的热水（不宜用沸水）。"
    span = find_quote("宜用 ８０ 度左右的热水(不宜用沸水)", zh)
    assert span is not None and zh[slice(*span)] == "宜用 80 度左右的热水（不宜用沸水）"
    en = "The library's reading room"
    assert en[slice(*find_quote("library’s reading", en))] == "library's reading"


def test_calculation_expressions_are_walked_never_evaluated():
    assert evaluate("(b - a) / a * 100", {"a": 4.2, "b": 5.04}) == pytest.approx(20)
    assert evaluate("buildings × floors", {"buildings": 3, "floors": 6}) == 18
    for expression, message in [
        ("__import__('os').system('true')", "Call is not allowed"),
        ("a.real", "Attribute is not allowed"),
        ("c + 1", "'c' is not one of the operands"),
        ("2 ** 1000", "too large"),
        ("a / 0", "cannot be computed"),
        ("a +", "not an arithmetic expression"),
        ("True + 1", "not numbers"),
    ]:
        with pytest.raises(CalculationError, match=message):
            evaluate(expression, {"a": 1.0})
    assert matches(20.0, "Revenue grew by 20%.") and matches(216, "一共有 216 间教室。")
    assert matches(1234.5, "1,234.5 dollars") and not matches(20.0, "about 25%")
    with pytest.raises(JudgeError):
        evaluate("x" * 600, {})


def test_without_the_splitter_documents_are_a_clear_error_and_chunks_still_load(
    docs, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "semantic_text_splitter", None)  # as if not installed
    with pytest.raises(JudgeError, match=r"pip install 'judge\[testset\]'"):
        load_corpus(docs)
    path = tmp_path / "chunks.jsonl"
    path.write_text(json.dumps({"chunk_id": "c1", "doc_id": "d", "text": "Alpha " * 30}) + "\n")
    assert [c.chunk_id for c in load_corpus(path).chunks] == ["c1"]


def test_parquet_files_and_saved_datasets_of_chunks(tmp_path):
    import datasets

    rows = [
        {"chunk_id": f"c{i}", "doc_id": "d", "text": f"Text number {i} " * 10} for i in range(3)
    ]
    dataset = datasets.Dataset.from_list(rows)
    dataset.to_parquet(str(tmp_path / "chunks.parquet"))
    dataset.save_to_disk(str(tmp_path / "saved"))
    for source in (tmp_path / "chunks.parquet", tmp_path / "saved"):
        corpus = load_corpus(source)
        assert [c.chunk_id for c in corpus.chunks] == ["c0", "c1", "c2"] and not corpus.split

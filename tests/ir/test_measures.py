"""Metric names as values, and the trec_eval conventions that are easy to get wrong."""

from __future__ import annotations

import warnings

import pytest

from judge.cli.main import main
from judge.errors import CoverageWarning, JudgeError, UnknownMetricError
from judge.ir import Measure, evaluate, parse_measure, parse_measures, valid_names
from judge.ir.small import score_small


@pytest.mark.parametrize(
    ("name", "measure"),
    [
        ("P@5", Measure("P", 5)),
        ("recall@100", Measure("recall", 100)),
        ("hit_rate@1", Measure("hit_rate", 1)),
        ("mrr", Measure("mrr")),
        ("mrr@10", Measure("mrr", 10)),
        ("map", Measure("map")),
        ("map@1000", Measure("map", 1000)),
        ("ndcg", Measure("ndcg")),
        ("ndcg@10", Measure("ndcg", 10)),
        ("ndcg_exp@5", Measure("ndcg_exp", 5)),
        ("r_precision", Measure("r_precision")),
        ("bpref", Measure("bpref")),
        ("judged@10", Measure("judged", 10)),
    ],
)
def test_names_parse_and_print_back(name, measure):
    assert parse_measure(name) == measure
    assert measure.name == name


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("ndcg_cut_10", "did you mean 'ndcg@10'?"),
        ("P_5", "did you mean 'P@5'?"),
        ("recip_rank", "did you mean 'mrr'?"),
        ("Rprec", "did you mean 'r_precision'?"),
        ("success_10", "did you mean 'hit_rate@10'?"),
        ("p@5", "case-sensitive: 'P'"),
        ("bleu", "valid names: P@k"),
        ("P", "write it as 'P@k'"),
        ("r_precision@5", "without @k"),
        ("ndcg@0", "at least 1"),
        ("unj_10", "'judged@10' = 1 - trec_eval's unj_10"),
        ("judged", "write it as 'judged@k'"),
        ("bpref@10", "without @k"),
    ],
)
def test_bad_names_explain_themselves(name, hint):
    with pytest.raises(UnknownMetricError) as info:
        parse_measure(name)
    assert hint in str(info.value)


def test_unknown_name_lists_every_valid_name():
    with pytest.raises(UnknownMetricError) as info:
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ndcg@10", "nope"])
    for valid in valid_names():
        assert valid in str(info.value)


def test_comma_separated_and_repeated_names():
    assert [m.name for m in parse_measures("map, ndcg@10,map")] == ["map", "ndcg@10"]
    with pytest.raises(UnknownMetricError, match="no metric given"):
        parse_measures([])


def test_ties_are_broken_by_doc_id_descending():
    qrels = {"q": {"a": 1}}
    run = {"q": {"a": 0.5, "b": 0.5, "c": 0.5, "z": 0.9}}
    # z first (higher score), then the tie c, b, a: the relevant doc 'a' is ranked 4th.
    assert evaluate(qrels, run, ["mrr"])["mrr"] == 0.25
    run["q"]["0"] = 0.5  # a smaller doc id in the tie does not move 'a'
    assert evaluate(qrels, run, ["mrr"])["mrr"] == 0.25


def test_relevance_level_sets_relevance_but_not_ndcg_gains():
    qrels = {"q": {"a": 1, "b": 2}}
    run = {"q": {"a": 0.9, "b": 0.1}}
    at_two = evaluate(qrels, run, ["P@1", "mrr", "ndcg"], relevance_level=2)
    at_one = evaluate(qrels, run, ["ndcg"])
    assert at_two["P@1"] == 0.0 and at_two["mrr"] == 0.5
    assert at_two["ndcg"] == at_one["ndcg"]  # gains are the raw grades at any level


def test_a_relevance_level_below_one_is_refused_where_trec_eval_counts_more(tmp_path, capsys):
    # trec_eval 10.0 on these (form_res_rels.c: a doc is relevant when its grade >= -l, a
    # doc not judged has grade -1): -l 1 gives P_1 0, recip_rank 0.5, map 0.5; -l 0 counts
    # "a" (judged 0) relevant: P_1 1, recip_rank 1, map 1; -l -1 counts "c" (not judged)
    # too, in P and MAP's sum but not in num_rel: map 1.5. judge ranks only positively
    # graded documents (at 0 it gave P@1 0 and map 0.25, matching neither): refused.
    qrels = {"q": {"a": 0, "b": 1}}
    run = {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}
    assert dict(evaluate(qrels, run, ["P@1", "mrr", "map"])) == {"P@1": 0, "mrr": 0.5, "map": 0.5}
    (tmp_path / "qrels").write_text("q 0 a 0\nq 0 b 1\n")
    (tmp_path / "run").write_text("q Q0 a 1 3 t\nq Q0 b 2 2 t\nq Q0 c 3 1 t\n")
    for level in (0, -1):
        said = f"relevance_level {level}: give 1 or more"
        with pytest.raises(JudgeError, match=said):
            evaluate(qrels, run, ["P@1"], relevance_level=level)
        with pytest.raises(JudgeError, match=said):
            score_small(qrels, run, ["P@1"], relevance_level=level)
        for flag in ("-l", "--relevance-level"):
            assert (
                main(["ir", str(tmp_path / "qrels"), str(tmp_path / "run"), flag, str(level)]) == 2
            )
            assert f"--relevance-level {level}: give 1 or more" in capsys.readouterr().err


def test_missing_and_unjudged_queries_are_reported_and_counted():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"a": 0}}
    run = {"q1": {"a": 1.0}, "q3": {"a": 1.0}, "extra": {"a": 1.0}}
    with pytest.warns(CoverageWarning) as record:
        result = evaluate(qrels, run, ["P@1"], per_query=True)
    messages = " | ".join(str(w.message) for w in record)
    assert "1 of 3 judged queries have no results" in messages and "'q2'" in messages
    assert "1 run query without judgments, ignored: 'extra'" in messages
    assert result == {"q1": {"P@1": 1.0}, "q2": {"P@1": 0.0}, "q3": {"P@1": 0.0}}
    assert result.missing_queries == ("q2",) and result.unjudged_queries == ("extra",)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        assert evaluate(qrels, run, ["P@1"])["P@1"] == pytest.approx(1 / 3, abs=1e-15)


def test_complete_coverage_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, "P@1,map")
    assert result == {"P@1": 1.0, "map": 1.0}
    assert result.missing_queries == () and result.unjudged_queries == ()


def test_bpref_and_judged_by_hand():
    # Ranked: d2 (judged non-relevant), d1 (relevant), x (not in the qrels), d3 (relevant),
    # d5 (graded -1: in the pool but not judged, for trec_eval). R = 2, N = 2 (d2, d4).
    qrels = {"q1": {"d1": 1, "d2": 0, "d3": 1, "d4": 0, "d5": -1}}
    run = {"q1": {"d2": 5.0, "d1": 4.0, "x": 3.0, "d3": 2.0, "d5": 1.0}}
    names = ["bpref", "judged@1", "judged@3", "judged@5", "judged@10"]
    for scores in (evaluate(qrels, run, names), score_small(qrels, run, names).values):
        values = {
            name: float(value if isinstance(value, float) else value[0])
            for name, value in dict(scores).items()
        }
        # Each relevant doc has one judged non-relevant doc above it: (1 - 1/2) each, / R.
        assert values["bpref"] == 0.5
        # Unjudged: x and d5; ranks past the run's end count as judged (trec_eval's unj).
        assert values == {
            "bpref": 0.5,
            "judged@1": 1.0,
            "judged@3": 1 - 1 / 3,
            "judged@5": 0.6,
            "judged@10": 0.8,
        }
    # Two judged non-relevant docs above, capped at min(N, R) = 2: the second scores 0.
    run = {"q1": {"d2": 5.0, "d4": 4.5, "d1": 4.0, "d3": 2.0}}
    assert evaluate(qrels, run, ["bpref"])["bpref"] == (0.0 + 0.0) / 2
    run = {"q1": {"d1": 5.0, "d2": 4.5, "d3": 4.0}}  # 1 + (1 - 1/2), / 2
    assert evaluate(qrels, run, ["bpref"])["bpref"] == 0.75
    # At -l 2 a grade-1 doc is non-relevant: no relevant doc, bpref 0 (not NaN).
    assert evaluate(qrels, run, ["bpref"], relevance_level=2)["bpref"] == 0.0


def test_asking_for_bpref_leaves_the_other_metrics_alone():
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "fixtures" / "ir-conformance" / "trec_eval_test"
    names = ["map", "ndcg@10", "ndcg", "P@5", "mrr", "r_precision", "recall@100"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        for qrels, run in (
            ("qrels.comment.test", "results.comment.test"),
            ("qrels.rel_level", "results.test"),
        ):
            alone = evaluate(data / qrels, data / run, names, per_query=True)
            both = evaluate(
                data / qrels, data / run, [*names, "bpref", "judged@10"], per_query=True
            )
            assert {q: {n: v[n] for n in names} for q, v in both.items()} == dict(alone)


def test_judge_ir_prints_bpref_and_judged_as_trec_eval_does(capsys):
    from pathlib import Path

    data = Path(__file__).resolve().parents[2] / "fixtures" / "ir-conformance" / "trec_eval_test"
    args = ["ir", str(data / "qrels.test"), str(data / "results.trunc"), "-q"]
    assert main([*args, "-m", "bpref,judged@20"]) == 0
    out, err = capsys.readouterr()
    # trec_eval -c -q -m bpref -m unj.20 qrels.test results.trunc (its out.test.aqc lines)
    printed = {}
    for line in (data / "out.test.aqc").read_text().splitlines():
        measure, query, value = (field.strip() for field in line.split("\t"))
        if measure == "bpref":
            printed[("bpref", query)] = value
        if measure == "unj_20":
            printed[("judged@20", query)] = f"{1 - float(value):.4f}"
    lines = [line.split("\t") for line in out.splitlines()]
    assert {(name.strip(), query): value for name, query, value in lines} == printed
    assert lines[0][0] == f"{'bpref':<22}"  # spelled and padded as trec_eval prints it
    # The query missing from the run scores 0, but judged@k 1: nothing unjudged in it.
    assert "score 0 (judged@k 1)" in err and "'302'" in err

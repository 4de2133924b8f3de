"""The run plan: one resolver for every metric form, one typed config, a plan that pickles."""

from __future__ import annotations

import json
import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from judge.errors import InputFormatError, JudgeError, UnknownMetricError
from judge.ir.measure_names import cutoff_of
from judge.llm.config import LLM, Embeddings
from judge.metrics.custom import judged_metric
from judge.metrics.registry import BUILTIN, Metric
from judge.metrics.resolve import NO_JUDGE_MODEL, choose_metrics
from judge.run.config import RunConfig
from judge.run.data import load_rows
from judge.run.plan import RunPlan, plan_run
from judge.run.shard import Shard

ROWS = [
    {
        "question": "Who wrote Hamlet?",
        "answer": "Shakespeare.",
        "contexts": ["Hamlet is a play by William Shakespeare."],
        "ground_truth": "William Shakespeare",
        "retrieved_ids": ["d1", "d2"],
        "relevance": {"d1": 2},
    }
]

RUBRIC = "<<<system>>>\nRate the answer's tone.\n<<<user>>>\n{{question}}\n{{answer}}\n"


class Tone(BaseModel):
    level: int


def tone_metric() -> Metric:
    return judged_metric("tone", prompt=RUBRIC, output=Tone, score=lambda r: r.level / 4)


def _plan(metrics: object, **kwargs: object) -> RunPlan:
    rows, columns, source = load_rows(ROWS)
    plan, hashes = plan_run(rows, columns, source, metrics=metrics, **kwargs)  # type: ignore[arg-type]
    assert len(hashes) == plan.data_rows == 1
    return plan


def test_every_metric_form_goes_through_one_resolver() -> None:
    tone = tone_metric()
    plan = _plan(
        ["faithfulness", "context_ndcg@5", tone, "ndcg@10", "P@5"],
        llm=LLM("openai/judge"),
    )
    assert [m.name for m in plan.metrics.judged] == ["faithfulness", "context_ndcg@5", "tone"]
    assert plan.metrics.retrieval == ("ndcg@10", "P@5")
    assert plan.names == ["faithfulness", "context_ndcg@5", "tone", "ndcg@10", "P@5"]


def test_the_default_without_a_model_is_the_retrieval_metrics_and_with_one_says_what_it_skips() -> (
    None
):
    alone = _plan(None)
    assert alone.metrics.judged == () and "ndcg@10" in alone.metrics.retrieval
    judged = _plan(None, llm=LLM("openai/judge"))
    assert "answer_relevancy" not in judged.names
    assert judged.metrics.notes and "answer_relevancy" in judged.metrics.notes[0]
    both = _plan(None, llm=LLM("openai/judge"), embeddings=Embeddings("openai/emb"))
    assert "answer_relevancy" in both.names and both.metrics.notes == ()


def test_the_resolvers_errors_are_the_users() -> None:
    with pytest.raises(InputFormatError, match=re.escape(NO_JUDGE_MODEL)):
        choose_metrics(["faithfulness"], has_retrieval=False, has_llm=False, embeddings=False)
    with pytest.raises(UnknownMetricError, match="did you mean 'faithfulness'"):
        choose_metrics(["faithfulnes"], has_retrieval=False, has_llm=True, embeddings=False)
    with pytest.raises(InputFormatError, match="need retrieval columns"):
        choose_metrics(["ndcg@10"], has_retrieval=False, has_llm=False, embeddings=False)
    with pytest.raises(JudgeError, match="needs an embedding model"):
        choose_metrics(["answer_relevancy"], has_retrieval=False, has_llm=True, embeddings=False)


def test_context_ndcg_cutoffs_are_read_as_retrieval_cutoffs_are() -> None:
    assert cutoff_of("context_ndcg@5", "context_ndcg") == 5
    assert cutoff_of("ndcg@10", "ndcg") == 10
    for wrong in ("context_ndcg@0", "context_ndcg", "context_ndcg@x", "context_ndcg@٣"):
        assert cutoff_of(wrong, "context_ndcg") is None
    with pytest.raises(UnknownMetricError):
        choose_metrics(["context_ndcg@0"], has_retrieval=False, has_llm=True, embeddings=False)


def test_the_fingerprint_follows_what_decides_the_results() -> None:
    base = _plan(["faithfulness"], llm=LLM("openai/judge"))
    assert _plan(["faithfulness"], llm=LLM("openai/judge")).fingerprint == base.fingerprint
    assert _plan(["faithfulness"], llm=LLM("openai/other")).fingerprint != base.fingerprint
    assert _plan(["context_recall"], llm=LLM("openai/judge")).fingerprint != base.fingerprint
    server = LLM("openai/judge", api_base="http://127.0.0.1:9/v1")
    assert _plan(["faithfulness"], llm=server).fingerprint != base.fingerprint


def test_a_plan_pickles_with_built_in_metrics_and_is_the_same_plan() -> None:
    plan = _plan(["faithfulness", "context_ndcg@3", "mrr"], llm=LLM("openai/judge"))
    plan = RunPlan(**{**plan.__dict__, "shard": Shard(2, 3)})
    again = pickle.loads(pickle.dumps(plan))
    assert again.names == plan.names and again.fingerprint == plan.fingerprint
    assert again.metrics.judged[0] is BUILTIN["faithfulness"]
    assert again.shard == Shard(2, 3) and again.prompts == plan.prompts


def test_a_plan_with_module_metrics_is_resolved_again_in_a_fresh_process(tmp_path: Path) -> None:
    module = tmp_path / "tone_metrics.py"
    module.write_text(
        "from pydantic import BaseModel\n"
        "from judge.metrics.custom import judged_metric\n"
        "class Tone(BaseModel):\n    level: int\n"
        f"tone = judged_metric('tone', prompt={RUBRIC!r}, output=Tone, score=lambda r: 1.0)\n",
        encoding="utf-8",
    )
    from judge.metrics.plugins import extra_metrics

    custom = {n: x.metric for n, x in extra_metrics([str(module)]).items()}
    rows, columns, source = load_rows(ROWS)
    plan, _ = plan_run(
        rows,
        columns,
        source,
        metrics=["tone", "faithfulness"],
        llm=LLM("openai/judge"),
        custom=custom,
        metric_modules=[str(module)],
    )
    sent = tmp_path / "plan.pickle"
    sent.write_bytes(pickle.dumps(plan))
    script = textwrap.dedent(
        f"""
        import pickle, sys
        plan = pickle.loads(open({str(sent)!r}, "rb").read())
        print(plan.names, plan.fingerprint, plan.metrics.judged[0].version)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[-2] == plan.fingerprint and out[-1] == plan.metrics.judged[0].version
    # the module changed in between: the plan refuses to arrive as another run
    module.write_text(module.read_text().replace("Rate the answer", "Grade the answer"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode != 0 and "changed while the run was starting" in done.stderr


def test_the_typed_config_keeps_summary_jsons_form() -> None:
    plan = _plan(["faithfulness", "mrr"], llm=LLM("openai/judge"))
    config = plan.config(cache="c.sqlite", cache_mode="replay", seconds=1.5, notes=["hint"])
    form = config.as_json()
    assert list(form) == [
        "source", "columns", "metrics", "model", "embeddings", "structured_output",
        "prompts", "cache", "cache_mode", "run", "data", "resumed_rows", "seconds", "notes",
    ]  # fmt: skip
    assert form["data"] == {"rows": 1, "sha256": plan.data_sha256}
    assert RunConfig.from_json(json.loads(json.dumps(form))) == config
    assert config["cache_mode"] == "replay" and dict(config) == form  # read as the mapping
    sharded = RunConfig.from_json({**form, "shard": {"index": 1, "count": 2}, "cache_damaged": 3})
    assert list(sharded.as_json())[-2:] == ["shard", "cache_damaged"]
    on_ray = plan.config(ray={"address": "local", "actors": 2}).as_json()
    assert list(on_ray).index("ray") == list(on_ray).index("seconds") + 1


def test_run_options_are_evaluates_own_keywords() -> None:
    import inspect
    import typing

    from judge.run.evaluate import aevaluate, evaluate
    from judge.run.options import RunOptions

    parameters = inspect.signature(aevaluate).parameters
    hints = typing.get_type_hints(aevaluate)
    options = typing.get_type_hints(RunOptions)
    assert set(options) <= set(parameters)
    for name, hint in options.items():
        assert hint == hints[name], name
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert inspect.signature(evaluate) == inspect.signature(aevaluate)
    assert evaluate.__doc__ == aevaluate.__doc__ and "Args:" in (evaluate.__doc__ or "")


def test_the_cli_hands_custom_metrics_to_the_library_as_objects() -> None:
    import inspect

    from judge.cli.options import chosen_metrics
    from judge.run.evaluate import evaluate

    tone = tone_metric()
    chosen = chosen_metrics(["tone", "faithfulness", "ndcg@10"], {"tone": tone})
    assert chosen == [tone, "faithfulness", "ndcg@10"] and chosen_metrics(None, {}) is None
    with pytest.raises(UnknownMetricError, match="did you mean 'tone'"):
        chosen_metrics(["tonee"], {"tone": tone})
    assert "custom" not in inspect.signature(evaluate).parameters  # metrics= takes objects

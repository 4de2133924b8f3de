"""judge: exact, reproducible evaluation of retrieval-augmented generation (RAG) systems.

Importing this package is cheap: it loads neither litellm nor the datasets library. The
LLM-judged API (`judge.score`, `judge.LLM`, ...) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge.errors import CoverageWarning, InputFormatError, JudgeError, UnknownMetricError
from judge.version import __version__

if TYPE_CHECKING:  # what the lazy names below resolve to, for type checkers and editors
    from judge.cache.store import Cache
    from judge.comparison.evaluations import Comparison, compare
    from judge.comparison.plan import QuestionPlan, plan_questions
    from judge.experiments.experiment import aexperiment, experiment
    from judge.labels.agreement import AgreementResult, aagreement, agreement
    from judge.labels.plan import LabelPlan, plan_labels
    from judge.llm.config import LLM, Embeddings
    from judge.metrics.custom import judged_metric
    from judge.metrics.registry import Metric, MetricScore
    from judge.probes.probe import aprobe, probe
    from judge.probes.result import ProbeResult
    from judge.pytest_plugin.assertions import (
        assert_evaluation,
        assert_scores,
        at_least,
        at_most,
    )
    from judge.pytest_plugin.regression import assert_no_regression
    from judge.run.dry_run import DryRun, adry_run, dry_run
    from judge.run.evaluate import aevaluate, evaluate
    from judge.run.gates import Gates
    from judge.run.load import load_run
    from judge.run.results import EvaluationResult
    from judge.run.rows import ResultRow
    from judge.run.score import SampleResult, ascore, score
    from judge.stats import PPIEstimate, ppi_mean, ppi_mean_difference

# name -> module that defines it, imported on first access (PEP 562)
_LAZY = {
    "score": "judge.run.score",
    "ascore": "judge.run.score",
    "SampleResult": "judge.run.score",
    "LLM": "judge.llm.config",
    "Embeddings": "judge.llm.config",
    "Cache": "judge.cache.store",
    "evaluate": "judge.run.evaluate",
    "experiment": "judge.experiments.experiment",
    "aexperiment": "judge.experiments.experiment",
    "dry_run": "judge.run.dry_run",
    "adry_run": "judge.run.dry_run",
    "DryRun": "judge.run.dry_run",
    "aevaluate": "judge.run.evaluate",
    "EvaluationResult": "judge.run.results",
    "Gates": "judge.run.gates",
    "load_run": "judge.run.load",
    "ResultRow": "judge.run.rows",
    "Metric": "judge.metrics.registry",
    "MetricScore": "judge.metrics.registry",
    "judged_metric": "judge.metrics.custom",
    "compare": "judge.comparison.evaluations",
    "Comparison": "judge.comparison.evaluations",
    "agreement": "judge.labels.agreement",
    "aagreement": "judge.labels.agreement",
    "AgreementResult": "judge.labels.agreement",
    "probe": "judge.probes.probe",
    "aprobe": "judge.probes.probe",
    "ProbeResult": "judge.probes.result",
    "assert_scores": "judge.pytest_plugin.assertions",
    "assert_evaluation": "judge.pytest_plugin.assertions",
    "at_least": "judge.pytest_plugin.assertions",
    "at_most": "judge.pytest_plugin.assertions",
    "assert_no_regression": "judge.pytest_plugin.regression",
    "ppi_mean": "judge.stats",
    "ppi_mean_difference": "judge.stats",
    "PPIEstimate": "judge.stats",
    "plan_questions": "judge.comparison.plan",
    "QuestionPlan": "judge.comparison.plan",
    "plan_labels": "judge.labels.plan",
    "LabelPlan": "judge.labels.plan",
}

__all__ = [
    "LLM",
    "AgreementResult",
    "Cache",
    "Comparison",
    "CoverageWarning",
    "DryRun",
    "Embeddings",
    "EvaluationResult",
    "Gates",
    "InputFormatError",
    "JudgeError",
    "LabelPlan",
    "Metric",
    "MetricScore",
    "PPIEstimate",
    "ProbeResult",
    "QuestionPlan",
    "ResultRow",
    "SampleResult",
    "UnknownMetricError",
    "__version__",
    "aagreement",
    "adry_run",
    "aevaluate",
    "aexperiment",
    "agreement",
    "aprobe",
    "ascore",
    "assert_evaluation",
    "assert_no_regression",
    "assert_scores",
    "at_least",
    "at_most",
    "compare",
    "dry_run",
    "evaluate",
    "experiment",
    "judged_metric",
    "load_run",
    "plan_labels",
    "plan_questions",
    "ppi_mean",
    "ppi_mean_difference",
    "probe",
    "score",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'judge' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)

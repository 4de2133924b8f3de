"""Deterministic scorers of the generation metrics: pure functions on judged data, no LLM.

Each returns a float; NaN where the value is undefined (nothing to score). The metric
layer attaches the machine-readable reason. Faithfulness and answer relevance follow the
RAGAS paper (Es, James, Espinosa-Anke and Schockaert, "RAGAS: Automated Evaluation of
Retrieval Augmented Generation", EACL 2024 demos, arXiv:2309.15217, section 3); context
precision, context recall and answer correctness follow the ragas library's definitions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from judge.ir.ranked_list import average_precision, ndcg_at_k

NAN = float("nan")


def supported_share(verdicts: Sequence[str]) -> float:
    """Claims judged "supported" / all claims; NaN when there are no claims.

    `faithfulness` applies it to the answer's claims, `context_recall` to the ground
    truth's claims.
    """
    if not verdicts:
        return NAN
    return sum(v == "supported" for v in verdicts) / len(verdicts)


def faithfulness(verdicts: Sequence[str]) -> float:
    """Share of the answer's claims supported by the contexts (NaN without claims)."""
    return supported_share(verdicts)


def strict_verdicts(verdicts: Sequence[str], unsourced: Sequence[bool]) -> list[str]:
    """Verdicts with "supported" made "not_found" for the claims whose numbers or names no
    context mentions (`faithfulness_strict`); other verdicts stand."""
    if len(verdicts) != len(unsourced):
        raise ValueError(f"{len(verdicts)} verdicts for {len(unsourced)} claims")
    return [
        "not_found" if v == "supported" and bad else v
        for v, bad in zip(verdicts, unsourced, strict=True)
    ]


def context_focus(needed: int, total: int) -> float:
    """Share of the contexts' sentences needed to answer (RAGAS's first context relevance):
    text that does not help lowers it; NaN when the contexts have no sentence."""
    if needed < 0 or needed > total:
        raise ValueError(f"{needed} needed sentences of {total}")
    return needed / total if total else NAN


def context_recall(verdicts: Sequence[str]) -> float:
    """Share of the ground truth's claims supported by the contexts (NaN without claims)."""
    return supported_share(verdicts)


def claims_f1(precision_verdicts: Sequence[str], recall_verdicts: Sequence[str]) -> float:
    """F1 of answer-claim precision and ground-truth-claim recall (answer_correctness).

    precision: answer claims supported by the ground truth / answer claims;
    recall: ground-truth claims supported by the answer / ground-truth claims.
    NaN when either side has no claims; 0 when neither is supported.
    """
    precision, recall = supported_share(precision_verdicts), supported_share(recall_verdicts)
    if precision != precision or recall != recall:  # NaN
        return NAN
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def hallucinated(verdicts: Sequence[str]) -> float:
    """1.0 if any claim of the answer is contradicted or not found in the contexts, else 0.0
    (the mean over samples is the hallucination rate); NaN without claims."""
    if not verdicts:
        return NAN
    return float(any(v != "supported" for v in verdicts))


def share(labels: Sequence[object], label: object) -> float:
    """Share of the labels equal to `label`; NaN when there are none (`supported_by_history`:
    the answer claims whose source is the conversation)."""
    return sum(x == label for x in labels) / len(labels) if labels else NAN


def knowledge_retention(verdicts: Sequence[str]) -> float:
    """1.0 when the answer contradicts or asks again for none of the user's earlier messages
    (their verdicts: kept, contradicted, asked_again, unrelated), else 0.0; NaN for none.

    A turn, not a statement, is the unit (as DeepEval's knowledge retention counts turns
    without attrition): one forgotten fact makes the user repeat themselves.
    """
    if not verdicts:
        return NAN
    return float(not any(v in ("contradicted", "asked_again") for v in verdicts))


def trajectory_accuracy(verdict: str) -> float:
    """1 for a trajectory judged (or settled) `sound`, else 0."""
    return 1.0 if verdict == "sound" else 0.0


def citation_accuracy(supported: Sequence[bool]) -> float:
    """Share of citations whose cited context supports the citing statement; NaN if none."""
    return sum(map(bool, supported)) / len(supported) if supported else NAN


def context_relevance(relevant: Sequence[bool]) -> float:
    """Share of the retrieved contexts judged relevant; NaN when nothing was retrieved."""
    return sum(map(bool, relevant)) / len(relevant) if relevant else NAN


def context_ndcg(grades: Sequence[int], k: int | None = None) -> float:
    """nDCG@k of the retrieved order from graded judgments (ideal: the same grades sorted).

    Only the retrieved contexts are judged, so the ideal ranking is built from them; NaN
    when nothing was retrieved.
    """
    return ndcg_at_k(list(grades), k) if grades else NAN


def cosine_similarities(
    query: Sequence[float] | np.ndarray, others: Sequence[Sequence[float]] | np.ndarray
) -> list[float]:
    """Cosine similarity of query to each vector (0 for a zero vector)."""
    q = np.asarray(query, dtype=np.float64)
    m = np.asarray(others, dtype=np.float64).reshape(len(others), q.size)
    # np.linalg.norm's own arithmetic (rows: square root of summed squares; the query:
    # square root of its dot with itself), without its checks, which cost more here.
    norms = np.sqrt(np.add.reduce(m * m, axis=1)) * np.sqrt(q.dot(q))
    dots = m @ q
    if norms.all():
        return (dots / norms).tolist()  # type: ignore[no-any-return]
    return [float(d / n) if n > 0 else 0.0 for d, n in zip(dots, norms, strict=True)]


def context_precision(relevance: Sequence[int | bool]) -> float:
    """Rank-weighted precision of the contexts judged relevant (ragas's context precision).

    Args:
        relevance: 1/True for each retrieved context judged relevant, 0/False otherwise,
            in retrieval order.

    Returns:
        sum over relevant ranks k of precision@k, divided by the number of relevant
        contexts; 1.0 exactly when every relevant context comes first, 0.0 when none is
        relevant, NaN when nothing was retrieved.
    """
    if len(relevance) == 0:
        return NAN
    # Average precision over the relevant contexts retrieved (R = those found), as in RAGAS.
    return average_precision([int(bool(r)) for r in relevance])


def answer_relevancy(similarities: Sequence[float], *, noncommittal: bool = False) -> float:
    """Mean cosine similarity of the reverse-generated questions to the original question.

    Args:
        similarities: cos(e_question, e_reverse_i) for each reverse question.
        noncommittal: the answer evades the question ("I don't know"); scores 0.

    Returns:
        The mean similarity, or 0.0 for a noncommittal answer; NaN when there is no
        reverse question to compare.
    """
    if noncommittal:
        return 0.0
    if len(similarities) == 0:
        return NAN
    values = np.asarray(similarities, dtype=np.float64)
    # np.mean's own arithmetic (the same reduction, then one division) without its checks,
    # which cost more than the mean of a few numbers.
    return float(np.add.reduce(values) / values.size)

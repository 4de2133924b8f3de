"""Where the pipeline most likely loses quality, read retrieval first, then generation.

Retrieval bounds generation: a generator cannot use what was not retrieved, so a low
context recall explains low faithfulness before the generator is blamed (the split of
retrieval and generation metrics in the RAGAS paper, arXiv:2309.15217). The rules below
take the mean of each metric present and return findings in that order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

LOW_RECALL = 0.7  # context_recall below: the contexts miss ground-truth information
LOW_FAITHFULNESS = 0.8  # faithfulness below, with good recall: generation adds content
LOW_PRECISION = 0.5  # context_precision below: relevant contexts are ranked low
LOW_RELEVANCY = 0.7  # answer_relevancy below: answers drift from the question
LOW_RETRIEVAL_RECALL = 0.5  # recall@k below (retrieval metrics from qrels)
LOW_MRR = 0.5  # mrr below while recall@k is fine: the right chunk is found but ranked low


def diagnose(means: Mapping[str, float | None]) -> list[str]:
    """Findings from metric means, retrieval first; empty when nothing stands out."""
    m = {k: v for k, v in means.items() if v is not None and not math.isnan(v)}
    findings = []
    recall_k = next((v for k, v in m.items() if k.startswith("recall@")), None)
    if recall_k is not None and recall_k < LOW_RETRIEVAL_RECALL:
        findings.append(
            f"retrieval: recall@k is {recall_k:.2f}: most relevant chunks are not "
            "retrieved; improve the retriever (query rewriting, hybrid search, "
            "chunking, a larger candidate set) before anything downstream"
        )
    elif recall_k is not None and m.get("mrr", 1.0) < LOW_MRR:
        findings.append(
            f"ranking: relevant chunks are retrieved (recall@k {recall_k:.2f}) but "
            f"ranked low (mrr {m['mrr']:.2f}); a reranker should help"
        )
    if m.get("context_recall", 1.0) < LOW_RECALL:
        findings.append(
            f"retrieval: context_recall is {m['context_recall']:.2f}: the contexts "
            "miss information the ground truth needs, so no generator can answer "
            "fully; fix retrieval first"
        )
    if m.get("context_precision", 1.0) < LOW_PRECISION:
        findings.append(
            f"ranking: context_precision is {m['context_precision']:.2f}: noise in "
            "the top K pushes relevant contexts down; rerank or retrieve fewer"
        )
    if m.get("faithfulness", 1.0) < LOW_FAITHFULNESS:
        if m.get("context_recall", 1.0) >= LOW_RECALL:
            findings.append(
                f"generation: faithfulness is {m['faithfulness']:.2f} although the "
                "contexts hold the information: the generator adds unsupported "
                "content (tighten the prompt, lower temperature, ask for citations)"
            )
        else:
            findings.append(
                f"generation: faithfulness is {m['faithfulness']:.2f}, partly "
                "because retrieval misses information the model then invents"
            )
    if m.get("answer_relevancy", 1.0) < LOW_RELEVANCY:
        findings.append(
            f"generation: answer_relevancy is {m['answer_relevancy']:.2f}: answers "
            "drift from the question or evade it"
        )
    return findings

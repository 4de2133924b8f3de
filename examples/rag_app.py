"""A small RAG app to run `judge experiment` on: a shop's help pages, retrieved by the
words they share with the question, answered with the best passage's first sentence.

`baseline` ranks by shared words; `rerank` takes the baseline's top 6 and reorders them
by shared word stems weighted by rarity (a stand-in for a cross-encoder), keeping 3.
Both return judge's app contract: answer, contexts (in the order the answer was made
from) and retrieved_ids (rank order).
"""

from __future__ import annotations

import re

PASSAGES = {
    "refunds": "Refunds can be requested within 30 days of delivery from the order page. "
    "The money returns to the original payment method within 5 business days.",
    "refund-exceptions": "Gift cards, downloadable software and opened hygiene products "
    "cannot be refunded.",
    "shipping": "Standard shipping takes 3 to 5 business days within the country. "
    "Express shipping arrives the next business day when ordered before noon.",
    "shipping-abroad": "We ship to 40 countries; international delivery takes 7 to 14 "
    "business days and customs fees are paid by the customer.",
    "warranty": "Every device has a two-year warranty that covers manufacturing defects "
    "but not accidental damage.",
    "repairs": "Repairs under warranty are free; send the device with the form from the "
    "support page and it comes back within 10 days.",
    "accounts": "You can delete your account from the privacy settings; your order "
    "history is kept for 6 years for tax reasons.",
    "payments": "We accept credit cards, PayPal and bank transfers; bank transfers delay "
    "shipping until the payment arrives.",
}


def words(text: str) -> set[str]:
    """The lowercase words of a text, without the short ones."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2}


def search(question: str, k: int) -> list[str]:
    """The k passages sharing the most words with the question (ties by name)."""
    asked = words(question)
    ranked = sorted(PASSAGES, key=lambda pid: (-len(asked & words(PASSAGES[pid])), pid))
    return ranked[:k]


def reply(question: str, ids: list[str]) -> dict:
    """judge's app contract from the ranked passage ids."""
    best = PASSAGES[ids[0]]
    return {
        "answer": best.split(". ")[0].rstrip(".") + ".",
        "contexts": [PASSAGES[pid] for pid in ids],
        "retrieved_ids": ids,
    }


def baseline(question: str) -> dict:
    """Word-overlap retrieval, top 3."""
    return reply(question, search(question, 3))


# Words that say little about a passage's topic, which the baseline counts all the same.
STOPWORDS = {"the", "and", "for", "can", "you", "your", "how", "does", "who", "what", "get"}


def stems(text: str) -> set[str]:
    """Topic words cut to 5 letters: "refund", "refunds" and "refunded" are one."""
    return {w[:5] for w in words(text) - STOPWORDS}


def rerank(question: str) -> dict:
    """The baseline's top 6, reordered by the stems they share with the question, each
    weighted by how rare it is among the passages (a stand-in for a cross-encoder)."""
    asked = stems(question)
    counts: dict[str, int] = {}
    for text in PASSAGES.values():
        for stem in stems(text):
            counts[stem] = counts.get(stem, 0) + 1

    def weight(pid: str) -> float:
        return sum(1 / counts[stem] for stem in asked & stems(PASSAGES[pid]))

    candidates = search(question, 6)
    return reply(question, sorted(candidates, key=lambda pid: (-weight(pid), pid))[:3])


def chat(question: str, history: list[dict]) -> dict:
    """The baseline as a chat: a follow-up ("and abroad?") means little alone, so the
    retriever's query is the user's earlier messages with the question (a stand-in for a
    model that rewrites the question as a standalone one). `history` holds the messages
    before the question, OpenAI-style: {"role": "user" or "assistant", "content": ...}."""
    earlier = " ".join(m["content"] for m in history if m["role"] == "user")
    ids = search(f"{earlier} {question}", 3)
    return {**reply(question, ids), "query": f"{earlier} {question}".strip()}

"""A hand-written corpus (English and Chinese) and a scripted stand-in for the test-set
model, answering judge's testset_* prompts through FakeLLMServer."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge.testing.replies import data_blocks, message_text

DOCS = {
    "ferries.md": """# Harbour ferries

The harbour ferry service started in 1911 with two steam boats. Today the fleet has 14 boats that
carry about 9,200 passengers on a weekday, and the crossing from Quay Street to North Point takes
twelve minutes in calm weather.

## Tickets

A single adult ticket costs 4.50 dollars and a day pass costs 11 dollars. Children under five travel
free of charge. Bicycles are not allowed on the boats during the morning rush hour, from 7 to 9 am,
because the decks are needed for standing passengers.

## Night service

The last boat leaves Quay Street at 23:40 on weekdays and at 01:10 on Saturdays. There is no night
service on Sundays or public holidays, when the final departure is at 21:00 instead.
""",
    "library.txt": """The Aalto Library in Vyborg was designed by the Finnish architect Alvar Aalto
and completed in 1935. Its lecture hall has a wavy wooden ceiling that carries the speaker's
voice to the back rows without any amplification.

Alvar Aalto was born in Kuortane in 1898 and studied architecture at the Helsinki University of
Technology. He later designed furniture as well, including a stool with three bent birch legs.

The library's reading room receives daylight through 57 round skylights. Restoration of the
building took from 1994 to 2013 and was funded jointly by Finnish and Russian foundations.
""",
    "tea.md": """# 龙井茶

西湖龙井产于浙江省杭州市西湖一带，是中国十大名茶之一。它以色绿、香郁、味甘、形美著称，
通常在清明节前采摘的明前茶品质最好，价格也最高。

## 冲泡方法

冲泡龙井茶宜用 80 度左右的热水，不宜用沸水，否则会烫熟茶叶，使茶汤发苦。每 150 毫升水
放 3 克茶叶为宜，第一泡浸泡约两分钟即可饮用。

## 储存

龙井茶应密封后放在冰箱冷藏，温度保持在 0 到 5 度之间，并避免和有气味的食物放在一起。
开封后的茶叶最好在一个月内喝完，因为接触空气以后香气会逐渐散失，颜色也会由绿变黄。

## 产区

龙井茶的核心产区包括狮峰、龙井、云栖、虎跑和梅家坞五个地方，其中狮峰龙井的名气最大。
核心产区的面积大约只有 168 公顷，每年的产量有限，因此市场上有不少来自外地的仿冒产品。
购买时可以查看包装上的地理标志和防伪码，也可以请店家出示产地证明。
""",
    "bikes.txt": """自行车租赁点共有 36 个，分布在地铁站和公园门口。用户用手机扫码即可开锁，
前 30 分钟免费，之后每小时收费 2 元，一天最多收费 20 元。

租赁的自行车不能骑出市区范围，也不能带上地铁。如果车辆损坏，用户应当在应用里报修，
系统会免去本次骑行的费用。晚上 11 点到早上 6 点之间，部分租赁点暂停服务。
""",
    "contents.txt": """Contents
Introduction ........ 1
Ferries ........ 4
Library ........ 9
Tea ........ 15
""",
}


def write_corpus(folder: Path) -> Path:
    """The hand-written documents as a folder of .md and .txt files."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


# The first words of each prompt's system text name the prompt.
KINDS = {
    "You write one question for": "single_hop",
    "You write one question for a golden test set of a retrieval system, from one chunk of a\n"
    "document, as a user": "paraphrased",
    "You write one negation": "negation",
    "You write one calculation": "calculation",
    "You write one multi-hop": "multi_hop",
    "You write one unanswerable": "unanswerable",
    "You review one question": "critic",
    "You judge the relevance of candidate": "pool",
    "You prepare one real user question": "mine",
}


def kind_of(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(prompt kind, data blocks) of a request."""
    messages = body["messages"]
    system = message_text(messages[0]["content"])
    user = next(message_text(m["content"]) for m in messages if m["role"] == "user")
    kind = max((k for k in KINDS if system.startswith(k)), key=len)
    return KINDS[kind], data_blocks(user)


def _sentence(text: str) -> str:
    """The first full sentence of a chunk's body (after any heading)."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    found = re.search(r"[^\s。.][^。.]*[。.]", body)
    return found.group(0) if found else body.strip()


def _zh(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


def default_reply(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    """A valid, passing reply built from the chunk(s)."""
    if kind in ("single_hop", "paraphrased", "negation", "unanswerable"):
        chunk = data["chunk"]
        quote = _sentence(chunk)
        zh = _zh(chunk)
        words = [*quote.split(), "it", "it", "it"]
        question = {
            ("single_hop", False): f"What is said about {words[1]} {words[2]}?",
            ("single_hop", True): f"关于{quote[:6]}有什么说法？",
            ("paraphrased", False): "Could you explain that in plain terms for me?",
            ("paraphrased", True): "能用简单的话解释一下吗？",
            ("negation", False): f"What is not allowed for {words[1]}?",
            ("negation", True): f"{quote[:4]}不能怎么做？",
            ("unanswerable", False): "Who was the mayor when this service got its name?",
            ("unanswerable", True): "当时的负责人叫什么名字？",
        }[(kind, zh)]
        if kind == "unanswerable":
            answer = "资料中没有这个信息。" if zh else "The documents do not say."
            return {
                "question": question,
                "answer": answer,
                "kind": "missing_detail",
                "evidence": [],
            }
        return {"question": question, "answer": quote, "evidence": [quote]}
    if kind == "calculation":
        chunk = data["chunk"]
        found = re.findall(r"\d+(?:\.\d+)?", chunk)[:2]
        a, b = float(found[0]), float(found[1])
        unit = "。" if _zh(chunk) else ""
        question = "两个数字之和是多少？" if _zh(chunk) else "What is the sum of the two figures?"
        return {
            "question": question,
            "answer": f"{a + b:g}{unit}",
            "operands": [
                {"name": "a", "value": a, "quote": found[0]},
                {"name": "b", "value": b, "quote": found[1]},
            ],
            "expression": "a + b",
        }
    if kind == "multi_hop":
        first, second = data["chunks"]
        q0, q1 = _sentence(first), _sentence(second)
        question = "两段信息合起来说明了什么？" if _zh(first) else "How do the two facts connect?"
        return {
            "question": question,
            "answer": f"{q0} {q1}",
            "kind": "bridge",
            "evidence": [{"chunk": 0, "quote": q0}, {"chunk": 1, "quote": q1}],
        }
    if kind == "critic":
        return {
            "self_contained": True,
            "answerable": data["type"] != "unanswerable",
            "answer_correct": True,
            "needs_all_chunks": True,
            "reason": "ok",
        }
    if kind == "pool":
        return {
            "grades": [
                {"chunk": i, "grade": 1 if i == 0 else 0} for i in range(len(data["candidates"]))
            ]
        }
    if kind == "mine":
        grades = [{"chunk": i, "grade": 2 if i == 0 else 0} for i in range(len(data["candidates"]))]
        answer = "草稿答案。" if _zh(data["question"]) else "A draft answer."
        return {"grades": grades, "answerable": True, "answer": answer}
    raise AssertionError(kind)


Override = Callable[[str, dict[str, Any]], dict[str, Any] | str | None]


class Script:
    """A chat handler: default replies, changed by overrides (first match wins)."""

    def __init__(self, *overrides: Override):
        self.overrides = list(overrides)
        self.kinds: list[str] = []

    def __call__(self, body: dict[str, Any]) -> str:
        kind, data = kind_of(body)
        self.kinds.append(kind)
        for override in self.overrides:
            reply = override(kind, data)
            if reply is not None:
                return reply if isinstance(reply, str) else json.dumps(reply, ensure_ascii=False)
        return json.dumps(default_reply(kind, data), ensure_ascii=False)


def when(kind: str, contains: str, reply: Callable[[dict[str, Any]], Any]) -> Override:
    """An override: for prompt `kind` whose data mentions `contains`, reply(data)."""

    def override(k: str, data: dict[str, Any]) -> Any:
        if k == kind and contains in json.dumps(data, ensure_ascii=False):
            return reply(data)
        return None

    return override


def cli_args(server, corpus, out, *extra):
    """`judge testset build` arguments for the fake server, with a cache beside `out`."""
    return [
        "testset", "build", "--corpus", str(corpus), "--out", str(out),
        "--model", "openai/fake", "--api-base", server.base_url, "--api-key", "sk-test",
        "--cache", str(out.parent / "cache.sqlite"), "--chunk-size", "300", *extra,
    ]  # fmt: skip

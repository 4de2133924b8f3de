"""Run RAGAS's TestsetGenerator on a folder of documents against an OpenAI-compatible server;
runs inside bench/.ragas-venv.

Usage: ragas_testset_runner.py DOCS BASE_URL N OUT.json
DOCS is a folder of .txt documents (generate_with_langchain_docs: RAGAS splits them) or a
.jsonl file of chunks with "text" (generate_with_chunks: the chunks judge used).
Writes {"version", "questions", "seconds", "error"} to OUT.json. Started by
bench/speed/testset_cost.py --ragas; not part of the judge package (RAGAS is not a dependency).
"""

import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

os.environ["RAGAS_DO_NOT_TRACK"] = "true"  # no usage analytics: traffic stays on 127.0.0.1
os.environ["LANGCHAIN_TRACING_V2"] = "false"
warnings.filterwarnings("ignore")

import tiktoken  # noqa: E402


class _WordEncoding:
    """A stand-in for tiktoken's encodings, whose files would be downloaded: one token
    per whitespace-separated word (CJK: per character), enough for RAGAS's length checks."""

    name = "words"

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._words: list[str] = []

    def encode(self, text: str, *args: object, **kwargs: object) -> list[int]:
        # Han characters count one token each; other text one per word.
        words = re.findall(r"[\u4e00-\u9fff]|[^\s\u4e00-\u9fff]+", text)
        out = []
        for w in words:
            if w not in self._ids:
                self._ids[w] = len(self._words)
                self._words.append(w)
            out.append(self._ids[w])
        return out

    def decode(self, tokens: list[int], *args: object, **kwargs: object) -> str:
        return " ".join(self._words[t] for t in tokens)


_ENCODING = _WordEncoding()
tiktoken.get_encoding = lambda *a, **k: _ENCODING
tiktoken.encoding_for_model = lambda *a, **k: _ENCODING

import ragas  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from ragas import RunConfig  # noqa: E402
from ragas.testset import TestsetGenerator  # noqa: E402
from ragas_runner import openai_clients  # noqa: E402


def main() -> None:
    docs_dir, base_url, n, out_path = sys.argv[1:5]
    source = Path(docs_dir)
    if source.is_dir():
        docs = [
            Document(page_content=p.read_text(encoding="utf-8"), metadata={"source": p.name})
            for p in sorted(source.glob("*.txt"))
        ]
    else:
        rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
        docs = [Document(page_content=r["text"], metadata={"source": r["doc_id"]}) for r in rows]
    # The fake server has a short listen backlog: retry refused connections in the client.
    llm, embeddings = openai_clients(base_url, "fake", base_url, "fake-embed", max_retries=10)
    generator = TestsetGenerator(llm=llm, embedding_model=embeddings)
    start = time.perf_counter()
    result = {"version": ragas.__version__, "questions": 0, "error": None}
    try:
        generate = (
            generator.generate_with_langchain_docs
            if source.is_dir()
            else generator.generate_with_chunks
        )
        testset = generate(
            docs,
            testset_size=int(n),
            run_config=RunConfig(max_workers=8, max_retries=5, timeout=60),
            raise_exceptions=True,
            with_debugging_logs=False,
        )
        result["questions"] = len(testset.to_list())
        result["unique_questions"] = len({row["user_input"] for row in testset.to_list()})
    except Exception as exc:  # a failed run is a finding, reported with its requests
        result["error"] = f"{type(exc).__name__}: {exc}"[:2000]
    result["seconds"] = time.perf_counter() - start
    Path(out_path).write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    main()

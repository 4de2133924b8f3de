"""Work overlapped on a second core: a function applied in a thread, one item ahead.

For numpy and pyarrow work, which runs without the GIL: while the thread works on one
item, the caller's iterator produces the next (draws the next random indices, reads the
next chunk of a file), and the caller uses the result before it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_ahead(function: Callable[[T], R], items: Iterable[T]) -> Generator[R, None, None]:
    """function(item) for each item, in order, each computed in one worker thread while
    the next item is produced; an exception of either is raised here, in order.

    Args:
        function: the work done in the thread (it must not touch what the caller changes).
        items: produced in the caller's thread, one ahead of the results used.

    A caller that stops before the end closes the iterator (`contextlib.closing`), so the
    worker is stopped there and then rather than when the iterator is collected.
    """
    worker = ThreadPoolExecutor(max_workers=1)
    try:
        pending: Future[R] | None = None
        for item in items:
            following = worker.submit(function, item)
            if pending is not None:
                yield pending.result()
            pending = following
        if pending is not None:
            yield pending.result()
    finally:
        # On every exit (done, an error of either side, the caller closing us early): the
        # item not started is dropped, the one running is waited for, so no thread of ours
        # is left working when the caller goes on (or the interpreter exits).
        worker.shutdown(wait=True, cancel_futures=True)

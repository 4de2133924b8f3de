"""Work overlapped on a second core: a function applied in a thread, one item ahead.

For numpy and pyarrow work, which runs without the GIL: while the thread works on one
item, the caller's iterator produces the next (draws the next random indices, reads the
next chunk of a file), and the caller uses the result before it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def map_ahead(
    function: Callable[[T], R], items: Iterable[T], workers: int = 1
) -> Generator[R, None, None]:
    """function(item) for each item, in order, each computed in a worker thread while
    the next item is produced; an exception of either is raised here, in order.

    Args:
        function: the work done in the thread (it must not touch what the caller changes).
        items: produced in the caller's thread, `workers` ahead of the results used.
        workers: threads working at once, each on its own item.

    A caller that stops before the end closes the iterator (`contextlib.closing`), so the
    workers are stopped there and then rather than when the iterator is collected.
    """
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        pending: deque[Future[R]] = deque()
        iterator = iter(items)
        failed: Exception | None = None
        while True:
            try:
                item = next(iterator)
            except StopIteration:
                break
            except Exception as exc:  # (not Ctrl-C: that stops at once)
                # Raised after the results of the items before it (and their errors), which
                # are being worked on: in order, as if the items were done one by one.
                failed = exc
                break
            pending.append(pool.submit(function, item))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
        if failed is not None:
            raise failed
    finally:
        # On every exit (done, an error of either side, the caller closing us early): the
        # items not started are dropped, those running are waited for, so no thread of
        # ours is left working when the caller goes on (or the interpreter exits).
        pool.shutdown(wait=True, cancel_futures=True)

"""map_ahead: a function applied in threads, items ahead, results in order."""

from __future__ import annotations

import threading

import pytest

from judge.threads import map_ahead


def test_results_come_in_order_computed_in_another_thread_one_item_ahead():
    produced: list[int] = []
    workers: set[int] = set()

    def items():
        for i in range(5):
            produced.append(i)
            yield i

    def square(i: int) -> int:
        workers.add(threading.get_ident())
        return i * i

    results = []
    for result in map_ahead(square, items()):
        results.append(result)
        # Item k's result is used while item k + 1 is produced (and being worked on).
        assert len(produced) == min(len(results) + 1, 5)
    assert results == [0, 1, 4, 9, 16]
    assert workers and threading.get_ident() not in workers
    assert list(map_ahead(square, [])) == []


def test_an_exception_is_raised_where_its_result_would_be_used():
    def fail_on_two(i: int) -> int:
        if i == 2:
            raise ValueError("two")
        return i

    got = []
    with pytest.raises(ValueError, match="two"):
        for result in map_ahead(fail_on_two, range(5)):
            got.append(result)
    assert got == [0, 1]


def test_a_caller_that_stops_early_leaves_no_worker_thread():
    import contextlib

    before = set(threading.enumerate())
    results = map_ahead(lambda i: i, range(100))
    with contextlib.closing(results):
        assert next(results) == 0
        assert set(threading.enumerate()) - before  # the worker is running meanwhile
    assert set(threading.enumerate()) == before  # closed: the worker has ended


def test_with_two_workers_two_items_are_worked_on_at_once_and_results_stay_in_order():
    # Both workers must be inside the function together to pass the barrier: with one
    # worker, the first item would wait for a second that never starts (BrokenBarrierError).
    together = threading.Barrier(2, timeout=10)
    produced: list[int] = []

    def items():
        for i in range(6):
            produced.append(i)
            yield i

    def slow_square(i: int) -> int:
        if i < 2:
            together.wait()
        return i * i

    results = []
    for result in map_ahead(slow_square, items(), workers=2):
        results.append(result)
        # Item k's result is used while items k + 1 and k + 2 are produced.
        assert len(produced) == min(len(results) + 2, 6)
    assert results == [0, 1, 4, 9, 16, 25]


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_of_the_items_comes_after_the_results_of_the_items_before_it(workers: int):
    def items():
        yield from range(3)
        raise ValueError("the fourth item")

    got = []
    with pytest.raises(ValueError, match="fourth"):
        for result in map_ahead(lambda i: i * 10, items(), workers=workers):
            got.append(result)
    assert got == [0, 10, 20]


def test_a_work_error_before_an_error_of_the_items_is_the_one_raised():
    def items():
        yield from range(3)
        raise ValueError("the fourth item")

    def fail_on_one(i: int) -> int:
        if i == 1:
            raise KeyError("one")
        return i

    got = []
    with pytest.raises(KeyError, match="one"):
        for result in map_ahead(fail_on_one, items(), workers=2):
            got.append(result)
    assert got == [0]

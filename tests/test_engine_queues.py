from __future__ import annotations

import threading
import time

import pyarrow as pa

from transcript_clean.engine import local
from transcript_clean.engine.queues import BytesQueue


def _batch(nbytes: int) -> pa.RecordBatch:
    return pa.record_batch({"x": pa.array([b"x" * nbytes], pa.binary())})


def test_bytes_queue_holds_at_most_its_bytes_but_always_one_item() -> None:
    queue: BytesQueue[int] = BytesQueue(4, 100, lambda n: n)
    assert queue.put(60, timeout=0.01)
    assert not queue.put(60, timeout=0.01)  # 120 bytes would pass the bound
    assert queue.put(40, timeout=0.01)
    assert queue.held == 100
    assert queue.get() == 60
    assert queue.get() == 40
    assert queue.put(500, timeout=0.01)  # larger than the bound, into an empty queue: alone
    assert not queue.put(1, timeout=0.01)
    assert queue.get() == 500


def test_bytes_queue_holds_at_most_its_items() -> None:
    queue: BytesQueue[int] = BytesQueue(2, 100, lambda n: 0)
    assert queue.put(1, timeout=0.01) and queue.put(2, timeout=0.01)
    assert not queue.put(3, timeout=0.01)


def test_a_put_waits_for_a_get() -> None:
    queue: BytesQueue[int] = BytesQueue(1, 100, lambda n: n)
    queue.put(1, timeout=0.01)
    threading.Timer(0.05, queue.get).start()
    started = time.monotonic()
    assert queue.put(2, timeout=5)
    assert time.monotonic() - started >= 0.04
    assert queue.get() == 2


def test_prefetched_reads_ahead_at_most_nbytes_of_batches() -> None:
    """Batches of 1 MiB, a bound of 1.5 MiB: one waits, and one is made, never two ahead."""
    made: list[int] = []

    def batches() -> object:
        for i in range(6):
            made.append(i)
            yield _batch(2**20)

    read = local._prefetched(batches(), depth=4, nbytes=3 * 2**19)  # type: ignore[arg-type]
    first = next(read)
    time.sleep(0.3)  # the helper thread is as far ahead as it may go
    assert first.num_rows == 1
    assert len(made) == 3  # one handed on, one waiting, one made and blocked on the bound
    assert sum(1 for _ in read) == 5

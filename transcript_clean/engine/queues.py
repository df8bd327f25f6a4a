"""A queue between two threads bounded by the bytes it holds as well as by its items."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from threading import Condition
from typing import Generic, TypeVar

__all__ = ["BytesQueue"]

T = TypeVar("T")


class BytesQueue(Generic[T]):
    """A FIFO of at most `items` items and `nbytes` bytes (`size` says an item's): a put
    waits while either bound would be passed, except into an empty queue, so that an item
    larger than `nbytes` still goes through, alone."""

    def __init__(self, items: int, nbytes: int, size: Callable[[T], int]) -> None:
        self._items = items
        self._nbytes = nbytes
        self._size = size
        self._queue: deque[tuple[T, int]] = deque()
        self._held = 0
        self._changed = Condition()

    @property
    def held(self) -> int:
        """The bytes the queue holds now."""
        return self._held

    def put(self, item: T, timeout: float) -> bool:
        """Add `item` once it fits; False if it did not within `timeout` seconds."""
        size = self._size(item)
        with self._changed:
            fits = self._changed.wait_for(lambda: self._fits(size), timeout)
            if not fits:
                return False
            self._queue.append((item, size))
            self._held += size
            self._changed.notify_all()
            return True

    def get(self) -> T:
        """The oldest item, once there is one."""
        with self._changed:
            self._changed.wait_for(lambda: bool(self._queue))
            item, size = self._queue.popleft()
            self._held -= size
            self._changed.notify_all()
            return item

    def _fits(self, size: int) -> bool:
        if not self._queue:
            return True
        return len(self._queue) < self._items and self._held + size <= self._nbytes

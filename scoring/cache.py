"""A bounded, thread-safe LRU map used for embedding, pair-score, image and token caches."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


class LRUCache:
    """Keeps the most recently used entries within ``capacity``; counts hits and misses.

    By default each entry weighs 1, so ``capacity`` is a count; with ``weigh`` (for example
    a tensor's byte size) it is a budget in those units, and an entry heavier than the whole
    budget is not kept at all.
    """

    def __init__(self, capacity: int = 65536, weigh: Callable[[Any], int] | None = None):
        self.capacity = capacity
        self._weigh = weigh or (lambda value: 1)
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.weight = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key][0]
            self.misses += 1
            return None

    def get_many(self, keys) -> list[Any | None]:
        """``get`` for each key under one lock (a caption batch asks for thousands)."""
        data, move, found, misses = self._data, self._data.move_to_end, [], 0
        with self._lock:
            for key in keys:
                entry = data.get(key)
                if entry is None:
                    misses += 1
                    found.append(None)
                    continue
                move(key)
                found.append(entry[0])
            self.hits += len(found) - misses
            self.misses += misses
        return found

    def put(self, key: Hashable, value: Any) -> None:
        weight = self._weigh(value)
        with self._lock:
            if key in self._data:
                self.weight -= self._data.pop(key)[1]
            if weight > self.capacity:
                return
            self._data[key] = (value, weight)
            self.weight += weight
            while self.weight > self.capacity:
                self.weight -= self._data.popitem(last=False)[1][1]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.weight = 0

    def __len__(self) -> int:
        return len(self._data)

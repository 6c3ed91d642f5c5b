"""In-process caches: immutable entries (versions never change) and tenant-scoped entries dropped when
the tenant's change notification arrives. Both are bounded LRUs that count hits and misses."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

from registry.metrics import CACHE_HITS, CACHE_MISSES, tally

V = TypeVar("V")
MISSING: Any = object()


class Lru(Generic[V]):
    """A bounded LRU map; ``weigh`` lets large values (blobs) count for their size."""

    def __init__(self, name: str, capacity: int, weigh: Any = None) -> None:
        self.name = name
        self.capacity = capacity
        self.weigh = weigh or (lambda value: 1)
        self.weight = 0
        self._items: OrderedDict[Hashable, tuple[V, int]] = OrderedDict()
        self._hits = tally(CACHE_HITS, name)
        self._misses = tally(CACHE_MISSES, name)

    def get(self, key: Hashable) -> V:
        found = self._items.get(key)
        if found is None:
            self._misses.inc()
            return MISSING  # type: ignore[no-any-return]
        self._items.move_to_end(key)
        self._hits.inc()
        return found[0]

    def peek(self, key: Hashable) -> V:
        """The value (or MISSING) without counting a hit or a miss or refreshing its place."""
        found = self._items.get(key)
        return MISSING if found is None else found[0]

    def put(self, key: Hashable, value: V) -> V:
        weight = int(self.weigh(value))
        if weight > self.capacity:
            return value  # too big to keep: serve it, don't cache it
        old = self._items.pop(key, None)
        if old is not None:
            self.weight -= old[1]
        self._items[key] = (value, weight)
        self.weight += weight
        while self.weight > self.capacity:
            _, (_, dropped) = self._items.popitem(last=False)
            self.weight -= dropped
        return value

    def pop(self, key: Hashable) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self.weight -= old[1]

    def clear(self) -> None:
        self._items.clear()
        self.weight = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items


class TenantScoped(Generic[V]):
    """Entries grouped by tenant, so one notification drops everything a tenant's change may touch.

    Keys hold the tenant as an int, not a UUID object: a tuple of plain values is not tracked by the
    cycle collector, and with hundreds of thousands of entries that keeps its full passes short.

    A reader takes ``generation(tenant)`` before it reads the database and hands it to ``put``; if an
    invalidation came in between, the value may predate the change and is not kept.
    """

    def __init__(self, name: str, capacity: int, weigh: Any = None) -> None:
        self._lru: Lru[V] = Lru(name, capacity, weigh)
        self._keys: dict[uuid.UUID, set[Hashable]] = {}
        self._generations: dict[uuid.UUID, int] = {}
        self._epoch = 0  # bumped by clear(), so every generation taken before it is outdated

    def generation(self, tenant_id: uuid.UUID) -> tuple[int, int]:
        return self._epoch, self._generations.get(tenant_id, 0)

    def get(self, tenant_id: uuid.UUID, key: Hashable) -> V:
        return self._lru.get((tenant_id.int, key))

    def peek(self, tenant_id: uuid.UUID, key: Hashable) -> V:
        return self._lru.peek((tenant_id.int, key))

    def put(self, tenant_id: uuid.UUID, key: Hashable, value: V, generation: tuple[int, int]) -> V:
        if generation != self.generation(tenant_id):
            return value
        keys = self._keys.setdefault(tenant_id, set())
        keys.add(key)
        # Forget keys the LRU already evicted once they outnumber what it holds (its capacity may
        # be bytes, not entries): a tenant's set stays within about twice the cache's entries.
        if len(keys) > 2 * len(self._lru) + 64:
            keys.intersection_update(k for k in list(keys) if (tenant_id.int, k) in self._lru)
        return self._lru.put((tenant_id.int, key), value)

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        self._generations[tenant_id] = self._generations.get(tenant_id, 0) + 1
        for key in self._keys.pop(tenant_id, ()):
            self._lru.pop((tenant_id.int, key))

    def clear(self) -> None:
        self._epoch += 1
        self._generations.clear()
        self._lru.clear()
        self._keys.clear()


class Grouped(Generic[V]):
    """A bounded LRU whose keys do not name their tenant (a slug, a credential's digest, a
    request's digest), with each tenant's keys remembered so that its notification drops them."""

    def __init__(self, name: str, capacity: int, weigh: Any = None) -> None:
        self.lru: Lru[V] = Lru(name, capacity, weigh)
        self.keys: dict[uuid.UUID, set[Hashable]] = {}

    def keep(self, tenant_id: uuid.UUID, key: Hashable, value: V) -> None:
        keys = self.keys.setdefault(tenant_id, set())
        keys.add(key)
        if len(keys) > 2 * len(self.lru) + 64:  # forget keys the LRU already evicted
            keys.intersection_update(k for k in list(keys) if k in self.lru)
        self.lru.put(key, value)

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        for key in self.keys.pop(tenant_id, ()):
            self.lru.pop(key)

    def clear(self) -> None:
        self.lru.clear()
        self.keys.clear()

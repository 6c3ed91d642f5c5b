"""How a serving worker runs Python's cycle collector.

A worker's caches (compiled versions, listings, resolved labels, the directory) are object graphs
that live as long as they are used; a full collection walks every one of them and stops every
request of the worker meanwhile (200-500 ms with warm caches, measured by bench/run). So:

- every collection is timed into ``registry_gc_pause_seconds`` (by generation);
- what survives a collection of generation 1 or 2 is frozen (``gc.freeze``): it was reachable
  when the collection ended, so nothing frozen is garbage, and later collections walk only what was
  allocated since. Freezing the survivors of the middle generation too (they would go on to the
  oldest) keeps the oldest generation empty between freezes: a full collection walks only what came
  since the last collection of generation 1, however much the caches gathered before it. When only
  full collections froze, the first one after the caches filled walked all of it (more than 100 ms,
  bench/run's write workload, 26a5963). A freeze is a merge of lists: constant time.
- freed memory is not held back: an object leaves the permanent generation when its reference
  count drops to zero, as any other. What freezing costs: a frozen object that later becomes part
  of a reference cycle no longer reachable is never collected. The serving paths leave no such
  cycles (tests/test_collector.py makes each kind of request with the collector off and finds
  nothing for it to free), so what can be frozen that way is rare (a connection's objects, a cache
  entry holding a cycle); every ``UNFREEZE_EVERY`` full collections the frozen objects are handed
  back to the collector, which then walks everything once and takes such leftovers. A full
  collection comes about every ten collections of generation 1: in one worker, about every 10,000
  version writes or 20,000 prompts/get that miss its caches; a cached read allocates nothing that
  outlives it and starts none.
- a cache turning over starts collections of its own. The interpreter starts a collection of
  generation 0 when the objects allocated less those freed pass a threshold (700); a full cache
  frees an evicted entry's objects as it keeps a new one's, so that difference stays flat while the
  new entries pile up in generation 0 unwalked, until some other allocation tips it: then one
  collection walks all of them (90,000 objects, 5,000 compiled versions, in 65-138 ms when
  bench/run's peer set with new arguments pushed out the random misses' versions, 2026-11-28). So
  every ``EVICTIONS_PER_COLLECTION`` entries the caches evict or replace (``dropped``) start the
  young collection the allocations would have: generation 1 when its own count has passed its
  threshold, as the interpreter would pick, else generation 0. An invalidation's drops are not
  counted: nothing is kept in their place, and what is kept later counts up as usual.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from registry import metrics

UNFREEZE_EVERY = 20  # full collections between two complete ones
# Entries dropped by the caches between two collections they start: a compiled version is about
# fifteen tracked objects, an answer two or three, so this is about what the interpreter's own
# threshold (700 allocations) lets pile up.
EVICTIONS_PER_COLLECTION = 64

_installed: Policy | None = None


class Policy:
    """The ``gc.callbacks`` entry of a serving worker."""

    def __init__(self, *, freeze: bool = True, unfreeze_every: int = UNFREEZE_EVERY) -> None:
        self.pauses = [
            metrics.Timings(metrics.GC_PAUSE.labels(str(generation))) for generation in range(3)
        ]
        self.freeze = freeze
        self.unfreeze_every = unfreeze_every
        self.full = 0
        self.started = 0.0
        self.evicted = 0  # evicted or replaced by the caches since the last collection they started

    def drop(self) -> None:
        """A cache evicted or replaced an entry (``dropped``)."""
        self.evicted += 1
        if self.evicted >= EVICTIONS_PER_COLLECTION:
            self.evicted = 0
            count, threshold = gc.get_count(), gc.get_threshold()
            gc.collect(1 if count[1] >= threshold[1] else 0)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            self.started = time.perf_counter()
            if generation == 2 and self.freeze:
                self.full += 1
                if self.full % self.unfreeze_every == 0:  # this one walks everything
                    gc.unfreeze()
            return
        self.pauses[generation].observe(time.perf_counter() - self.started)
        if generation and self.freeze:
            gc.freeze()  # the survivors: all reachable, none garbage


def install(*, freeze: bool = True) -> Policy:
    """Run this process's collector by a ``Policy`` (a worker calls it when it starts serving;
    ``freeze`` False: pauses are timed, nothing is frozen)."""
    global _installed
    for callback in gc.callbacks:
        if isinstance(callback, Policy):
            callback.freeze = freeze
            _installed = callback
            return callback
    policy = _installed = Policy(freeze=freeze)
    gc.callbacks.append(policy)
    return policy


def dropped() -> None:
    """A cache let an entry go to keep another (evicted or replaced): counted towards the
    collection it may start, where a policy is installed (a serving worker); nothing elsewhere."""
    if _installed is not None:
        _installed.drop()


def uninstall(policy: Policy) -> None:
    """The worker stops serving: the interpreter's own collector again, nothing frozen."""
    global _installed
    if _installed is policy:
        _installed = None
    if policy in gc.callbacks:
        gc.callbacks.remove(policy)
    if policy.freeze:
        gc.unfreeze()

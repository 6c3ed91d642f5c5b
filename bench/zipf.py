"""The most a worker could answer from memory in bench/run's prompts/get workloads on a dataset
larger than its caches: the same requests replayed through a model of the workers' caches.

    python -m bench.zipf RESULTS.json TARGETS.tsv [--capacity 20000] [--seed 1]

RESULTS is a bench/run result (its rates and durations say how many requests each workload sent),
TARGETS the targets file it used. Each workload's requests are drawn again by the load generator's
law (bench/wrk/prompts.lua: uniform over the targets, or a Zipf mix of the tenants and of the prompts
within each), in the order bench/run sends them (the random targets, then the Zipf mix closed and at
each fixed load), each spread at random over the workers as connections are (the peer set's workloads, another
tenant's, are left out). A request counts as
from memory when its worker was asked for the same prompt before: with caches of any size (the
bound: a first ask reads the database whatever the cache), and with a least-recently-used cache of
``--capacity`` prompts per worker (the registry's compiled versions: McpCaches.versions).
Printed per measured part: the two models beside what bench/run measured.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
from collections import Counter, OrderedDict
from pathlib import Path
from typing import Any

from bench.run import RANDOM_WORKLOAD, ZIPF_WORKLOAD


def cdf(n: int, exponent: float = 1.0) -> list[float]:
    """The cumulative shares of ranks 1..n under a Zipf law (as zipf_cdf in bench/wrk/prompts.lua)."""
    shares = list(itertools.accumulate(1 / k**exponent for k in range(1, n + 1)))
    return [share / shares[-1] for share in shares]


class Workers:
    """What each worker has been asked for: every prompt ever (the bound) and an LRU of them."""

    def __init__(self, workers: int, capacity: int) -> None:
        self.seen: list[set[tuple[int, int]]] = [set() for _ in range(workers)]
        self.lru: list[OrderedDict[tuple[int, int], None]] = [OrderedDict() for _ in range(workers)]
        self.capacity = capacity

    def ask(self, worker: int, key: tuple[int, int]) -> tuple[bool, bool]:
        """(asked before on that worker, still in its LRU)."""
        seen, lru = self.seen[worker], self.lru[worker]
        before = key in seen
        seen.add(key)
        kept = key in lru
        if kept:
            lru.move_to_end(key)
        else:
            lru[key] = None
            if len(lru) > self.capacity:
                lru.popitem(last=False)
        return before, kept


def replay(
    results: dict[str, Any], targets: Path, capacity: int, seed: int
) -> list[dict[str, Any]]:
    tenants = Counter(line.split("\t", 1)[0] for line in targets.read_text().splitlines())
    sizes = list(tenants.values())  # prompts per tenant in the file's order: the script's ranks
    flat = [(t, p) for t, size in enumerate(sizes) for p in range(size)]
    tenant_cdf, prompt_cdfs = cdf(len(sizes)), {size: cdf(size) for size in set(sizes)}
    pick = random.Random(seed)  # noqa: S311 - a model's draws, not a secret

    def zipf() -> tuple[int, int]:
        tenant = bisect.bisect_left(tenant_cdf, pick.random())
        return tenant, bisect.bisect_left(prompt_cdfs[sizes[tenant]], pick.random())

    def uniform() -> tuple[int, int]:
        return flat[pick.randrange(len(flat))]

    workers = Workers(int(results["workers"]), capacity)
    seconds = int(results["warmup_s"]) + int(results["duration_s"])
    found = []
    for row in results["wrk"]:
        name = row["workload"]
        random_targets = name == RANDOM_WORKLOAD or name.startswith(f"{RANDOM_WORKLOAD} at ")
        if not (random_targets or name.startswith(ZIPF_WORKLOAD)) or row.get("hit_ratio") is None:
            continue
        draw = uniform if random_targets else zipf
        requests = int(row["rps"] * seconds)
        measured_from = requests - int(row["rps"] * int(results["duration_s"]))
        before = kept = 0
        for n in range(requests):
            asked, cached = workers.ask(pick.randrange(len(workers.seen)), draw())
            if n >= measured_from:
                before, kept = before + asked, kept + cached
        measured = requests - measured_from
        found.append({
            "workload": name, "connections": row["connections"], "requests": requests,
            "bound": before / measured, "lru": kept / measured, "measured": row["hit_ratio"],
        })  # fmt: skip
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("targets", type=Path)
    parser.add_argument("--capacity", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = replay(json.loads(args.results.read_text()), args.targets, args.capacity, args.seed)
    print("| workload | connections | requests | any cache (bound) "
          f"| LRU of {args.capacity:,} | measured |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['workload']} | {row['connections']} | {row['requests']:,} | "
              f"{row['bound']:.1%} | {row['lru']:.1%} | {row['measured']:.1%} |")  # fmt: skip


if __name__ == "__main__":
    main()

"""Two versions of the registry measured side by side: ``bench/run`` from each checkout, in turns,
on the same seeded database and the same machine; a Markdown table of the registry's own figures.

    python -m bench.compare BEFORE_DIR AFTER_DIR [--rounds 2] [--before-data D --after-data D]
                           [-- bench/run options]

Each directory is a checkout with its own virtual environment in ``.venv`` (``git worktree add``,
then ``pip install -e .``). When the two differ in schema, give each its own embedded database,
seeded alike by its own ``bench/seed`` (the same seed gives the same data). Runs alternate
(before, after, before, after...) so that drift of a shared machine falls on both; the table shows
the median over the rounds of each figure, and after/before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.run import per_stream_kib

# The registry's own rows of bench/run (the peers are the same code on both sides); CPU per request
# where bench/run recorded it (since it does), 0 where it did not.
FIGURES = (
    "rps",
    "p50_ms",
    "p99_ms",
    "server_cpu_ms",
    "postgres_cpu_ms",
    "gc_full_collections",
    "gc_longest_pause_ms_at_most",
)


def measure(
    checkout: Path, run_args: list[str], out: Path, data_dir: Path | None
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    command = [str(checkout / ".venv" / "bin" / "python"), "-m", "bench.run", "--out", str(out)]
    env = {**os.environ, **({"REGISTRY_DATA_DIR": str(data_dir)} if data_dir else {})}
    subprocess.run(  # noqa: S603 - our own command
        [*command, *run_args], cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL
    )
    (result,) = sorted(out.glob("*.json"))
    found: dict[str, Any] = json.loads(result.read_text())
    return found


def rows_of(result: dict[str, Any]) -> dict[tuple[str, int], dict[str, float]]:
    found = {
        (row["workload"], row["connections"]): {k: row.get(k, 0.0) for k in FIGURES}
        for row in result["wrk"]
        if row["target"] == "registry"
    }
    for fan in result.get("fanout", []):  # times, in the rows' first column
        streams = fan["streams"]
        for name, value in (
            ("p50 ms", fan["p50_ms"]),
            ("p99 ms", fan["p99_ms"]),
            ("p99 ms from the write's request", fan["from_send"]["p99_ms"]),
            ("KiB per open stream", per_stream_kib(fan)),
        ):
            unit = "" if name.startswith("KiB") else " (ms)"
            found[(f"fan-out to {streams:,} streams, {name}{unit}", 1)] = {
                **dict.fromkeys(FIGURES, 0.0),
                "rps": value,
            }
    walk = result["walk"]
    if not walk:  # the reads were not run
        return found
    found[("full walk of bench-big (s)", 1)] = {
        **dict.fromkeys(FIGURES, 0.0),
        "rps": walk["seconds"],
    }
    if "server_seconds" in walk:  # the part spent waiting for answers (recorded since 2026-11-25)
        found[("full walk, waiting for answers (s)", 1)] = {
            **dict.fromkeys(FIGURES, 0.0),
            "rps": walk["server_seconds"],
        }
    if "again_seconds" in walk:  # the same walk answered from memory (bench/run since 0015)
        found[("walk again, from memory (s)", 1)] = {
            **dict.fromkeys(FIGURES, 0.0),
            "rps": walk["again_seconds"],
        }
    return found


def median_rows(results: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, float]]:
    rows = [rows_of(r) for r in results]
    return {
        key: {k: statistics.median(r[key][k] for r in rows) for k in FIGURES} for key in rows[0]
    }


def table(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> str:
    old, new = median_rows(before), median_rows(after)
    lines = [
        "| workload | connections | requests/s before | after | after/before "
        "| p50 ms before | after | p99 ms before | after "
        "| server CPU ms/request before | after | PostgreSQL CPU ms/request before | after "
        "| longest collector pause ms (at most) before | after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, was in old.items():
        now = new.get(key)
        if now is None:
            continue
        workload, connections = key
        if workload.endswith(("(s)", "(ms)")):  # a time, not a rate
            unit = workload.rsplit("(", 1)[1].rstrip(")")
            lines.append(
                f"| {workload} | 1 | {was['rps']:.2f} {unit} | {now['rps']:.2f} {unit} | "
                f"{now['rps'] / was['rps']:.2f} | | | | | | | | | | |"
            )
            continue
        lines.append(
            f"| {workload} | {connections} | {was['rps']:,.0f} | {now['rps']:,.0f} | "
            f"{now['rps'] / was['rps']:.2f} | {was['p50_ms']:.2f} | {now['p50_ms']:.2f} | "
            f"{was['p99_ms']:.2f} | {now['p99_ms']:.2f} | "
            f"{was['server_cpu_ms']:.3f} | {now['server_cpu_ms']:.3f} | "
            f"{was['postgres_cpu_ms']:.3f} | {now['postgres_cpu_ms']:.3f} | "
            f"{was['gc_longest_pause_ms_at_most']:g} | {now['gc_longest_pause_ms_at_most']:g} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before-data", type=Path, default=None, help="REGISTRY_DATA_DIR before")
    parser.add_argument("--after-data", type=Path, default=None, help="REGISTRY_DATA_DIR after")
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    run_args = argv[split + 1 :]  # what follows --: bench/run's own options
    work = Path(tempfile.mkdtemp(prefix="registry-compare-"))
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for round_number in range(args.rounds):
        sides = (("before", args.before, args.before_data), ("after", args.after, args.after_data))
        for side, checkout, data_dir in sides:
            print(f"round {round_number + 1}: {side} ({checkout})", file=sys.stderr)
            out = work / f"{side}-{round_number}"
            results[side].append(measure(checkout.resolve(), run_args, out, data_dir))
    (work / "results.json").write_text(json.dumps(results, indent=2))
    print(table(results["before"], results["after"]))
    print(f"raw results: {work}/results.json", file=sys.stderr)


if __name__ == "__main__":
    main()

"""Profile one worker of the registry under load: where a request's time goes.

    python -m bench.profile [--workload hit|miss|list|write] [--seconds 10] [--connections 8]

Starts ``registry serve --workers 1`` on the seeded database (REGISTRY_DATA_DIR or
REGISTRY_DATABASE_URL), loads it with wrk, samples it with py-spy (``pip install py-spy``) and prints
the share of samples spent in each function (inclusive), the registry's own functions and the
libraries it calls alike. Workloads: ``hit`` prompts/get of the 10,000 peer prompts after a warm-up
(answered from memory), ``miss`` prompts/get of random prompts of random tenants (one database round
trip each), ``list`` the first prompts/list page of bench-big, ``write`` new versions via the REST API.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.peers import PEER_PROMPTS, PEER_TENANT
from bench.run import (
    LUA,
    WRITE_PROMPTS,
    WRITE_TENANT,
    figures_of,
    make_targets,
    prepare_writes,
    server,
)
from bench.seed import BIG_TENANT


def aggregate(raw: Path, top: int, by_module: bool = False) -> list[tuple[float, str]]:
    """Inclusive share of the main thread's samples per function (once per stack); with
    ``by_module``, the exclusive share of each source file (the frame running when sampled), so
    that the cost of a library shows as one line however many of its functions a request calls."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, samples = line.rpartition(" ")
        if "Thread._bootstrap" in stack:
            continue  # the thread pool's idle threads: the main thread is the worker
        n = int(samples)
        total += n
        if by_module:
            where = stack.rsplit(";", 1)[-1].partition(" (")[2].split(":")[0]
            counts[_module_of(where)] += n
            continue
        seen = set()
        for frame in stack.split(";"):
            function, _, where = frame.partition(" (")
            name = f"{function} ({where.split(':')[0].rsplit('/', 1)[-1]})"
            if name not in seen:
                seen.add(name)
                counts[name] += n
    return [(100 * n / total, name) for name, n in counts.most_common(top)] if total else []


def _module_of(path: str) -> str:
    """A sampled file as a short name: the part after site-packages or the checkout."""
    for marker in ("site-packages/", "/registry/", "/lib/python3"):
        _, found, tail = path.rpartition(marker)
        if found:
            return tail if marker == "site-packages/" else (marker.strip("/") + "/" + tail)
    return path or "(native)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/profile", description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=["hit", "miss", "list", "write"], default="hit")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--top", type=int, default=60)
    parser.add_argument(
        "--by-module",
        action="store_true",
        help="exclusive share per source file instead of inclusive share per function",
    )
    args = parser.parse_args(argv)
    for tool in ("wrk", "py-spy"):
        if shutil.which(tool) is None and not (Path(sys.executable).parent / tool).exists():
            sys.exit(f"bench/profile needs {tool}")
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")

    from registry.db.attach import attached_database

    work = Path(tempfile.mkdtemp(prefix="registry-profile-"))
    token = secrets.token_urlsafe(32)
    script: list[str]
    path = ""
    if args.workload == "miss":
        targets = work / "targets.tsv"
        with attached_database() as url:
            asyncio.run(make_targets(url, targets))
        script = ["targets", str(targets)]
    elif args.workload == "hit":
        path, script = f"/mcp/{PEER_TENANT}", ["get", "1", str(PEER_PROMPTS), "peer"]
    elif args.workload == "list":
        path, script = f"/mcp/{BIG_TENANT}", ["list", ""]
    else:
        script = ["write", WRITE_TENANT, str(WRITE_PROMPTS), token]
    command = [sys.executable, "-m", "registry", "serve", "--workers", "1"]
    with server(command, {"REGISTRY_OPERATOR_TOKEN": token}, "/readyz") as registry:
        load = ["wrk", "-t1", f"-c{args.connections}", "--timeout", "10s", "-s", str(LUA)]
        url = registry.url + path
        if args.workload == "write":
            asyncio.run(prepare_writes(registry.url, token))
        else:  # warm the caches first: the profile is of the steady state
            warm = 30 if args.workload == "hit" else 5
            warm_up = [*load, f"-d{warm}s", url, "--", *script]
            subprocess.run(warm_up, check=True, capture_output=True)  # noqa: S603
        wrk = subprocess.Popen(  # noqa: S603 - our own arguments
            [*load, f"-d{args.seconds + 2}s", url, "--", *script],
            stdout=subprocess.PIPE,
            text=True,
        )
        raw = work / "profile.txt"
        subprocess.run(  # noqa: S603
            [py_spy, "record", "-p", str(registry.pid), "-d", str(args.seconds), "-r", "250",
             "-f", "raw", "-o", str(raw)],
            check=True, capture_output=True,
        )  # fmt: skip
        out, _ = wrk.communicate()
    figures = figures_of(out)
    rps = figures["requests"] / (figures["duration_us"] / 1e6)
    print(
        f"workload {args.workload}: {rps:,.0f} requests/s (one worker, {args.connections} connections)"
    )
    for share, name in aggregate(raw, args.top, by_module=args.by_module):
        print(f"{share:5.1f}%  {name}")


if __name__ == "__main__":
    main()

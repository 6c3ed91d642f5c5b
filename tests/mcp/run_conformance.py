"""Every server scenario of the official conformance suite, at each spec version it names, against a
registry of its own: what docs/conformance.md reports (the CI tests run the passing ones).

    .venv/bin/python -m tests.mcp.run_conformance [--out docs/conformance.md]

Starts ``registry serve`` (one worker) on an embedded database in a temporary directory, makes a
public tenant with the suite's prompts and two skills, its prompts offered as tools, and runs each
scenario (extension scenarios at 2026-07-28 with ``--force``); 2025-03-26 is left out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import httpx

from bench.run import server
from tests.mcp.conftest import CONFORMANCE_PROMPTS, CONFORMANCE_SKILLS
from tests.node import CONFORMANCE, node, npm_package

OPERATOR = "conformance-operator"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _tenant(url: str) -> None:
    headers = {"Authorization": f"Bearer {OPERATOR}"}
    base = f"{url}/api/v1/tenants"
    httpx.post(
        base, json={"slug": "conformance", "public_read": True}, headers=headers
    ).raise_for_status()
    for prompt in CONFORMANCE_PROMPTS:
        httpx.post(f"{base}/conformance/prompts", json={**prompt, "labels": ["production"]},
                   headers=headers).raise_for_status()  # fmt: skip
    for skill in CONFORMANCE_SKILLS:
        httpx.post(f"{base}/conformance/skills", json={**skill, "labels": ["production"]},
                   headers=headers).raise_for_status()  # fmt: skip
    httpx.patch(f"{base}/conformance", json={"mcp_tools": True}, headers=headers).raise_for_status()


def run_all() -> dict[str, list[str]]:
    """scenario@version -> the failed checks (empty: it passes)."""
    suite = [node(), str(npm_package(CONFORMANCE))]
    listed = subprocess.run(
        [*suite, "list", "--server"], capture_output=True, text=True, check=True
    )
    scenarios = re.findall(r"- ([a-z0-9-]+) \[([^\]]+)\]", listed.stdout)
    results: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as data:
        env = {"REGISTRY_DATA_DIR": data, "REGISTRY_OPERATOR_TOKEN": OPERATOR}
        command = [sys.executable, "-m", "registry", "serve", "--workers", "1"]
        with server(command, env, "/readyz", timeout=300) as running:
            _tenant(running.url)
            for name, versions in scenarios:
                for version in versions.split(","):
                    if version == "2025-03-26":
                        continue
                    extra = ["--spec-version", "2026-07-28", "--force"] if version == "extension" \
                        else ["--spec-version", version]  # fmt: skip
                    done = subprocess.run(
                        [*suite, "server", "--url", f"{running.url}/mcp/conformance",
                         "--scenario", name, *extra],
                        capture_output=True, text=True, timeout=180, check=False,
                        env={**os.environ, "NO_COLOR": "1"},
                    )  # fmt: skip
                    output = _ANSI.sub("", done.stdout + done.stderr)
                    failed = sorted(set(re.findall(r"\[([a-z0-9-]+)\s*\]\s+FAILURE", output)))
                    if done.returncode != 0 and not failed:
                        failed = ["(the scenario did not finish)"]
                    results[f"{name}@{version}"] = failed
                    print(name, version, "pass" if not failed else ",".join(failed), flush=True)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="tests/mcp/run_conformance")
    parser.add_argument("--json", default=None, help="also write the raw results here")
    options = parser.parse_args(argv)
    results = run_all()
    if options.json:
        with open(options.json, "w") as out:
            json.dump(results, out, indent=1)


if __name__ == "__main__":
    main()

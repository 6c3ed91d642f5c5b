"""The agent frameworks' own Python environment (the OpenAI Agents SDK and LangChain's MCP adapters
pin MCP SDKs the test environment does not have: LangChain's adapters need mcp < 2). Made once under
.cache/agent-clients/<digest of tests/agent_clients.txt>, with every package pinned there; standard
library only, so `.ci/run` can make it (`python3 tests/agent_env.py`) while the linters run."""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests" / "agent_clients.txt"


class Unavailable(RuntimeError):
    """The environment could not be made (the reason is the message)."""


def agent_python() -> Path:
    """Its Python, after making the environment if it is not there yet (under a lock, so two test
    processes make it once)."""
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]
    home = ROOT / ".cache" / "agent-clients" / digest
    python = home / "bin" / "python"
    if python.exists():
        return python
    home.parent.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not python.exists():
            _make(home)
    return python


def _make(home: Path) -> None:
    made = home.with_name(home.name + ".partial")
    shutil.rmtree(made, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(made)], check=True, timeout=120)
    installed = subprocess.run(
        [str(made / "bin" / "pip"), "install", "--quiet", "--no-deps", "-r", str(REQUIREMENTS)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    if installed.returncode != 0:
        shutil.rmtree(made, ignore_errors=True)
        raise Unavailable(f"installing the agent frameworks failed: {installed.stderr[-2000:]}")
    made.rename(home)  # whole, or not there at all


if __name__ == "__main__":
    print(agent_python())

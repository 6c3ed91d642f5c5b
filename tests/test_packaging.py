"""The built wheel carries everything the registry needs, migrations included."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.conftest import ROOT, PgServer, free_port, stop_serving, wait_ready


def _listed_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return set(config["packages"])


def _package_folders() -> set[str]:
    found = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for path in (ROOT / "registry").rglob("*.py")
        if "__pycache__" not in path.parts
    }
    for path in (ROOT / "migrations").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            found.add(".".join(("registry", *path.parent.relative_to(ROOT).parts)))
    return found


def test_every_package_folder_is_listed() -> None:
    assert _listed_packages() == _package_folders()


@pytest.fixture(scope="module")
def unpacked_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("prompt_registry-*.whl")
    target = out / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


@pytest.mark.slow
def test_the_installed_wheel_migrates_and_serves_from_any_directory(
    unpacked_wheel: Path, tmp_path: Path
) -> None:
    """`pip install` of the wheel (not editable) into a fresh virtual environment, then `registry
    migrate` and `registry serve` on the embedded server, run from an empty directory.

    The wheel alone is installed (--no-deps); its dependencies are those of the test environment,
    reached through a .pth file (the same pinned versions; installing every dependency again costs
    a minute, and CI's .ci/smoke-newest installs the registry with its dependencies resolved by pip).
    The test environment's own editable registry stays out of the way: the wheel's package, in the
    new environment's site-packages, is found first, as the first assertion checks."""
    (wheel,) = unpacked_wheel.parent.glob("prompt_registry-*.whl")
    scratch = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(scratch)], check=True, timeout=120)
    site = next((scratch / "lib").glob("python3*/site-packages"))
    (site / "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [str(scratch / "bin" / "pip"), "install", "--quiet", "--no-deps", str(wheel)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    command = str(scratch / "bin" / "registry")
    where = tmp_path / "elsewhere"
    where.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_", "PYTHON"))}
    env["REGISTRY_DATA_DIR"] = str(tmp_path / "data")
    located = subprocess.run(
        [str(scratch / "bin" / "python"), "-c", "import registry; print(registry.__file__)"],
        env=env, cwd=where, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert located.stdout.startswith(str(scratch)), located.stdout
    migrated = subprocess.run(
        [command, "migrate"], env=env, cwd=where, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert migrated.returncode == 0, migrated.stderr
    port = free_port()
    process = subprocess.Popen(
        [command, "serve", "--port", str(port), "--workers", "1"],
        env=env, cwd=where, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert wait_ready(process, port)["status"] == "ready"
        # The console's templates and assets are in the wheel too.
        for path in ("/ui", "/ui/static/console.css", "/ui/static/console.js"):
            assert httpx.get(f"http://127.0.0.1:{port}{path}").status_code == 200, path
    finally:
        assert stop_serving(process) == 0


def test_the_wheel_ships_the_migrations(unpacked_wheel: Path) -> None:
    migrations = unpacked_wheel / "registry" / "migrations"
    assert (migrations / "env.py").is_file()
    assert (migrations / "script.py.mako").is_file()
    shipped = {p.name for p in (migrations / "sql").glob("*.sql")}
    assert shipped == {p.name for p in (ROOT / "migrations" / "sql").glob("*.sql")}
    versions = {p.name for p in (migrations / "versions").glob("0*.py")}
    assert versions == {p.name for p in (ROOT / "migrations" / "versions").glob("0*.py")}


def test_the_unpacked_wheel_migrates_from_any_directory(
    unpacked_wheel: Path, pg_server: PgServer, empty_db_name: str, tmp_path: Path
) -> None:
    """Run from an empty directory, with the wheel's copy of the package first on the path: no
    alembic.ini and no migrations/ folder anywhere near."""
    script = (
        "import registry, sys\n"
        "from registry.db import migrate\n"
        f"assert registry.__file__.startswith({str(unpacked_wheel)!r}), registry.__file__\n"
        "migrate.upgrade(sys.argv[1])\n"
        "print(migrate.head_revision())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, pg_server.url(empty_db_name)],
        env={**os.environ, "PYTHONPATH": str(unpacked_wheel)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    head = done.stdout.strip()
    assert head == max(p.name[:4] for p in (ROOT / "migrations" / "versions").glob("0*.py"))


def test_alembic_runs_from_a_checkout(pg_server: PgServer, empty_db_name: str) -> None:
    """The checkout's alembic.ini keeps working for the `alembic` command itself."""
    done = subprocess.run(
        [sys.executable, "-m", "alembic", "upgrade", "head"],
        env={**os.environ, "REGISTRY_DATABASE_URL": pg_server.plain_url(empty_db_name)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr

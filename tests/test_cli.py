"""The `registry` command end to end, as an operator runs it, against a real database."""

from __future__ import annotations

import socket
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import PgServer, modules_loaded, registry_command

pytestmark = pytest.mark.slow


@pytest.fixture
def env(pg_server: PgServer, db_name: str) -> dict[str, str]:
    return {"REGISTRY_DATABASE_URL": pg_server.plain_url(db_name)}


def _ok(*args: str, env: dict[str, str]) -> str:
    result = registry_command(*args, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _fails(*args: str, env: dict[str, str]) -> str:
    result = registry_command(*args, env=env)
    assert result.returncode == 1, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one line, no traceback
    assert lines[0].startswith("error: ")
    return lines[0]


async def test_tenants_and_keys_end_to_end(
    env: dict[str, str], superuser: asyncpg.Connection
) -> None:
    assert "created tenant acme" in _ok("tenant", "create", "acme", "--title", "Acme", env=env)
    _ok("tenant", "create", "open", "--public-read", env=env)
    listing = _ok("tenant", "list", env=env).splitlines()
    assert listing[0].split() == ["SLUG", "ID", "READ", "TITLE"]
    assert [line.split()[0] for line in listing[1:]] == ["acme", "open"]
    assert "public" in listing[2]

    result = registry_command("key", "create", "--tenant", "acme", "--role", "publisher",
                              "--name", "deploy", env=env)  # fmt: skip
    assert result.returncode == 0, result.stderr
    secret = result.stdout.strip()
    assert secret.startswith("prk_")
    assert "\n" not in secret  # alone on stdout, so KEY=$(registry key create ...) works
    assert "deploy" in result.stderr

    keys = _ok("key", "list", "--tenant", "acme", env=env).splitlines()
    assert len(keys) == 2
    key_id, name, role = keys[1].split()[:3]
    assert (name, role) == ("deploy", "publisher")
    assert secret not in "".join(keys)

    assert f"revoked key deploy ({key_id})" in _ok("key", "revoke", key_id, env=env)
    revoked = await superuser.fetchval(
        "SELECT revoked_at FROM api_keys WHERE id = $1::uuid", key_id
    )
    assert revoked is not None


async def test_errors_are_one_line_and_write_nothing(
    env: dict[str, str], superuser: asyncpg.Connection
) -> None:
    _ok("tenant", "create", "acme", env=env)
    before = await superuser.fetchval("SELECT count(*) FROM audit_log")

    assert "invalid tenant slug 'Not_Valid'" in _fails("tenant", "create", "Not_Valid", env=env)
    assert "already exists: slug=acme" in _fails("tenant", "create", "acme", env=env)
    assert "tenant 'ghost' not found" in _fails(
        "key", "create", "--tenant", "ghost", "--role", "reader", env=env
    )
    assert "tenant 'ghost' not found" in _fails("key", "list", "--tenant", "ghost", env=env)
    assert "invalid key id" in _fails("key", "revoke", "not-a-uuid", env=env)
    assert "not found" in _fails("key", "revoke", "00000000-0000-4000-8000-000000000000", env=env)
    bad_role = registry_command("key", "create", "--tenant", "acme", "--role", "root", env=env)
    assert bad_role.returncode == 2
    assert "'root' is not one of" in bad_role.stderr

    assert await superuser.fetchval("SELECT count(*) FROM tenants") == 1
    assert await superuser.fetchval("SELECT count(*) FROM api_keys") == 0
    assert await superuser.fetchval("SELECT count(*) FROM audit_log") == before


def test_invalid_setting_names_the_variable(env: dict[str, str]) -> None:
    line = _fails("tenant", "list", env={**env, "REGISTRY_PAGE_SIZE": "0"})
    assert line.startswith("error: invalid setting REGISTRY_PAGE_SIZE:")
    line = _fails("tenant", "list", env={**env, "REGISTRY_DATABASE_URL": "mysql://x"})
    assert "REGISTRY_DATABASE_URL" in line
    assert "postgresql://" in line


def test_external_database_must_be_migrated_first(pg_server: PgServer, empty_db_name: str) -> None:
    env = {"REGISTRY_DATABASE_URL": pg_server.plain_url(empty_db_name)}
    for command in (("serve", "--port", "1"), ("tenant", "list")):
        line = _fails(*command, env=env)
        assert "run `registry migrate`" in line, line
    result = registry_command("migrate", env=env)
    assert result.returncode == 0, result.stderr
    assert "database schema at" in result.stderr
    assert _ok("tenant", "list", env=env).split() == ["SLUG", "ID", "READ", "TITLE"]


def test_unreachable_database_is_one_line(empty_db_name: str) -> None:
    env = {"REGISTRY_DATABASE_URL": "postgresql://nobody:secret-pw@127.0.0.1:1/none"}
    line = _fails("tenant", "list", env=env)
    assert "secret-pw" not in line


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        line = _fails(
            "serve", "--port", str(port), env={"REGISTRY_DATA_DIR": str(tmp_path / "data")}
        )
    assert f"127.0.0.1:{port} is already in use" in line
    assert not (tmp_path / "data").exists()  # nothing started


def test_short_commands_never_create_a_database(tmp_path: Path) -> None:
    elsewhere = tmp_path / "not-here"
    line = _fails("tenant", "list", env={"REGISTRY_DATA_DIR": str(elsewhere)})
    assert f"no registry database in {elsewhere}" in line
    assert not elsewhere.exists()


def test_webhooks_from_the_command_line(env: dict[str, str]) -> None:
    _ok("tenant", "create", "acme", env=env)
    secret = _ok(
        "webhook", "create", "--tenant", "acme", "--url", "https://hooks.example/in",
        "--event", "label.move", "--description", "ci", env=env,
    ).strip()  # fmt: skip
    assert secret.startswith("whsec_") and len(secret.splitlines()) == 1
    listing = _ok("webhook", "list", "--tenant", "acme", env=env)
    assert "https://hooks.example/in" in listing and "label.move" in listing
    assert secret not in listing
    endpoint_id = listing.splitlines()[1].split()[0]
    # The server that delivers judges private addresses (by its own setting, which this command
    # cannot see): registered, with a note that names the setting.
    loopback = registry_command(
        "webhook", "create", "--tenant", "acme", "--url", "http://127.0.0.1/x", env=env
    )
    assert loopback.returncode == 0, loopback.stderr
    assert "REGISTRY_WEBHOOK_ALLOW_PRIVATE=true where it runs" in loopback.stderr
    refused = _fails("webhook", "create", "--tenant", "acme", "--url", "ftp://x/y", env=env)
    assert "http or https" in refused
    _ok("webhook", "delete", "--tenant", "acme", endpoint_id, env=env)
    assert "hooks.example" not in _ok("webhook", "list", "--tenant", "acme", env=env)


def test_tenant_and_key_commands_load_no_parser_or_migration_tool_they_do_not_use() -> None:
    """What `registry tenant list` and `registry key create` import: no JSON Schema validator, no
    YAML reader, no Alembic (each a tenth of a second or more of every such command)."""
    imports = (
        "import registry.cli.base, registry.cli.tenants, registry.tenants.service, "
        "registry.db.engine, registry.db.attach, registry.db.migrate; "
        "registry.db.migrate.head_revision()"
    )
    assert modules_loaded(imports, ("jsonschema", "yaml", "alembic", "mako")) == []

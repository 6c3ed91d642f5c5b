"""What the console's "Connect a client" page shows: client configurations that work as shown, for
this registry as it runs (its address, its executable, where its database is)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from registry.config import Settings
from registry.db.embedded import EmbeddedPostgres


def command() -> list[str]:
    """The `registry` command of the environment this server runs from, by absolute path (a
    client starts it with its own PATH, which may not hold it)."""
    script = Path(sys.executable).with_name("registry")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "registry"]


def database_env(settings: Settings) -> dict[str, str]:
    """How a local `registry` command finds this registry's database: the embedded server's data
    folder (`registry serve` started it there), or the external URL without its password."""
    url = settings.database_dsn()
    embedded = EmbeddedPostgres(settings.data_dir.resolve())
    if url is None or url == embedded.url():
        return {"REGISTRY_DATA_DIR": str(settings.data_dir.resolve())}
    shown = make_url(url).set(drivername="postgresql")
    if shown.password is not None:
        shown = shown.set(password="PASSWORD")  # noqa: S106 - a placeholder, never the secret
    return {"REGISTRY_DATABASE_URL": shown.render_as_string(hide_password=False)}


def configs(
    settings: Settings, base: str, tenant: str, label: str, *, oauth: bool
) -> dict[str, Any]:
    """The endpoint and each way to connect to it; OAuth only where it can work (the registry has
    its public address and the tenant trusts an identity provider)."""
    url = f"{base}/mcp/{tenant}" + (f"/{label}" if label else "")
    name = f"{tenant}-prompts"
    program, *prefix = command()
    stdio_args = [*prefix, "mcp-stdio", "--tenant", tenant] + (["--label", label] if label else [])
    shown: dict[str, Any] = {
        "url": url,
        "http": {
            "mcpServers": {
                name: {
                    "type": "http",
                    "url": url,
                    "headers": {"Authorization": "Bearer <an API key of this tenant>"},
                }
            }
        },
        "stdio": {
            "mcpServers": {
                name: {
                    "command": program,
                    "args": stdio_args,
                    "env": database_env(settings),
                }
            }
        },
    }
    if oauth and settings.public_url:
        shown["oauth"] = {"mcpServers": {name: {"type": "http", "url": url}}}
    return shown

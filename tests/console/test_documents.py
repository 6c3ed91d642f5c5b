"""What the console shows, checked without a browser: the editor's document (what the live check
and a save accept and refuse), and the client configurations of "Connect a client"."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry.config import load_settings
from registry.console import clients
from registry.console.documents import parse
from registry.db.embedded import EmbeddedPostgres
from registry.errors import InvalidInput
from tests.test_prompt_files import BOMB


def test_an_alias_bomb_is_refused_with_where_it_is() -> None:
    with pytest.raises(InvalidInput, match="anchors and aliases") as refused:
        parse(BOMB, commit_message=None)
    assert refused.value.detail == {"line": 1, "column": 4}


def test_a_plain_document_is_read() -> None:
    edited = parse("messages:\n  - role: user\n    text: Hello.\n", commit_message="first")
    assert edited.version.commit_message == "first"
    assert edited.tests is None  # not mentioned: the prompt's cases stay as they are


def test_test_cases_are_read_beside_the_version_and_named_at_their_place() -> None:
    text = (
        "tests:\n  - name: hello\n    expect: {contains: [Hello]}\n"
        "messages:\n  - role: user\n    text: Hello.\n"
    )
    edited = parse(text, commit_message=None)
    assert [case.name for case in edited.tests or []] == ["hello"]
    with pytest.raises(InvalidInput, match=r"tests\.0\.expect\.matches") as refused:
        parse(text.replace("{contains: [Hello]}", "{matches: '(('}"), commit_message=None)
    assert refused.value.detail["field"] == "tests.0.expect.matches"


def test_the_stdio_configuration_works_where_the_registry_runs(tmp_path: Path) -> None:
    """The command by absolute path; the embedded database by its data folder (what a local
    command attaches to), an external one by its URL without the password."""
    data = tmp_path / "data"
    embedded = load_settings(database_url=EmbeddedPostgres(data).url(), data_dir=data)
    shown = clients.configs(embedded, "http://127.0.0.1:8000", "acme", "", oauth=True)
    server = shown["stdio"]["mcpServers"]["acme-prompts"]
    assert Path(server["command"]).is_absolute()
    assert server["env"] == {"REGISTRY_DATA_DIR": str(data.resolve())}
    assert "oauth" not in shown  # no public address: OAuth cannot work
    external = load_settings(
        database_url="postgresql://registry:s3cret@db.internal:5432/registry",
        public_url="https://prompts.example",
    )
    shown = clients.configs(external, "https://prompts.example", "acme", "staging", oauth=True)
    env = shown["stdio"]["mcpServers"]["acme-prompts"]["env"]
    assert env == {
        "REGISTRY_DATABASE_URL": "postgresql://registry:PASSWORD@db.internal:5432/registry"
    }
    assert (
        shown["oauth"]["mcpServers"]["acme-prompts"]["url"]
        == "https://prompts.example/mcp/acme/staging"
    )
    assert "oauth" not in clients.configs(external, "https://x", "acme", "", oauth=False)

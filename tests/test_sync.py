"""`registry push` and `registry pull` against a real server, as a team would use them."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer, PgServer, module_server, registry_command

pytestmark = pytest.mark.slow

PNG = b"\x89PNG\r\n\x1a\n" + b"pixels" * 10


@pytest.fixture(scope="module")
async def live_server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    """One server for the module (each test has tenants of its own)."""
    async with module_server(pg_server, template_db) as server:
        yield server


def cli(server: LiveServer, key: str, *args: str):  # type: ignore[no-untyped-def]
    return registry_command(*args, env={"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key})


def write_folder(folder: Path) -> None:
    folder.mkdir()
    (folder / "greet.yaml").write_text(
        "title: Greeting\ntags: [demo]\nlabels: [production]\n"
        "arguments:\n  - name: who\n    required: true\n"
        "messages:\n  - role: user\n    text: |\n      Hello {{who}}!\n      How are you?\n"
    )
    (folder / "notes.md").write_text(
        "---\ndescription: Meeting notes\narguments:\n  - name: topic\n---\nSummarise the notes about {{topic}}.\n"
    )
    (folder / "pic.png").write_bytes(PNG)
    (folder / "look.yaml").write_text(
        "messages:\n  - role: user\n    content: {type: image, file: pic.png}\n"
        "  - role: user\n    text: What is in this picture?\n"
    )
    (folder / "bad.yaml").write_text("messages:\n  - role: user\n    text: 'Hi {{who'\n")
    (folder / "broken.yaml").write_text("messages: [unclosed\n")


def test_push_dry_run_then_push_then_nothing_to_do(live_server: LiveServer, tmp_path: Path) -> None:
    keys = live_server.tenant("acme", roles=("editor", "publisher"))
    folder = tmp_path / "prompts"
    write_folder(folder)

    dry = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "acme", "--dry-run")
    assert dry.returncode == 1  # two bad files
    assert "greet.yaml: create: would create prompt greet at version 1" in dry.stdout
    assert "bad.yaml: error: 422" in dry.stderr
    assert "unclosed tag" in dry.stderr
    assert "broken.yaml: error: invalid YAML at line" in dry.stderr
    assert "dry run: nothing written" in dry.stderr
    listing = httpx.get(
        f"{live_server.url}/api/v1/tenants/acme/prompts",
        headers={"Authorization": f"Bearer {keys['editor']}"},
    )
    assert listing.json()["items"] == []

    pushed = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "acme")
    assert pushed.returncode == 1
    for name in ("greet", "notes", "look"):
        assert f"{name}: create: created prompt {name} at version 1" in pushed.stdout.replace(
            ".yaml", ""
        ).replace(".md", "")
    (folder / "bad.yaml").unlink()
    (folder / "broken.yaml").unlink()

    # Nothing changed: nothing written, and an editor may re-push a file naming a protected label
    # that is already where the file says.
    again = cli(live_server, keys["editor"], "push", str(folder), "--tenant", "acme")
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("unchanged") == 3

    (folder / "greet.yaml").write_text(
        (folder / "greet.yaml").read_text().replace("How are you?", "Welcome.")
    )
    denied = cli(live_server, keys["editor"], "push", str(folder), "--tenant", "acme")
    assert "greet.yaml: error: 403" in denied.stderr  # production would move: publisher only
    changed = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "acme")
    assert "greet.yaml: version: wrote greet version 2" in changed.stdout

    rendered = httpx.post(
        f"{live_server.url}/api/v1/tenants/acme/prompts/look/render", json={"label": "latest"},
        headers={"Authorization": f"Bearer {keys['editor']}"},
    ).json()  # fmt: skip
    assert base64.b64decode(rendered["messages"][0]["content"]["data"]) == PNG


def test_pull_round_trips_to_another_tenant(live_server: LiveServer, tmp_path: Path) -> None:
    source = live_server.tenant("source", roles=("editor", "publisher"))
    target = live_server.tenant("target", roles=("editor", "publisher"))
    folder = tmp_path / "prompts"
    write_folder(folder)
    (folder / "bad.yaml").unlink()
    (folder / "broken.yaml").unlink()
    assert (
        cli(live_server, source["publisher"], "push", str(folder), "--tenant", "source").returncode
        == 0
    )

    pulled = tmp_path / "pulled"
    result = cli(live_server, source["editor"], "pull", str(pulled), "--tenant", "source")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in pulled.glob("*.yaml")) == [
        "greet.yaml",
        "look.yaml",
        "notes.yaml",
    ]
    assert (pulled / "blobs" / hashlib.sha256(PNG).hexdigest()).read_bytes() == PNG
    greet = (pulled / "greet.yaml").read_text()
    assert "labels:\n- production" in greet
    assert "Hello {{who}}!\n    How are you?" in greet

    first = cli(live_server, target["publisher"], "push", str(pulled), "--tenant", "target")
    assert first.returncode == 0, first.stderr + first.stdout
    assert first.stdout.count("create:") == 3
    second = cli(live_server, target["publisher"], "push", str(pulled), "--tenant", "target")
    assert second.stdout.count("unchanged") == 3

    empty = tmp_path / "empty"
    empty.mkdir()
    none = cli(live_server, target["editor"], "push", str(empty), "--tenant", "target")
    assert none.returncode == 1
    assert "no prompt files" in none.stderr
    # Pulled over a file that names a local file still the same: the reference is kept.
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    for name in ("look.yaml", "pic.png"):
        (pictures / name).write_bytes((folder / name).read_bytes())
    again = cli(live_server, source["editor"], "pull", str(pictures), "--tenant", "source")
    assert again.returncode == 0, again.stderr
    look = (pictures / "look.yaml").read_text()
    assert "file: pic.png" in look and "blob:" not in look
    wrong = cli(live_server, source["editor"], "pull", str(tmp_path / "x"), "--tenant", "target")
    assert wrong.returncode == 1
    assert "403" in wrong.stderr


def test_labels_only_pushes_twins_and_pulls_beside_a_source(
    live_server: LiveServer, tmp_path: Path
) -> None:
    keys = live_server.tenant("labelled", roles=("publisher",))
    folder = tmp_path / "prompts"
    folder.mkdir()
    greet = folder / "greet.md"
    greet.write_text("---\ndescription: hi\n---\nHello.\n")
    assert (
        cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "labelled").returncode
        == 0
    )
    # Only the labels change: said so, not "unchanged".
    greet.write_text("---\ndescription: hi\nlabels: [production]\n---\nHello.\n")
    moved = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "labelled")
    assert moved.returncode == 0, moved.stderr
    assert "greet.md: labels: moved production of greet to version 1" in moved.stdout

    # Pulling into the source folder keeps greet.md as it is (what it says is what is served).
    pulled = cli(live_server, keys["publisher"], "pull", str(folder), "--tenant", "labelled")
    assert pulled.returncode == 0, pulled.stderr
    assert "greet.md: unchanged" in pulled.stdout
    assert greet.read_text() == "---\ndescription: hi\nlabels: [production]\n---\nHello.\n"
    assert not (folder / "greet.yaml").exists()
    # Two files for one prompt are refused on push, naming both.
    (folder / "greet.yaml").write_text("messages:\n  - role: user\n    text: Stale.\n")
    twins = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "labelled")
    assert twins.returncode == 1
    assert "greet.md and greet.yaml both hold prompt greet" in twins.stderr


def test_push_writes_included_prompts_first_then_refresh_and_force(
    live_server: LiveServer, tmp_path: Path
) -> None:
    keys = live_server.tenant("composed", roles=("reader", "publisher"))
    folder = tmp_path / "composed"
    folder.mkdir()
    # "answer" sorts before "tone", which it includes: push must write "tone" first.
    (folder / "answer.yaml").write_text(
        "labels: [production]\narguments:\n  - name: topic\n    required: true\n"
        "  - name: style\n    default: kind\n"
        "messages:\n  - role: user\n    text: '{{> tone}} About {{topic}}.'\n"
    )
    (folder / "tone.yaml").write_text(
        "labels: [production]\narguments:\n  - name: style\n"
        "messages:\n  - role: user\n    text: Be {{style}}.\n"
    )
    pushed = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "composed")
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.index("tone.yaml") < pushed.stdout.index("answer.yaml")
    base = f"{live_server.url}/api/v1/tenants/composed/prompts"
    reader = {"Authorization": f"Bearer {keys['reader']}"}

    def rendered() -> str:
        answer = httpx.post(
            f"{base}/answer/render", json={"arguments": {"topic": "x"}}, headers=reader
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["messages"][0]["content"]["text"])

    assert rendered() == "Be kind. About x."
    # A new tone in production changes no parent until it is refreshed.
    (folder / "tone.yaml").write_text(
        "labels: [production]\narguments:\n  - name: style\n"
        "messages:\n  - role: user\n    text: Be {{style}} and brief.\n"
    )
    only_tone = tmp_path / "only-tone"
    only_tone.mkdir()
    (only_tone / "tone.yaml").write_text((folder / "tone.yaml").read_text())
    assert (
        cli(
            live_server, keys["publisher"], "push", str(only_tone), "--tenant", "composed"
        ).returncode
        == 0
    )
    assert rendered() == "Be kind. About x."
    refreshed = cli(
        live_server, keys["publisher"], "refresh", "answer", "--tenant", "composed",
        "--label", "production",
    )  # fmt: skip
    assert refreshed.returncode == 0, refreshed.stderr
    assert (
        "wrote answer version 2 with refreshed partials; moved production -> version 2"
        in refreshed.stdout
    )
    assert "1 prompt(s), 0 error(s)" in refreshed.stderr
    assert rendered() == "Be kind and brief. About x."
    again = cli(live_server, keys["publisher"], "refresh", "answer", "--tenant", "composed")
    assert "its partials are current" in again.stdout
    # Nothing to refresh, but a label asked for: it moves to the latest, and says so.
    staged = cli(
        live_server, keys["publisher"], "refresh", "answer", "--tenant", "composed",
        "--label", "staging",
    )  # fmt: skip
    assert "answer: labels: moved staging -> version 2 (its partials are current" in staged.stdout
    # Dropping an argument breaks production's callers: refused, then forced.
    (folder / "answer.yaml").write_text(
        "labels: [production]\narguments:\n  - name: style\n    default: kind\n"
        "messages:\n  - role: user\n    text: '{{> tone}}'\n"
    )
    refused = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "composed")
    assert (
        refused.returncode == 1
        and "409" in refused.stderr
        and "'topic' was removed" in refused.stderr
        and "Pass --force to do it anyway" in refused.stderr  # the CLI's words, not REST's
        and "force=true" not in refused.stderr
    )
    forced = cli(
        live_server, keys["publisher"], "push", str(folder), "--tenant", "composed", "--force"
    )
    assert forced.returncode == 0, forced.stderr


def test_the_default_address_says_it_is_the_default(tmp_path: Path) -> None:
    """With REGISTRY_URL unset and nothing at the default address, push says what it tried and
    how to point it elsewhere."""
    import os
    import socket

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 8000)) == 0:
            pytest.skip("something listens on 127.0.0.1:8000 here")
    write_folder(tmp_path / "prompts")
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "registry", "push", str(tmp_path / "prompts"), "--tenant", "acme",
         "--key", "pr_anything"],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "cannot reach http://127.0.0.1:8000" in done.stderr
    assert "is the default" in done.stderr and "REGISTRY_URL" in done.stderr


def test_a_dry_run_says_exactly_what_the_push_does_with_partials(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """A new child and a parent that includes it; then a changed child with the parent's labels
    changed: each dry run plans against the folder's own planned versions, and the push that
    follows does what it said, line for line."""
    keys = live_server.tenant("planned", roles=("publisher",))
    folder = tmp_path / "planned"
    folder.mkdir()
    (folder / "answer.yaml").write_text(
        "labels: [production]\narguments:\n  - name: style\n"
        "messages:\n  - role: user\n    text: '{{> tone}} Answer.'\n"
    )
    (folder / "tone.yaml").write_text(
        "labels: [production]\narguments:\n  - name: style\nmessages:\n  - role: user\n"
        "    text: Be {{style}}.\n"
    )

    def push(*extra: str) -> list[str]:
        done = cli(
            live_server, keys["publisher"], "push", str(folder), "--tenant", "planned", *extra
        )
        assert done.returncode == 0, done.stderr + done.stdout
        return str(done.stdout).replace("would ", "").splitlines()

    first = push("--dry-run")
    assert first == [
        "tone.yaml: create: create prompt tone at version 1",
        "answer.yaml: create: create prompt answer at version 1",
    ], first
    assert first == [line.replace("created", "create") for line in push()]
    (folder / "tone.yaml").write_text(
        "labels: [production]\narguments:\n  - name: style\nmessages:\n  - role: user\n"
        "    text: Be {{style}} and brief.\n"
    )
    (folder / "answer.yaml").write_text(
        "labels: [production, staging]\narguments:\n  - name: style\n"
        "messages:\n  - role: user\n    text: '{{> tone}} Answer.'\n"
    )
    second = push("--dry-run")
    assert second == [
        "tone.yaml: version: write tone version 2; move production to it",
        "answer.yaml: version: write answer version 2; move production, staging to it",
    ], second
    pushed = push()
    assert [line.replace("wrote", "write").replace("moved", "move") for line in pushed] == second


def test_a_wrong_key_or_address_is_said_once_not_once_per_file(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """Issue 67: a wrong key, or REGISTRY_URL set to the MCP endpoint, failed every file alike."""
    live_server.tenant("once", roles=("publisher",))
    folder = tmp_path / "prompts"
    write_folder(folder)
    (folder / "other.yaml").write_text("messages:\n  - role: user\n    text: Hi\n")
    wrong_key = cli(live_server, "prk_wrong", "push", str(folder), "--tenant", "once")
    assert wrong_key.returncode == 1
    assert wrong_key.stderr.count("tenant 'once'") == 1, wrong_key.stderr
    assert "greet.yaml" not in wrong_key.stdout + wrong_key.stderr
    key = live_server.tenant("twice", roles=("publisher",))["publisher"]
    wrong_url = registry_command(
        "push", str(folder), "--tenant", "twice",
        env={"REGISTRY_URL": f"{live_server.url}/mcp/twice", "REGISTRY_API_KEY": key},
    )  # fmt: skip
    assert wrong_url.returncode == 1
    assert "the server's base address" in wrong_url.stderr and "greet.yaml" not in wrong_url.stdout
    pulled = registry_command(
        "pull", str(tmp_path / "out"), "--tenant", "twice",
        env={"REGISTRY_URL": f"{live_server.url}/api/v1", "REGISTRY_API_KEY": key},
    )  # fmt: skip
    assert pulled.returncode == 1 and "the server's base address" in pulled.stderr


def test_a_pull_over_the_folder_just_pushed_changes_no_file(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """Issue 67: pull rewrote `file: diagram.png` as `blob: <sha>` and Markdown prompts as YAML,
    so a pull after a push changed files. Now a prompt the file already says is left as it is, a
    Markdown prompt stays Markdown, and a new version is written in the file's own format."""
    key = live_server.tenant("round", roles=("publisher",))["publisher"]
    folder = tmp_path / "prompts"
    folder.mkdir()
    (folder / "note.md").write_text(
        "---\ntitle: A note   # said once\narguments: [{name: thing}]\n---\nRemember {{thing}}.\n"
    )
    (folder / "diagram.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (folder / "drawn.yaml").write_text(
        "# the architecture, drawn\nmessages:\n  - role: user\n    content: {type: image, "
        "file: diagram.png}\n  - role: user\n    text: Explain it.\n"
    )
    files = {path.name: path.read_bytes() for path in folder.iterdir()}
    env = {"REGISTRY_URL": live_server.url, "REGISTRY_API_KEY": key}
    pushed = registry_command("push", str(folder), "--tenant", "round", env=env)
    assert pushed.returncode == 0, pushed.stderr
    pulled = registry_command("pull", str(folder), "--tenant", "round", env=env)
    assert pulled.returncode == 0, pulled.stderr + pulled.stdout
    assert "note.md: unchanged" in pulled.stdout and "drawn.yaml: unchanged" in pulled.stdout
    after = {path.name: path.read_bytes() for path in folder.iterdir() if path.name != "blobs"}
    assert after == files

    changed = {
        "title": "A note", "arguments": [{"name": "thing"}],
        "messages": [{"role": "user", "content": {"type": "text", "text": "Recall {{thing}}."}}],
    }  # fmt: skip
    with httpx.Client(base_url=f"{live_server.url}/api/v1/tenants/round") as http:
        written = http.post("/prompts/note/versions", json=changed,
                            headers={"Authorization": f"Bearer {key}"})  # fmt: skip
        assert written.status_code == 201, written.text
    again = registry_command("pull", str(folder), "--tenant", "round", env=env)
    assert again.returncode == 0 and "note.md: wrote" in again.stdout, again.stdout
    assert not (folder / "note.yaml").exists()
    assert (folder / "note.md").read_text().endswith("Recall {{thing}}.\n")
    repushed = registry_command("push", str(folder), "--tenant", "round", env=env)
    assert "note.md: unchanged" in repushed.stdout, repushed.stdout

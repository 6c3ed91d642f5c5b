"""`registry install` end to end against a live server with a signing key, in a temporary home per
run (``--root``): every host's folder holds byte for byte what skills/list and resources/read serve,
verified before it lands; the lock file tells installed, stale, missing, removed and edited apart;
pins; trust pinned at the first install and a different key or a tampered byte refused; a follow
process that installs a publish as it commits."""

from __future__ import annotations

import base64
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from registry import installing
from tests.conftest import (
    OPERATOR_TOKEN,
    ROOT,
    LiveServer,
    PgServer,
    module_server,
    registry_command,
)
from tests.mcp.conftest import CONFORMANCE_SKILLS
from tests.mcp.test_stateless_live import META, REVISION
from tests.test_client import keypair

pytestmark = pytest.mark.slow

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
DOCUMENTED = {  # (host, scope): the folder the host's documentation names, under home or project
    ("claude-code", "user"): ".claude/skills",
    ("claude-code", "project"): ".claude/skills",
    ("codex", "user"): ".agents/skills",
    ("codex", "project"): ".agents/skills",
    ("vscode", "user"): ".copilot/skills",
    ("vscode", "project"): ".github/skills",
    ("cursor", "user"): ".cursor/skills",
    ("cursor", "project"): ".cursor/skills",
    ("goose", "user"): ".config/goose/skills",
    ("goose", "project"): ".goose/skills",
}


@pytest.fixture(scope="module")
async def server(
    pg_server: PgServer, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[LiveServer]:
    private, _ = keypair(tmp_path_factory.mktemp("key"))
    async with module_server(
        pg_server, template_db, REGISTRY_SNAPSHOT_KEY_FILE=str(private)
    ) as server:
        yield server


def run(server: LiveServer, key: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key}
    return registry_command("install", *args, env=env, timeout=120)


def publish(server: LiveServer, tenant: str, name: str, files: list[dict[str, str]]) -> None:
    written = httpx.post(
        f"{server.url}/api/v1/tenants/{tenant}/skills/{name}/versions",
        json={"files": files, "labels": ["production"]},
        headers=OPERATOR,
    )
    assert written.status_code == 201, written.text


def served_files(server: LiveServer, tenant: str, key: str) -> dict[str, dict[str, bytes]]:
    """Every served skill's files as an MCP client reads them (skills/list, resources/read)."""
    found: dict[str, dict[str, bytes]] = {}
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as http:

        def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            headers = {"MCP-Protocol-Version": REVISION, "Mcp-Method": method}
            if "uri" in params:
                headers["Mcp-Name"] = params["uri"]
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": method,
                "params": {"_meta": META, **params},
            }
            answer = http.post(f"/mcp/{tenant}", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            return dict(answer.json()["result"])

        for entry in call("skills/list", {})["skills"]:
            name = entry["frontmatter"]["name"]
            files = found.setdefault(name, {})
            for resource in entry["resources"]:
                (contents,) = call("resources/read", {"uri": resource["uri"]})["contents"]
                data = (
                    contents["text"].encode()
                    if "text" in contents
                    else base64.b64decode(contents["blob"])
                )
                files[resource["uri"].removeprefix(f"skill://{name}/")] = data
    return found


def on_disk(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_every_host_and_scope_holds_what_mcp_serves(server: LiveServer, tmp_path: Path) -> None:
    reader = server.tenant("hosts", roles=("reader",))["reader"]
    for skill in CONFORMANCE_SKILLS:
        server.skill("hosts", skill)
    served = served_files(server, "hosts", reader)
    assert set(served) == {"pdf-processing", "code-review"}
    for (host, scope), documented in DOCUMENTED.items():
        root = tmp_path / f"{host}-{scope}"
        done = run(server, reader, "--host", host, "--tenant", "hosts", "--scope", scope,
                   "--root", str(root))  # fmt: skip
        assert done.returncode == 0, done.stderr
        folder = root / documented
        for name, files in served.items():
            assert on_disk(folder / name) == files, (host, scope, name)
            assert f"{host}: {name}: installed: version 1 (production)" in done.stdout
        lock = json.loads((folder / installing.LOCK_FILE).read_text())
        assert (lock["host"], lock["tenant"], lock["label"]) == (host, "hosts", None)
        held = lock["skills"]["code-review"]
        assert (held["version"], held["label"]) == (1, "production")
        assert held["digest"].startswith("sha256:") and held["keyId"] in lock["keys"]
        # Nothing else lands where the host looks: no staging folder left, only skills and lock.
        assert sorted(p.name for p in folder.iterdir()) == [
            "code-review", "pdf-processing", installing.LOCK_FILE]  # fmt: skip

    again = run(server, reader, "--host", "codex", "--tenant", "hosts", "--root",
                str(tmp_path / "codex-user"))  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "code-review: unchanged: version 1 (production)" in again.stdout
    checked = run(server, reader, "--host", "codex", "--tenant", "hosts", "--root",
                  str(tmp_path / "codex-user"), "--check")  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "code-review: ok: version 1 as installed" in checked.stdout


def test_stale_edited_pinned_and_removed(server: LiveServer, tmp_path: Path) -> None:
    reader = server.tenant("drift", roles=("reader",))["reader"]
    for skill in CONFORMANCE_SKILLS:
        server.skill("drift", skill)
    args = ("--host", "claude-code", "--tenant", "drift", "--root", str(tmp_path))
    folder = tmp_path / ".claude/skills"
    assert run(server, reader, *args).returncode == 0

    review = [dict(f) for f in CONFORMANCE_SKILLS[1]["files"]]
    review[1]["text"] = "- [ ] tests\n- [ ] docs\n- [ ] changelog\n"
    publish(server, "drift", "code-review", review)
    checked = run(server, reader, *args, "--check")
    assert checked.returncode == 1
    assert "code-review: stale: version 1 installed, 2 served" in checked.stdout
    assert "pdf-processing: ok" in checked.stdout

    forms = folder / "pdf-processing/references/FORMS.md"
    forms.write_text("# Forms\n\nMy own notes.\n")
    checked = run(server, reader, *args, "--check")
    assert "pdf-processing: edited: edited by hand: references/FORMS.md" in checked.stdout

    kept = run(server, reader, *args)  # the edit is kept, the stale skill brought current
    assert kept.returncode == 0, kept.stderr
    assert "pdf-processing: kept: edited by hand" in kept.stdout
    assert "code-review: installed: version 2 (production)" in kept.stdout
    assert forms.read_text() == "# Forms\n\nMy own notes.\n"
    assert (folder / "code-review/references/CHECKLIST.md").read_text().endswith("changelog\n")

    forced = run(server, reader, *args, "--force")
    assert "pdf-processing: installed: version 1" in forced.stdout, forced.stdout
    assert forms.read_text() == "# Forms\n\nFill every field.\n"

    pinned = run(server, reader, *args, "--label", "production", "code-review@1")
    assert pinned.returncode == 0, pinned.stderr
    assert "code-review: installed: version 1 (pinned)" in pinned.stdout
    assert (
        folder / "code-review/references/CHECKLIST.md"
    ).read_text() == "- [ ] tests\n- [ ] docs\n"
    lock = json.loads((folder / installing.LOCK_FILE).read_text())
    assert lock["pins"] == {"code-review": 1} and lock["label"] == "production"
    held = run(server, reader, *args, "--check")  # the lock remembers the pin
    assert held.returncode == 0, held.stdout

    archived = httpx.post(f"{server.url}/api/v1/tenants/drift/skills/pdf-processing/archive",
                          json={"archived": True}, headers=OPERATOR)  # fmt: skip
    assert archived.status_code == 200, archived.text
    checked = run(server, reader, *args, "--check")
    assert "pdf-processing: removed: installed, no longer served" in checked.stdout
    marked = run(server, reader, *args, "--keep-removed")
    assert "pdf-processing: kept: no longer served; kept and marked" in marked.stdout
    assert (folder / "pdf-processing/SKILL.md").is_file()
    removed = run(server, reader, *args)
    assert "pdf-processing: removed: no longer served" in removed.stdout
    assert not (folder / "pdf-processing").exists()

    (folder / "mine").mkdir()  # a person's own skill under a name the registry then serves
    (folder / "mine/SKILL.md").write_text("---\nname: mine\ndescription: mine\n---\nMine.\n")
    server.skill("drift", {"name": "mine", "files": [
        {"path": "SKILL.md", "text": "---\nname: mine\ndescription: theirs\n---\nTheirs.\n"}]})  # fmt: skip
    mine = run(server, reader, *args)
    assert "mine: kept: a folder this command did not install" in mine.stdout
    assert "Mine." in (folder / "mine/SKILL.md").read_text()

    other = server.tenant("drift-other", roles=("reader",))["reader"]
    refused = run(server, other, "--host", "claude-code", "--tenant", "drift-other", "--root",
                  str(tmp_path))  # fmt: skip
    assert refused.returncode == 1
    assert "holds tenant 'drift''s skills" in refused.stderr


def test_trust_is_pinned_and_a_different_key_or_a_changed_byte_is_refused(
    server: LiveServer, tmp_path: Path
) -> None:
    reader = server.tenant("trust", roles=("reader",))["reader"]
    server.skill("trust", CONFORMANCE_SKILLS[1])
    _, stranger = keypair(tmp_path)
    args = ("--host", "cursor", "--tenant", "trust", "--root", str(tmp_path / "home"))
    folder = tmp_path / "home/.cursor/skills"

    refused = run(server, reader, *args, "--public-key", str(stranger))
    assert refused.returncode == 1
    assert (
        "code-review: refused: not verified, not installed: signed with the key" in refused.stdout
    )
    assert not (folder / "code-review").exists()
    assert not any(p.name.startswith(".code-review") for p in folder.iterdir())

    trusted = run(server, reader, *args)  # a lock with the stranger's key: still refused
    assert "refused" in trusted.stdout and trusted.returncode == 1
    (folder / installing.LOCK_FILE).unlink()
    first = run(server, reader, *args)  # a first install pins the registry's published keys
    assert first.returncode == 0, first.stdout + first.stderr
    published = httpx.get(f"{server.url}/.well-known/prompt-registry/signing-keys").json()
    lock = json.loads((folder / installing.LOCK_FILE).read_text())
    assert set(lock["keys"]) == {k["keyId"] for k in published["keys"]}

    # A byte changed on the way (a proxy between the registry and the machine): not installed,
    # and what was installed stays.
    before = on_disk(folder / "code-review")
    review = [dict(f) for f in CONFORMANCE_SKILLS[1]["files"]]
    review[0]["text"] = review[0]["text"].replace("Tests pass", "Tests pass twice")
    publish(server, "trust", "code-review", review)
    registry = installing.Registry(server.url, reader, "trust", transport=Tampering())
    options = installing.Options("cursor", folder, None, {})
    lock_file = installing.open_lock(registry, server.url, options)
    (line,) = installing.install(registry, lock_file, options)
    registry.close()
    assert line.action == "refused", line
    assert "SKILL.md: its digest is not the manifest's" in line.detail
    assert on_disk(folder / "code-review") == before
    assert json.loads((folder / installing.LOCK_FILE).read_text())["skills"]["code-review"][
        "version"] == 1  # fmt: skip


class Tampering(httpx.HTTPTransport):
    """The network as an attacker in the middle would be: every file read has a byte changed."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.headers.get("Mcp-Method") != "resources/read":
            return response
        body = json.loads(response.read())
        contents = body["result"]["contents"][0]
        if "text" in contents:
            contents["text"] = contents["text"].replace("Tests", "Tes7s")
        return httpx.Response(200, json=body, headers={"Content-Type": "application/json"})


@pytest.fixture
def follower(
    server: LiveServer, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    reader = server.tenant("follow", roles=("reader",))["reader"]
    server.skill("follow", CONFORMANCE_SKILLS[1])
    process = subprocess.Popen(
        [sys.executable, "-m", "registry", "install", "--host", "goose", "--tenant", "follow",
         "--root", str(tmp_path), "--follow"],
        env={**os.environ, "REGISTRY_URL": server.url, "REGISTRY_API_KEY": reader},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()

    def pump(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)

    for stream in (process.stdout, process.stderr):
        assert stream is not None
        threading.Thread(target=pump, args=(stream,), daemon=True).start()
    try:
        yield process, lines
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_for(lines: queue.Queue[str], text: str) -> float:
    """When a line holding ``text`` came (monotonic), every line before it read; bounded."""
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=60)
        except queue.Empty:
            raise AssertionError(f"no {text!r} within 60 s; saw {seen}") from None
        seen.append(line)
        if text in line:
            return time.monotonic()


def test_follow_installs_a_publish_as_it_commits(
    server: LiveServer, tmp_path: Path, follower: tuple[subprocess.Popen[str], queue.Queue[str]]
) -> None:
    _, lines = follower
    wait_for(lines, "following tenant follow's changes")
    review = [dict(f) for f in CONFORMANCE_SKILLS[1]["files"]]
    review[1]["text"] = "- [ ] tests\n- [ ] docs\n- [ ] followed\n"
    published = time.monotonic()
    publish(server, "follow", "code-review", review)
    arrived = wait_for(lines, "code-review: installed: version 2 (production)")
    folder = tmp_path / ".config/goose/skills/code-review"
    assert (folder / "references/CHECKLIST.md").read_text().endswith("followed\n")
    print(f"follow: a publish installed {arrived - published:.3f} s after its commit was answered")


def test_a_library_skill_installs_as_the_library_signed_it(
    server: LiveServer, tmp_path: Path
) -> None:
    library = server.tenant("shelf", roles=("admin",))
    reader = server.tenant("reads-shelf", roles=("admin", "reader"))
    server.skill("shelf", CONFORMANCE_SKILLS[1])
    for path, key, body in (
        ("/shelf/subscribers", library["admin"], {"tenant": "reads-shelf", "label": "production"}),
        ("/reads-shelf/libraries", reader["admin"], {"library": "shelf", "label": "production"}),
    ):
        made = httpx.post(f"{server.url}/api/v1/tenants{path}", json=body,
                          headers={"Authorization": f"Bearer {key}"})  # fmt: skip
        assert made.status_code == 201, made.text
    done = run(server, reader["reader"], "--host", "claude-code", "--tenant", "reads-shelf",
               "--root", str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "code-review: installed: version 1 (production)" in done.stdout
    folder = tmp_path / ".claude/skills/code-review"
    assert on_disk(folder) == served_files(server, "shelf", library["admin"])["code-review"]
    lock = json.loads((tmp_path / ".claude/skills" / installing.LOCK_FILE).read_text())
    assert lock["skills"]["code-review"]["document"]["tenant"] == "shelf"

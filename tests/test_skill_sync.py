"""`registry push` and `pull` with skill folders (DIR/skills/NAME/) beside the prompt files: a dry
run plans without writing, a push creates, writes nothing when unchanged and a new version when a
file changed, and a pull writes the folder back with SKILL.md as written (its partial tags kept)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer
from tests.test_sync import cli

pytestmark = pytest.mark.slow

SKILL_MD = (
    "---\nname: code-review\ndescription: How we review\n---\n# Review\n\n{{> checklist@latest}}\n"
)


def skill_folder(folder: Path) -> Path:
    folder.mkdir()
    (folder / "checklist.yaml").write_text(
        'messages:\n  - role: user\n    text: "1. Tests pass."\n'
    )
    skill = folder / "skills" / "code-review"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(SKILL_MD)
    (skill / "references" / "CHECKLIST.md").write_text("- [ ] tests\n")
    (skill / "logo.bin").write_bytes(b"\x00\xff\x10")
    (skill / ".registry.yaml").write_text("labels: [production]\ncommit_message: first\n")
    return skill


def test_push_and_pull_skill_folders(live_server: LiveServer, tmp_path: Path) -> None:
    key = live_server.tenant("acme", roles=("publisher",))["publisher"]
    folder = tmp_path / "repo"
    skill = skill_folder(folder)
    api = httpx.Client(
        base_url=f"{live_server.url}/api/v1/tenants/acme",
        headers={"Authorization": f"Bearer {key}"},
    )

    planned = cli(live_server, key, "push", str(folder), "--tenant", "acme", "--dry-run")
    assert planned.returncode == 0, planned.stderr + planned.stdout
    assert (
        "skills/code-review/: create: would create skill code-review at version 1" in planned.stdout
    )
    assert api.get("/skills").json() == []  # a plan writes nothing

    pushed = cli(live_server, key, "push", str(folder), "--tenant", "acme")
    assert pushed.returncode == 0, pushed.stderr + pushed.stdout
    assert "skills/code-review/: create" in pushed.stdout
    made = api.get("/skills/code-review").json()
    assert made["labels"] == {"latest": 1, "production": 1}
    assert made["latest"]["commit_message"] == "first"
    paths = [f["path"] for f in made["latest"]["files"]]
    assert paths == ["SKILL.md", "logo.bin", "references/CHECKLIST.md"]  # no dotfile
    served = api.get("/skills/code-review/versions/1/files/SKILL.md").text
    assert "1. Tests pass." in served and "{{>" not in served

    again = cli(live_server, key, "push", str(folder), "--tenant", "acme")
    assert "skills/code-review/: unchanged" in again.stdout, again.stdout
    (skill / "references" / "CHECKLIST.md").write_text("- [ ] tests\n- [ ] docs\n")
    changed = cli(live_server, key, "push", str(folder), "--tenant", "acme")
    assert "skills/code-review/: version: wrote version 2" in changed.stdout, changed.stdout

    pulled = tmp_path / "pulled"
    (pulled / "skills" / "code-review").mkdir(parents=True)
    (pulled / "skills" / "code-review" / "stale.md").write_text("gone in the registry\n")
    done = cli(live_server, key, "pull", str(pulled), "--tenant", "acme", "--label", "latest")
    assert done.returncode == 0, done.stderr + done.stdout
    back = pulled / "skills" / "code-review"
    assert (back / "SKILL.md").read_text() == SKILL_MD  # as written: the tag, not its text
    assert (back / "references" / "CHECKLIST.md").read_text() == "- [ ] tests\n- [ ] docs\n"
    assert (back / "logo.bin").read_bytes() == b"\x00\xff\x10"
    assert not (back / "stale.md").exists()

"""The push/pull cells of the kind matrix (issue 66), generated from the table of kinds like
tests/api/test_kind_matrix.py: each kind written as a folder, pushed (with approvals on, through a
change request that is then applied), pulled back, and pushed again: the second push writes
nothing (the audit's newest row is unchanged) and a second pull changes no file."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from registry.artifacts.kinds import ARTIFACT_KINDS
from tests.conftest import OPERATOR_TOKEN, LiveServer, PgServer, module_server
from tests.test_sync import cli

pytestmark = pytest.mark.slow

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def _prompt(folder: Path, n: int) -> None:
    (folder / "greet.yaml").write_text(
        "labels: [production]\narguments:\n  - name: who\n    required: true\n"
        f"messages:\n  - role: user\n    text: 'Hello {{{{who}}}} (v{n})'\n"
        "tests:\n  - name: greets\n    arguments: {who: Ann}\n    expect: {contains: [Ann]}\n"
    )


def _skill(folder: Path, n: int) -> None:
    skill = folder / "skills" / "review"
    skill.mkdir(parents=True, exist_ok=True)
    (skill / "SKILL.md").write_text(f"---\nname: review\ndescription: d\n---\n# Review {n}\n")
    (skill / ".registry.yaml").write_text(
        "labels: [production]\ntests:\n  - name: titled\n    expect: {contains: ['# Review']}\n"
    )


FOLDERS: dict[str, Callable[[Path, int], None]] = {"prompt": _prompt, "skill": _skill}


def test_every_kind_of_the_table_has_its_folder() -> None:
    assert set(FOLDERS) == set(ARTIFACT_KINDS)


@pytest.fixture(scope="module")
async def live_server(pg_server: PgServer, template_db: str) -> AsyncIterator[LiveServer]:
    async with module_server(pg_server, template_db) as server:
        yield server


@pytest.mark.parametrize("approvals", [False, True], ids=["direct", "approvals"])
@pytest.mark.parametrize("kind", sorted(ARTIFACT_KINDS))
def test_push_pull_push_writes_nothing(
    live_server: LiveServer, tmp_path: Path, kind: str, approvals: bool
) -> None:
    slug = f"{kind}-{'gated' if approvals else 'direct'}"
    keys = live_server.tenant(slug, roles=("editor", "publisher", "admin"))
    tenant = f"{live_server.url}/api/v1/tenants/{slug}"
    folder = tmp_path / "repo"
    folder.mkdir()
    FOLDERS[kind](folder, 1)
    first = cli(live_server, keys["admin"], "push", str(folder), "--tenant", slug)
    assert first.returncode == 0, first.stderr + first.stdout
    FOLDERS[kind](folder, 2)
    if approvals:
        gated = httpx.patch(tenant, json={"approvals": {"production": 1}}, headers=OPERATOR)
        assert gated.status_code == 200, gated.text
        pushed = cli(live_server, keys["editor"], "push", str(folder), "--tenant", slug,
                     "--release", "v2")  # fmt: skip
        assert pushed.returncode == 0, pushed.stderr + pushed.stdout
        assert "opened change request 1 (1 move(s))" in pushed.stderr, pushed.stderr
        applied = cli(live_server, keys["admin"], "release", "approve", "1", "--tenant", slug)
        assert applied.returncode == 0, applied.stderr
    else:
        pushed = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", slug)
        assert pushed.returncode == 0, pushed.stderr + pushed.stdout
    plural = ARTIFACT_KINDS[kind].plural
    name = "greet" if kind == "prompt" else "review"
    served = httpx.get(f"{tenant}/{plural}/{name}", headers=OPERATOR).json()
    assert served["labels"]["production"] == 2, served

    pulled = tmp_path / "pulled"
    done = cli(live_server, keys["admin"], "pull", str(pulled), "--tenant", slug,
               "--label", "production")  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    files = {p: p.read_bytes() for p in pulled.rglob("*") if p.is_file()}
    audit = f"{tenant}/audit"
    newest = httpx.get(audit, headers=OPERATOR).json()["items"][0]
    again = cli(live_server, keys["admin"], "push", str(pulled), "--tenant", slug)
    assert again.returncode == 0, again.stderr + again.stdout
    assert httpx.get(audit, headers=OPERATOR).json()["items"][0] == newest, again.stdout
    cli(live_server, keys["admin"], "pull", str(pulled), "--tenant", slug, "--label", "production")
    assert {p: p.read_bytes() for p in pulled.rglob("*") if p.is_file()} == files

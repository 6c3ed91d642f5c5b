"""`registry test` and `registry release` as a team runs them in CI and review, against a live
server: test cases stored in a prompt file fail a CI job, `push --release` writes versions but opens
one change request for the labels that need approvals, and `release approve` applies it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import OPERATOR_TOKEN, LiveServer, registry_command

pytestmark = pytest.mark.slow

OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


def cli(server: LiveServer, key: str, *args: str):  # type: ignore[no-untyped-def]
    return registry_command(*args, env={"REGISTRY_URL": server.url, "REGISTRY_API_KEY": key})


def _file(folder: Path, greeting: str, expected: str) -> None:
    (folder / "greet.yaml").write_text(
        "labels: [production]\n"
        "arguments:\n  - name: who\n    required: true\n"
        f"messages:\n  - role: user\n    text: '{greeting} {{{{who}}}}!'\n"
        "tests:\n  - name: greets-ann\n    arguments: {who: Ann}\n"
        f"    expect: {{contains: ['{expected} Ann'], roles: [user], max_length: 40}}\n"
    )


def test_push_release_opens_a_request_and_test_fails_a_ci_job(
    live_server: LiveServer, tmp_path: Path
) -> None:
    keys = live_server.tenant("acme", roles=("editor", "publisher", "admin"))
    folder = tmp_path / "prompts"
    folder.mkdir()
    _file(folder, "Hello", "Hello")
    first = cli(live_server, keys["admin"], "push", str(folder), "--tenant", "acme")
    assert first.returncode == 0, first.stderr
    gated = httpx.patch(
        f"{live_server.url}/api/v1/tenants/acme", json={"approvals": {"production": 1}},
        headers=OPERATOR,
    )  # fmt: skip
    assert gated.status_code == 200, gated.text

    passing = cli(live_server, keys["editor"], "test", "--tenant", "acme", "--label", "production")
    assert passing.returncode == 0, passing.stderr
    assert "ok    greet v1 greets-ann" in passing.stdout

    _file(folder, "Goodbye", "Hello")  # v2 fails its own case
    plain = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "acme")
    assert plain.returncode == 1 and "moves through a change request" in plain.stderr  # gated
    pushed = cli(live_server, keys["editor"], "push", str(folder), "--tenant", "acme",
                 "--release", "say goodbye")  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr
    assert "opened change request 1 (1 move(s))" in pushed.stderr
    failing = cli(
        live_server, keys["editor"], "test", "greet", "--tenant", "acme", "--version", "2"
    )
    assert failing.returncode == 1
    assert "FAIL  greet v2 greets-ann" in failing.stdout
    assert "does not contain 'Hello Ann'" in failing.stdout
    still = cli(live_server, keys["editor"], "test", "--tenant", "acme", "--label", "production")
    assert still.returncode == 0, still.stdout  # production still serves v1

    listed = cli(live_server, keys["editor"], "release", "list", "--tenant", "acme")
    assert listed.stdout.splitlines()[1].split()[:3] == ["1", "open", "1"]
    shown = cli(live_server, keys["publisher"], "release", "show", "1", "--tenant", "acme")
    assert "prompt greet @production: 1 -> 2" in shown.stdout
    assert "tests: 0 passed, 1 failed" in shown.stdout
    refused = cli(live_server, keys["publisher"], "release", "approve", "1", "--tenant", "acme")
    assert refused.returncode == 1 and "override" in refused.stderr
    approved = cli(live_server, keys["admin"], "release", "approve", "1", "--tenant", "acme",
                   "--override", "the new greeting is wanted")  # fmt: skip
    assert approved.returncode == 0, approved.stderr
    assert "change request 1: applied" in approved.stderr
    now = cli(live_server, keys["editor"], "test", "--tenant", "acme", "--label", "production")
    assert now.returncode == 1  # production serves v2 now, which fails its case

    opened = cli(live_server, keys["editor"], "release", "open", "greet@production=1",
                 "--tenant", "acme", "-m", "back to hello")  # fmt: skip
    assert opened.returncode == 0 and opened.stdout.strip() == "2", opened.stderr
    bad = cli(live_server, keys["editor"], "release", "open", "greet=1", "--tenant", "acme",
              "-m", "x")  # fmt: skip
    assert bad.returncode == 2 and "NAME@LABEL=VERSION" in bad.stderr


def test_push_release_moves_skills_too_and_proposes_nothing_twice(
    live_server: LiveServer, tmp_path: Path
) -> None:
    """A folder of a prompt and a skill, both on production, which needs an approval: the push
    writes both new versions and opens one request of both moves; a second push proposes nothing
    again (so applying the first never makes a second stale); a pull then a push changes nothing."""
    keys = live_server.tenant("acme", roles=("editor", "admin"))
    folder = tmp_path / "repo"
    folder.mkdir()
    _file(folder, "Hello", "Hello")
    skill = folder / "skills" / "review"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: review\ndescription: d\n---\n# One\n")
    (skill / ".registry.yaml").write_text(
        "labels: [production]\ntests:\n  - name: says-one\n    expect: {contains: ['# One']}\n"
    )
    first = cli(live_server, keys["admin"], "push", str(folder), "--tenant", "acme")
    assert first.returncode == 0, first.stderr + first.stdout
    gated = httpx.patch(f"{live_server.url}/api/v1/tenants/acme",
                        json={"approvals": {"production": 1}}, headers=OPERATOR)  # fmt: skip
    assert gated.status_code == 200, gated.text

    _file(folder, "Hi", "Hi")
    (skill / "SKILL.md").write_text("---\nname: review\ndescription: d\n---\n# Two\n")
    pushed = cli(live_server, keys["editor"], "push", str(folder), "--tenant", "acme",
                 "--release", "both")  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr + pushed.stdout
    assert "opened change request 1 (2 move(s))" in pushed.stderr, pushed.stderr
    again = cli(live_server, keys["editor"], "push", str(folder), "--tenant", "acme",
                "--release", "both again")  # fmt: skip
    assert again.returncode == 0, again.stderr + again.stdout
    assert "change request(s) 1 propose some of these moves already" in again.stderr
    assert "no change request" in again.stderr

    shown = cli(live_server, keys["admin"], "release", "show", "1", "--tenant", "acme")
    assert "skill review @production: 1 -> 2" in shown.stdout, shown.stdout
    assert "by editor-" in shown.stdout and "(key " in shown.stdout, shown.stdout  # by name
    listed = cli(live_server, keys["admin"], "release", "list", "--tenant", "acme")
    assert "key:" not in listed.stdout and "editor-" in listed.stdout, listed.stdout
    approved = cli(live_server, keys["admin"], "release", "approve", "1", "--tenant", "acme",
                   "--override", "the skill's case tests the old text")  # fmt: skip
    assert approved.returncode == 0, approved.stderr

    pulled = tmp_path / "pulled"
    done = cli(live_server, keys["admin"], "pull", str(pulled), "--tenant", "acme",
               "--label", "production")  # fmt: skip
    assert done.returncode == 0, done.stderr + done.stdout
    settings = (pulled / "skills" / "review" / ".registry.yaml").read_text()
    assert "production" in settings and "says-one" in settings, settings
    before = {p: p.read_bytes() for p in pulled.rglob("*") if p.is_file()}
    audit = f"{live_server.url}/api/v1/tenants/acme/audit"
    newest = httpx.get(audit, headers=OPERATOR).json()["items"][0]
    back = cli(live_server, keys["admin"], "push", str(pulled), "--tenant", "acme")
    assert back.returncode == 0, back.stderr + back.stdout
    assert httpx.get(audit, headers=OPERATOR).json()["items"][0] == newest, back.stdout
    cli(
        live_server, keys["admin"], "pull", str(pulled), "--tenant", "acme", "--label", "production"
    )
    assert {p: p.read_bytes() for p in pulled.rglob("*") if p.is_file()} == before


def test_push_check_finds_drift_and_writes_nothing(live_server: LiveServer, tmp_path: Path) -> None:
    keys = live_server.tenant("drift", roles=("publisher",))
    folder = tmp_path / "prompts"
    skill = folder / "skills" / "review"
    skill.mkdir(parents=True)
    _file(folder, "Hello", "Hello")
    (skill / "SKILL.md").write_text("---\nname: review\ndescription: d\n---\n# One\n")
    (skill / ".registry.yaml").write_text("labels: [production]\n")
    pushed = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "drift")
    assert pushed.returncode == 0, pushed.stderr
    held = cli(live_server, keys["publisher"], "push", "--check", str(folder), "--tenant", "drift")
    assert held.returncode == 0, held.stderr
    assert "the registry holds all 2 file(s) as they are" in held.stderr and held.stdout == ""
    served = cli(live_server, keys["publisher"], "push", "--check", str(folder), "--tenant", "drift",
                 "--label", "production")  # fmt: skip
    assert served.returncode == 0, served.stderr
    _file(folder, "Goodbye", "Goodbye")  # the folder moves ahead of the registry
    (skill / "SKILL.md").write_text("---\nname: review\ndescription: d\n---\n# Two\n")
    drift = cli(live_server, keys["publisher"], "push", "--check", str(folder), "--tenant", "drift")
    assert drift.returncode == 1, drift.stderr
    assert "greet.yaml: version: would write greet version 2" in drift.stdout
    assert "skills/review/: version: would write review version 2" in drift.stdout
    assert "2 of 2 file(s) differ" in drift.stderr
    shown = httpx.get(f"{live_server.url}/api/v1/tenants/drift/prompts/greet", headers=OPERATOR)
    assert shown.json()["latest_version"] == 1  # nothing written
    pushed = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "drift")
    assert pushed.returncode == 0, pushed.stderr
    unlabelled = cli(live_server, keys["publisher"], "push", "--check", str(folder), "--tenant",
                     "drift", "--label", "staging")  # fmt: skip
    assert unlabelled.returncode == 1, unlabelled.stderr
    assert "greet.yaml: label: staging serves nothing of greet; the folder is version 2" in (
        unlabelled.stdout
    )
    alone = cli(live_server, keys["publisher"], "push", str(folder), "--tenant", "drift",
                "--label", "staging")  # fmt: skip
    assert alone.returncode == 1 and "--label goes with --check" in alone.stderr

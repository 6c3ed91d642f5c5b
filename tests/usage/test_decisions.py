"""The serve ledger where decisions are made and kept: who a move reaches on its review and on its
change request (prompts and skills, approvals on), the archive warning, how fast a label's answers
followed its move, the tenant's retention, and old data dropped a partition at a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from registry.db.models import Tenant
from registry.usage import service
from tests.conftest import SIMPLE, Api, auth
from tests.mcp.test_stateless import Stateless

T = "/api/v1/tenants/acme"
ORIGIN = {"Origin": "http://test"}
SKILL = [{"path": "SKILL.md", "text": "---\nname: review\ndescription: d\n---\nCheck it.\n"}]


async def _acme(api: Api) -> dict[str, str]:
    keys = await api.tenant("acme")
    for path, body in ((f"{T}/prompts", {**SIMPLE, "labels": ["production"]}),
                       (f"{T}/skills", {"name": "review", "files": SKILL, "labels": ["production"]})):  # fmt: skip
        made = await api.client.post(path, json=body, headers=auth(keys["admin"]))
        assert made.status_code == 201, made.text
    mcp = Stateless(api.client, "/mcp/acme", auth(keys["reader"]))
    for _ in range(2):
        await mcp.result("prompts/get", {"name": "greet", "arguments": {"who": "Ann"}})
    await mcp.post("skills/get", {"_meta": {**_meta()}, "uri": "skill://review/SKILL.md"})
    await api.app.state.ledger.flush()
    return keys


def _meta() -> dict[str, object]:
    from tests.mcp.test_stateless import meta

    return meta()


async def test_a_move_says_who_it_reaches_and_archiving_who_loses_it(api: Api) -> None:
    keys = await _acme(api)
    added = await api.client.post(f"{T}/prompts/greet/versions", json={
        "messages": [{"role": "user", "content": {"type": "text", "text": "Hi {{who}}"}}],
        "arguments": SIMPLE["arguments"]}, headers=auth(keys["admin"]))  # fmt: skip
    assert added.status_code == 201, added.text
    csrf = await api.console_sign_in(keys["admin"].removeprefix("Bearer "))
    move = {"csrf": csrf, "label": "production", "version": "2"}
    review = await api.client.post("/ui/acme/prompts/greet/label", data=move, headers=ORIGIN)
    assert review.status_code == 200, review.text[:2000]
    reached = "served 2 answers to 1 caller and 1 client in the last 7 days"
    assert reached in review.text
    gated = await api.client.patch(T, json={"approvals": {"production": 1}},
                                   headers=auth(keys["admin"]))  # fmt: skip
    assert gated.status_code == 200, gated.text
    proposed = await api.client.post("/ui/acme/prompts/greet/label", data=move, headers=ORIGIN)
    assert proposed.status_code == 409 and "Open a change request" in proposed.text
    assert reached in proposed.text
    skill_move = {**move, "version": "1"}
    proposed = await api.client.post(
        "/ui/acme/skills/review/label", data=skill_move, headers=ORIGIN
    )
    assert proposed.status_code == 409 and "skill review served 1 answers" in proposed.text
    second = [{**SKILL[0], "text": SKILL[0]["text"] + "And the docs.\n"}]
    added = await api.client.post(f"{T}/skills/review/versions", json={"files": second},
                                  headers=auth(keys["admin"]))  # fmt: skip
    assert added.status_code == 201, added.text
    moves = [{"prompt": "greet", "label": "production", "version": 2},
             {"skill": "review", "label": "production", "version": 2}]  # fmt: skip
    opened = await api.client.post(f"{T}/change-requests", json={"description": "d", "moves": moves},
                                   headers=auth(keys["editor"]))  # fmt: skip
    assert opened.status_code == 201, opened.text
    page = await api.client.get(f"/ui/acme/change-requests/{opened.json()['id']}")
    assert page.status_code == 200, page.text[:2000]
    assert "<strong>production</strong> of prompt greet served 2 answers to 1 caller" in page.text
    assert "<strong>production</strong> of skill review served 1 answers to 1 caller" in page.text
    assert "reader" in page.text  # the caller, by its key's name
    prompt = await api.client.get("/ui/acme/prompts/greet")
    assert 'id="archive-warning"' in prompt.text and "to 1 caller (" in prompt.text
    skill = await api.client.get("/ui/acme/skills/review?days=30")
    assert "Who gets it" in skill.text and 'aria-current="true">30 days' in skill.text


async def test_adoption_after_a_move_from_the_minutes(
    api: Api, superuser: asyncpg.Connection
) -> None:
    await api.tenant("acme")
    tenant_id = await superuser.fetchval("SELECT id FROM tenants WHERE slug = 'acme'")
    moved = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    per_minute = [(0, 10, 0), (1, 8, 2), (2, 4, 6), (3, 2, 50), (4, 1, 100), (5, 0, 40)]
    for minute, old, new in per_minute:
        for version, answers in ((1, old), (2, new)):
            if answers:
                at = moved + timedelta(minutes=minute)
                await superuser.execute(
                    "INSERT INTO usage_minutes (tenant_id, kind, name, at, version, label, surface,"
                    " caller, client, answers, first_at, last_at) VALUES ($1, 'prompt', 'greet', $2,"
                    " $3, 'production', 'prompts/get', 'anonymous', '', $4, $2, $2)",
                    tenant_id, at, version, answers,
                )  # fmt: skip
    async with api.app.state.db.tenant_tx(tenant_id) as session:
        tenant = await session.get(Tenant, tenant_id)
        assert tenant is not None
        found = await service.adoption(session, tenant, "prompt", "greet", "production", 2, moved)
    assert found.half_after_seconds == 180  # minute 2 (6 of 10) ends 3 minutes after the move
    assert found.most_after_seconds == 300  # minute 4 (100 of 101)
    assert found.share_now == 0.887  # the last hour: 198 of 223 (floored to a thousandth)


async def test_retention_is_the_tenants_and_old_data_goes_a_partition_at_a_time(
    api: Api, superuser: asyncpg.Connection
) -> None:
    keys = await _acme(api)
    other = await api.tenant("other")
    del other
    for bad in (0, 3651):
        refused = await api.client.patch(T, json={"usage_retention_days": bad},
                                         headers=auth(keys["admin"]))  # fmt: skip
        assert refused.status_code == 422 and "usage_retention_days" in refused.text
    tenant_id = await superuser.fetchval("SELECT id FROM tenants WHERE slug = 'acme'")
    old = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)
    await superuser.execute(
        "INSERT INTO usage_days (tenant_id, kind, name, at, version, label, surface, caller,"
        " client, answers, first_at, last_at) VALUES ($1, 'prompt', 'greet', $2, 1, 'production',"
        " 'prompts/get', 'anonymous', '', 7, $2, $2)", tenant_id, old,
    )  # fmt: skip

    async def shown() -> int:
        got = await api.client.get(f"{T}/usage", headers=auth(keys["reader"]))
        assert got.status_code == 200, got.text
        return sum(row["answers"] for row in got.json()["rows"])

    assert await shown() == 2 + 1 + 7
    kept = await api.client.patch(T, json={"usage_retention_days": 1}, headers=auth(keys["admin"]))
    assert kept.status_code == 200 and kept.json()["usage_retention_days"] == 1
    assert await shown() == 3  # past the retention: never read again
    await superuser.execute("SELECT registry_usage_partitions_v1(now(), 2, 35)")
    assert await superuser.fetchval("SELECT count(*) FROM usage_days WHERE at = $1", old) == 0
    # A year on, every partition of today is wholly past what is kept: dropped, not deleted from.
    partitions = "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid " \
                 "WHERE c.relname LIKE 'usage_%' AND c.relname LIKE $1"  # fmt: skip
    today = datetime.now(UTC)
    assert await superuser.fetchval(partitions, f"%{today:%Y%m%d}") == 1
    dropped = await superuser.fetchval(
        "SELECT registry_usage_partitions_v1(now() + interval '400 days', 2, 35)"
    )
    assert dropped >= 6
    assert await superuser.fetchval(partitions, f"%{today:%Y%m%d}") == 0
    assert await superuser.fetchval(partitions, f"%{today:%Y%m}") == 0
    assert await superuser.fetchval("SELECT count(*) FROM usage_minutes") == 0

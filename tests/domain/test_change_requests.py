"""Change requests below the doors, on both kinds at once: a request is written, reviewed and
applied through each kind's KindOps; the rules the doors only pass on (who approves, what is still
current, what the scheduler may apply) are stated here, once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text

from registry.change_requests import reading
from registry.change_requests import service as requests
from registry.change_requests.schemas import ApproveIn, ChangeRequestIn
from registry.db.models import Tenant
from registry.errors import Conflict, Forbidden
from registry.labels import Terms
from registry.principal import Principal
from registry.prompts import writing
from registry.prompts.schemas import VersionIn
from registry.skills import service as skills
from registry.skills.schemas import SkillCreate, SkillVersionIn
from tests.domain.conftest import Domain, prompt

SKILL_MD = "---\nname: review\ndescription: d\n---\n# Review {n}\n"


async def _no_partials(session: Any, tenant: Any, source: str) -> tuple[str, list[Any]]:
    return source, []


async def _both(domain: Domain, **settings: Any) -> tuple[Tenant, Principal]:
    """A prompt and a skill, each at version 1 on production with a version 2 written."""
    acme = await domain.tenant("acme", **settings)
    admin = domain.caller(acme, "admin")
    async with domain.tx(acme) as session:
        first = prompt("greet", "Hello (v1)", labels=["production"])
        await writing.create_prompt(session, acme, admin, first, max_blob_bytes=1 << 20)
        second = VersionIn.model_validate(
            {"messages": [{"role": "user", "content": {"type": "text", "text": "Hello (v2)"}}]}
        )
        await writing.create_version(
            session, acme, admin, "greet", second, if_match=None, max_blob_bytes=1 << 20
        )
        files = [{"path": "SKILL.md", "text": SKILL_MD.format(n=1)}]
        made = SkillCreate.model_validate({"name": "review", "labels": [], "files": files})
        await skills.create_skill(session, acme, admin, made, expand=_no_partials)
        again = SkillVersionIn.model_validate({"files": [{"path": "SKILL.md",
                                                          "text": SKILL_MD.format(n=2)}]})  # fmt: skip
        await skills.create_version(
            session, acme, admin, "review", again, if_match=None, expand=_no_partials
        )
    async with domain.db.app_tx() as session:  # approvals on once both are written
        await session.execute(text("""UPDATE tenants SET approvals = '{"production": 1}'"""))
    acme.approvals = {"production": 1}
    return acme, admin


def _request(**extra: Any) -> ChangeRequestIn:
    moves = [{"prompt": "greet", "label": "production", "version": 2},
             {"skill": "review", "label": "production", "version": 2}]  # fmt: skip
    return ChangeRequestIn.model_validate({"description": "both", "moves": moves, **extra})


async def _served(domain: Domain, acme: Tenant) -> dict[str, int | None]:
    async with domain.tx(acme) as session:
        found = await session.execute(text(
            "SELECT 'prompt' AS kind, l.version FROM labels l JOIN prompts p ON p.id = l.prompt_id"
            " WHERE l.label = 'production' UNION ALL SELECT 'skill', l.version FROM skill_labels l"
            " WHERE l.label = 'production'"
        ))  # fmt: skip
        return {row.kind: row.version for row in found}


async def test_one_request_moves_both_kinds_once_approved_by_someone_else(domain: Domain) -> None:
    acme, admin = await _both(domain)
    publisher = domain.caller(acme, "publisher")
    async with domain.tx(acme) as session:
        opened = await requests.open_request(session, acme, publisher, _request())
    assert [(m.prompt, m.skill) for m in opened.moves] == [("greet", None), (None, "review")]
    async with domain.tx(acme) as session:
        with pytest.raises(Forbidden, match="author"):
            await requests.approve(session, acme, publisher, opened.id, ApproveIn())
    assert await _served(domain, acme) == {"prompt": 1}
    async with domain.tx(acme) as session:
        done = await requests.approve(session, acme, admin, opened.id, ApproveIn())
    assert done.state == "applied"
    assert await _served(domain, acme) == {"prompt": 2, "skill": 2}
    async with domain.tx(acme) as session:
        kinds = (await session.execute(text(
            "SELECT kind FROM change_log WHERE kind LIKE 'change_request.%' ORDER BY seq"
        ))).scalars().all()  # fmt: skip
    assert kinds == ["change_request.opened", "change_request.approved", "change_request.applied"]


@pytest.mark.parametrize("moved", ["prompt", "skill"])
async def test_a_label_moved_meanwhile_makes_it_stale_for_either_kind(
    domain: Domain, moved: str
) -> None:
    acme, admin = await _both(domain)
    publisher = domain.caller(acme, "publisher")
    async with domain.tx(acme) as session:
        opened = await requests.open_request(session, acme, publisher, _request())
    async with domain.tx(acme) as session:  # the admin's break-glass move of one of them
        if moved == "prompt":
            await writing.set_label(session, acme, admin, "greet", "production", 2,
                                    terms=Terms(reason="hotfix"))  # fmt: skip
        else:
            await skills.set_label(session, acme, admin, "review", "production", 1,
                                   Terms(reason="hotfix"))  # fmt: skip
    async with domain.tx(acme) as session:
        shown = await reading.show(session, acme, opened.id)
    assert shown.state == "stale" and moved in (shown.stale_reason or ""), shown.stale_reason
    async with domain.tx(acme) as session:
        with pytest.raises(Conflict, match="stale"):
            await requests.approve(session, acme, admin, opened.id, ApproveIn())


async def test_the_scheduler_applies_only_what_is_still_approved_and_due(domain: Domain) -> None:
    acme, admin = await _both(domain)
    publisher = domain.caller(acme, "publisher")
    later = datetime.now(UTC) + timedelta(hours=1)
    async with domain.tx(acme) as session:
        opened = await requests.open_request(session, acme, publisher, _request(apply_at=later))
        approved = await requests.approve(session, acme, admin, opened.id, ApproveIn())
    assert approved.state == "approved"
    async with domain.tx(acme) as session:  # not due yet
        assert await requests.apply_scheduled(session, acme, opened.id) is None
    async with domain.tx(acme) as session:
        await session.execute(text("UPDATE change_requests SET apply_at = now() - interval '1s'"))
        await requests.withdraw(session, acme, publisher, opened.id)
    async with domain.tx(acme) as session:  # due, but withdrawn: never applied
        assert await requests.apply_scheduled(session, acme, opened.id) is None
    assert await _served(domain, acme) == {"prompt": 1}

    async with domain.tx(acme) as session:
        second = await requests.open_request(session, acme, publisher, _request(apply_at=later))
        await requests.approve(session, acme, admin, second.id, ApproveIn())
        await session.execute(text("UPDATE change_requests SET apply_at = now() - interval '1s'"
                                   " WHERE id = :id"), {"id": second.id})  # fmt: skip
    async with domain.tx(acme) as session:
        done = await requests.apply_scheduled(session, acme, second.id)
    assert done is not None and done.state == "applied"
    async with domain.tx(acme) as session:  # a second worker gets there after: nothing happens
        assert await requests.apply_scheduled(session, acme, second.id) is None
    assert await _served(domain, acme) == {"prompt": 2, "skill": 2}

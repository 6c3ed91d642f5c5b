"""A prompt's life beside its versions: its settings (tags, offered as a tool, test cases), archive
and return, and deletion (only once archived, and never while a version includes it as a partial).

Callers own the transaction (scoped to one tenant); these functions flush only, and record an audit
row, and a change-log row where what the tenant serves changes, in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from registry import testcases
from registry.db.audit import record_audit, record_change
from registry.db.models import Tenant
from registry.errors import Conflict
from registry.labels import delete_refusal
from registry.principal import Principal
from registry.prompts import as_tools, policy
from registry.prompts import label_repository as label_repo
from registry.prompts import partial_repository as partial_repo
from registry.prompts import repository as repo
from registry.prompts.reading import find_prompt, prompt_out
from registry.prompts.schemas import PromptOut
from registry.testcases import TestCase


async def set_archived(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str, archived: bool
) -> PromptOut:
    prompt = await find_prompt(session, tenant, name, lock=True)
    labels = (await label_repo.labels_of(session, [prompt]))[prompt.id]
    refused = policy.archive_refusal(tenant, caller, name, labels)
    if refused is not None:
        raise refused
    if (prompt.archived_at is not None) == archived:
        return await prompt_out(session, prompt)
    before = _when(prompt.archived_at)
    prompt = await repo.update_prompt(
        session, prompt, archived_at=datetime.now(UTC) if archived else None
    )
    action = "prompt.archive" if archived else "prompt.unarchive"
    record_change(session, tenant_id=tenant.id, kind=action, prompt_id=prompt.id)
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action=action,
        target=f"prompt:{name}",
        before={"archived_at": before},
        after={"archived_at": _when(prompt.archived_at)},
    )
    return await prompt_out(session, prompt)


async def patch_prompt(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    name: str,
    *,
    tags: list[str] | None = None,
    as_tool: bool | None = None,
    tests: Sequence[TestCase] | None = None,
) -> PromptOut:
    """A prompt's tags, whether it is offered as a tool (a mark is checked: no other marked
    prompt, and no general tool, may take its tool name), and its test cases."""
    prompt = await find_prompt(session, tenant, name, lock=True)
    before = {"tags": list(prompt.tags), "as_tool": prompt.as_tool, "tests": list(prompt.tests)}
    after = dict(before)
    if tags is not None:
        after["tags"] = list(dict.fromkeys(tags))
    if tests is not None:
        after["tests"] = testcases.stored(tests)
    if as_tool is not None:
        if as_tool and not prompt.as_tool:
            await as_tools.check_mark(session, tenant, prompt)
        after["as_tool"] = as_tool
    if after != before:
        prompt = await repo.update_prompt(session, prompt, **after)
        if after["as_tool"] != before["as_tool"]:  # the tools a label serves changed
            record_change(session, tenant_id=tenant.id, kind="prompt.tool", prompt_id=prompt.id)
        await record_audit(
            session,
            tenant_id=tenant.id,
            actor=caller.actor,
            action="prompt.update",
            target=f"prompt:{name}",
            before=_audited(before),
            after=_audited(after),
        )
    return await prompt_out(session, prompt)


def _audited(fields: dict[str, object]) -> dict[str, object]:
    """What the audit log keeps of a prompt's fields: its test cases by name (they may be long)."""
    tests = fields.get("tests")
    if not isinstance(tests, list):
        return fields
    return fields | {"tests": [case.get("name") for case in tests if isinstance(case, dict)]}


async def delete_prompt(
    session: AsyncSession, tenant: Tenant, caller: Principal, name: str
) -> None:
    """Removes the prompt with all its versions and history; only once archived."""
    prompt = await find_prompt(session, tenant, name, lock=True)
    refused = delete_refusal("prompt", name, prompt.archived_at is not None)
    if refused is not None:
        raise refused
    embedders = await partial_repo.embedders(session, tenant.id, prompt.id, limit=10)
    if embedders:
        raise Conflict(
            f"prompt {name!r} is included (as a partial) by versions of "
            + ", ".join(repr(e) for e in embedders)
            + ", which render it forever: delete those first",
            field="name",
        )
    await repo.delete_prompt(session, prompt)
    record_change(session, tenant_id=tenant.id, kind="prompt.delete")
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action="prompt.delete",
        target=f"prompt:{name}",
        before={"latest_version": prompt.latest_version},
    )


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value else None

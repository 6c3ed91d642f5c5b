"""What changed between two versions of a prompt: metadata, arguments, and a text diff per message."""

from __future__ import annotations

import difflib

from sqlalchemy.ext.asyncio import AsyncSession

from registry.content.kinds import kind_of
from registry.db.models import Tenant
from registry.errors import NotFound
from registry.prompts.reading import find_prompt, versions_out
from registry.prompts.schemas import ArgumentDiff, FieldChange, MessageDiff, MessageOut, VersionDiff


def _text(message: MessageOut | None) -> list[str]:
    return kind_of(message.content).text(message.content).splitlines() if message else []


async def diff_versions(
    session: AsyncSession, tenant: Tenant, name: str, a: int, b: int
) -> VersionDiff:
    prompt = await find_prompt(session, tenant, name)
    found = {v.version: v for v in await versions_out(session, prompt, [a, b])}
    for number in (a, b):
        if number not in found:
            raise NotFound(f"prompt {name!r} has no version {number}", field="version")
    old, new = found[a], found[b]
    metadata = {
        key: FieldChange(before=getattr(old, key), after=getattr(new, key))
        for key in ("title", "description", "icons")
        if getattr(old, key) != getattr(new, key)
    }
    old_args = {x.name: x.model_dump() for x in old.arguments}
    new_args = {x.name: x.model_dump() for x in new.arguments}
    changed = {
        arg: {
            k: FieldChange(before=old_args[arg][k], after=new_args[arg][k])
            for k in old_args[arg]
            if old_args[arg][k] != new_args[arg][k]
        }
        for arg in old_args.keys() & new_args.keys()
        if old_args[arg] != new_args[arg]
    }
    messages: list[MessageDiff] = []
    for i in range(max(len(old.messages), len(new.messages))):
        before = old.messages[i] if i < len(old.messages) else None
        after = new.messages[i] if i < len(new.messages) else None
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "changed"
        lines = difflib.unified_diff(
            _text(before),
            _text(after),
            fromfile=f"v{a}/messages[{i}]",
            tofile=f"v{b}/messages[{i}]",
            lineterm="",
        )
        role = (
            FieldChange(before=before.role, after=after.role)
            if before and after and before.role != after.role
            else None
        )
        messages.append(MessageDiff(position=i, status=status, role=role, diff=list(lines)))
    return VersionDiff(
        prompt=name,
        from_version=a,
        to_version=b,
        metadata=metadata,
        arguments=ArgumentDiff(
            added=sorted(new_args.keys() - old_args.keys()),
            removed=sorted(old_args.keys() - new_args.keys()),
            changed=changed,
        ),
        messages=messages,
    )

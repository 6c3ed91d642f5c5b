"""What changed between two versions of a prompt: metadata, arguments, and a text diff per message.

Line diffs are bounded by ``registry.textdiff`` (lines per message side, and per request: a
message past them is reported as changed, with a note, not diffed line by line) and computed in a
worker thread, so a large diff never holds the event loop.
"""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncSession

from registry import textdiff
from registry.content.kinds import kind_of
from registry.db.models import Tenant
from registry.errors import NotFound
from registry.prompts import contracts
from registry.prompts.reading import find_prompt, versions_out
from registry.prompts.schemas import (
    ArgumentDiff,
    FieldChange,
    MessageDiff,
    MessageOut,
    PartialChange,
    VersionDiff,
)


def _text(message: MessageOut | None) -> list[str]:
    return kind_of(message.content).text(message.content).splitlines() if message else []


def _message_diffs(
    old: list[MessageOut], new: list[MessageOut], a: int, b: int
) -> list[MessageDiff]:
    """Blocking (difflib): run in a worker thread."""
    budget = textdiff.Budget()
    messages: list[MessageDiff] = []
    for i in range(max(len(old), len(new))):
        before = old[i] if i < len(old) else None
        after = new[i] if i < len(new) else None
        if before == after:
            continue
        status = "added" if before is None else "removed" if after is None else "changed"
        role = (
            FieldChange(before=before.role, after=after.role)
            if before and after and before.role != after.role
            else None
        )
        lines, note = textdiff.unified(
            _text(before), _text(after), f"v{a}/messages[{i}]", f"v{b}/messages[{i}]", budget
        )
        if lines is None:
            messages.append(MessageDiff(position=i, status=status, role=role, note=note))
            continue
        messages.append(MessageDiff(position=i, status=status, role=role, diff=lines))
    return messages


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
        for key in ("title", "description", "icons", "config")
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
    messages = await asyncio.to_thread(_message_diffs, old.messages, new.messages, a, b)
    contract = contracts.compare(old.arguments, new.arguments)
    locks_before = {p.ref: p.version for p in old.partials}
    locks_after = {p.ref: p.version for p in new.partials}
    partials = [
        PartialChange(ref=ref, before=locks_before.get(ref), after=locks_after.get(ref))
        for ref in sorted(locks_before.keys() | locks_after.keys())
        if locks_before.get(ref) != locks_after.get(ref)
    ]
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
        contract=contract,
        partials=partials,
        messages=messages,
    )

"""Completion of argument values: what an MCP client offers as the user types."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.errors import InvalidInput
from registry.prompts import repository as repo
from registry.prompts.reading import resolve_version
from registry.prompts.rendering import parse_prompt_ref

COMPLETION_LIMIT = 100


async def complete_argument(
    session: AsyncSession,
    tenant: Tenant,
    ref: str,
    argument: str,
    value: str,
    *,
    label: str,
) -> tuple[list[str], int]:
    """Suggested values for one argument of the served version: enum values and declared suggestions,
    those starting with ``value`` first (case-insensitively), then those containing it; at most 100,
    with the total number of matches."""
    name, version, pinned_label = parse_prompt_ref(ref)
    prompt, number = await resolve_version(
        session, tenant, name, version=version, label=pinned_label or label
    )
    specs, _ = await repo.version_children(session, tenant.id, prompt.id, [number])
    spec = next((a for a in specs if a.name == argument), None)
    if spec is None:
        raise unknown_argument(name, argument, [a.name for a in specs])
    return matching([*(spec.enum or []), *(spec.suggestions or [])], value)


def unknown_argument(prompt: str, argument: str, known: list[str]) -> InvalidInput:
    takes = ", ".join(repr(a) for a in known) or "none"
    return InvalidInput(
        f"prompt {prompt!r} has no argument {argument!r} (it takes: {takes})", field="argument"
    )


def matching(offered: list[str], value: str) -> tuple[list[str], int]:
    """The values ``offered`` for what was typed (``value``): those starting with it first
    (case-insensitively), then those containing it; at most 100, with the number of matches."""
    candidates = list(dict.fromkeys(offered))
    needle = value.casefold()
    prefix = [c for c in candidates if c.casefold().startswith(needle)]
    inner = [c for c in candidates if needle and needle in c.casefold() and c not in prefix]
    matches = prefix + inner
    return matches[:COMPLETION_LIMIT], len(matches)

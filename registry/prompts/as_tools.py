"""Prompts as MCP tools, for clients that show no prompts: a prompt its author marks (``as_tool``)
becomes a tool of its own, whose name comes from the prompt's under the tool-name rules and whose
input schema is its typed arguments; two general tools reach every served prompt. This module holds
the naming rule, the check a mark must pass, and what a label serves as tools."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Prompt, Tenant
from registry.errors import Conflict
from registry.naming import TOOL_NAME_MAX, TOOL_NAME_REPLACED
from registry.prompts import label_repository as label_repo
from registry.prompts import listing
from registry.prompts import repository as repo

FIND = "find_prompts"  # the general tools, offered with any marked ones
RENDER = "render_prompt"
GENERAL = (FIND, RENDER)
_TO_TOOL = str.maketrans(TOOL_NAME_REPLACED, "_" * len(TOOL_NAME_REPLACED))


def tool_name(prompt_name: str) -> str:
    """The tool a marked prompt is: its name with every character a tool name may not hold (``.``,
    ``:``) as ``_``, at most 64 characters (registry.naming.TOOL_NAME_MAX)."""
    return prompt_name[:TOOL_NAME_MAX].translate(_TO_TOOL)


async def check_mark(session: AsyncSession, tenant: Tenant, prompt: Prompt) -> None:
    """A prompt may be marked when no other marked prompt, and no general tool, takes its tool
    name (refused naming the one that does). The check holds the tool name's lock until the
    transaction ends, so of two concurrent marks of one tool name the second is refused."""
    name = tool_name(prompt.name)
    if name in GENERAL:
        raise Conflict(
            f"prompt {prompt.name!r} would be the tool {name!r}, the name of a general tool",
            field="as_tool",
        )
    other = await repo.marked_as_tool(session, tenant.id, name, besides=prompt.name)
    if other is not None:
        raise Conflict(
            f"prompt {prompt.name!r} would be the tool {name!r}, which the marked prompt "
            f"{other!r} already is: unmark it, or rename one",
            field="as_tool",
        )


@dataclass(frozen=True)
class ServedTool:
    """A marked prompt as a label serves it."""

    name: str  # the tool's
    prompt: str
    version: int
    title: str | None
    description: str | None
    input_schema: dict[str, Any]


async def served_tools(
    session: AsyncSession,
    tenant: Tenant,
    label: str,
    *,
    after: str | None = None,
    limit: int,
) -> list[ServedTool]:
    rows = await repo.served_marked(session, tenant.id, label, after=after, limit=limit)
    arguments = await repo.arguments_of(session, tenant.id, [(p.id, v.version) for p, v in rows])
    return [
        ServedTool(
            name=tool_name(p.name),
            prompt=p.name,
            version=v.version,
            title=v.title,
            description=v.description,
            input_schema=listing.argument_schema(arguments[(p.id, v.version)]),
        )
        for p, v in rows
    ]


async def declared_arguments(
    session: AsyncSession, tenant: Tenant, label: str, names: Sequence[str]
) -> dict[str, list[repo.StoredArgument]]:
    """The arguments of the version ``label`` serves of each of ``names`` (a page of a search), in
    three statements whatever the page's length."""
    prompts = await repo.prompts_by_names(session, tenant.id, names)
    labels = await label_repo.labels_of(session, prompts)
    served = {p: labels[p.id][label] for p in prompts if label in labels[p.id]}
    found = await repo.arguments_of(session, tenant.id, [(p.id, v) for p, v in served.items()])
    return {p.name: found[(p.id, v)] for p, v in served.items()}

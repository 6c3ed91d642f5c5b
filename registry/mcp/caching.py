"""What the MCP endpoint keeps in memory, and the cached paths through the prompts service.

Compiled versions and blobs never change, so they are kept until evicted. What a label serves (which
version a name resolves to, the listing pages and their count) is dropped for a tenant as soon as that
tenant's change notification reaches this worker. While the LISTEN connection is down nothing cached
is trusted: every request reads the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.errors import RegistryError
from registry.events.cache import MISSING, Lru, TenantScoped
from registry.prompts import service as prompts
from registry.prompts.schemas import RenderedPrompt
from registry.prompts.service import CompiledVersion, ServedPrompt


@dataclass
class McpCaches:
    versions: Lru[CompiledVersion] = field(default_factory=lambda: Lru("versions", 20_000))
    blobs: Lru[str] = field(default_factory=lambda: Lru("blobs", 64 * 1024 * 1024, weigh=len))
    resolved: TenantScoped[Any] = field(default_factory=lambda: TenantScoped("resolved", 200_000))
    pages: TenantScoped[Any] = field(default_factory=lambda: TenantScoped("pages", 20_000))
    # Whether cached answers may be trusted: the LISTEN connection is up (set by the app).
    live: Callable[[], bool] = lambda: False

    @property
    def enabled(self) -> bool:
        return self.live()

    def tenant_scoped(self) -> list[TenantScoped[Any]]:
        return [self.resolved, self.pages]

    def invalidate(self, tenant_id: uuid.UUID) -> None:
        for cache in self.tenant_scoped():
            cache.invalidate(tenant_id)

    def clear(self) -> None:
        for cache in self.tenant_scoped():
            cache.clear()


class _Refusal:
    """A cached "no such prompt/version": the error to raise again."""

    def __init__(self, error: RegistryError) -> None:
        self.error = error


async def render(
    caches: McpCaches,
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    arguments: dict[str, Any] | None,
    *,
    version: int | None,
    label: str,
    max_value_length: int,
) -> RenderedPrompt:
    if not caches.enabled:
        return await prompts.render(
            session,
            tenant,
            name,
            arguments,
            version=version,
            label=label,
            max_value_length=max_value_length,
        )
    key = ("resolve", label, name, version)
    found = caches.resolved.get(tenant.id, key)
    if found is MISSING:
        generation = caches.resolved.generation(tenant.id)
        try:
            prompt, number = await prompts.resolve_version(
                session, tenant, name, version=version, label=label
            )
            found = caches.resolved.put(tenant.id, key, (prompt.id, number), generation)
        except RegistryError as error:
            caches.resolved.put(tenant.id, key, _Refusal(error), generation)
            raise
    if isinstance(found, _Refusal):
        raise found.error
    prompt_id, number = found
    compiled = caches.versions.get((tenant.id, prompt_id, number))
    if compiled is MISSING:
        compiled = caches.versions.put(
            (tenant.id, prompt_id, number),
            await prompts.compile_version(session, tenant.id, prompt_id, number),
        )
    blobs: dict[bytes, str] = {}
    missing = []
    for sha in compiled.blobs:
        data = caches.blobs.get((tenant.id, sha))
        if data is MISSING:
            missing.append(sha)
        else:
            blobs[sha] = data
    if missing:
        for sha, data in (await prompts.load_blobs(session, tenant.id, missing)).items():
            blobs[sha] = caches.blobs.put((tenant.id, sha), data)
    return prompts.render_compiled(compiled, arguments, blobs, max_value_length=max_value_length)


async def served_page(
    caches: McpCaches,
    session: AsyncSession,
    tenant: Tenant,
    label: str,
    *,
    after: str | None,
    limit: int,
) -> tuple[list[ServedPrompt], bool]:
    if not caches.enabled:
        return await prompts.served_page(session, tenant, label, after=after, limit=limit)
    key = ("page", label, after, limit)
    found = caches.pages.get(tenant.id, key)
    if found is MISSING:
        generation = caches.pages.generation(tenant.id)
        found = caches.pages.put(
            tenant.id,
            key,
            await prompts.served_page(session, tenant, label, after=after, limit=limit),
            generation,
        )
    page: tuple[list[ServedPrompt], bool] = found
    return page


async def served_count(caches: McpCaches, session: AsyncSession, tenant: Tenant, label: str) -> int:
    if not caches.enabled:
        return await prompts.served_count(session, tenant, label)
    key = ("count", label)
    found = caches.pages.get(tenant.id, key)
    if found is MISSING:
        generation = caches.pages.generation(tenant.id)
        found = caches.pages.put(
            tenant.id, key, await prompts.served_count(session, tenant, label), generation
        )
    return int(found)


async def argument_form(
    caches: McpCaches,
    session: AsyncSession,
    tenant: Tenant,
    name: str,
    *,
    version: int | None,
    label: str,
) -> tuple[tuple[Any, ...], str | None]:
    """The declared arguments (with titles) and the description of the version a request resolves to."""
    prompt, number = await prompts.resolve_version(
        session, tenant, name, version=version, label=label
    )
    return await prompts.argument_declarations(session, tenant.id, prompt.id, number)

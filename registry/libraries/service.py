"""Libraries: a library's admin offers what one of its labels serves to a named tenant (or to every
tenant), and withdraws it; the subscriber's admin accepts an offer made to it (following the label,
or pinning versions), changes and ends its subscription. A subscriber may read a library only while
both consents hold (``registry_library_grant_v1``, in the database); each side sees of the other
only the consent addressed to it. Every change is audited in the acting tenant's log.

Callers own the transaction (scoped to the acting tenant); these functions flush only."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.audit import record_audit, record_change
from registry.db.library_models import LibrarySubscription
from registry.db.models import Tenant
from registry.errors import Conflict, InvalidInput, NotFound
from registry.libraries import repository as repo
from registry.libraries.schemas import (
    EVERY,
    AcceptedOut,
    ImpactOut,
    OfferedOut,
    OfferIn,
    ReachOut,
    SubscriberOut,
    SubscriptionIn,
    SubscriptionOut,
    SubscriptionPatch,
)
from registry.principal import Principal
from registry.prompts import reading as prompt_reading


async def _other(session: AsyncSession, tenant: Tenant, slug: str, field: str) -> Tenant:
    other = await repo.tenant_named(session, slug)
    if other is None:
        raise NotFound(f"no tenant {slug!r}", field=field)
    if other.id == tenant.id:
        raise InvalidInput(f"{slug!r} is this tenant: a library is another tenant", field=field)
    return other


# --- the library's side -------------------------------------------------------------------------


async def offer(
    session: AsyncSession, library: Tenant, caller: Principal, body: OfferIn
) -> SubscriberOut:
    """What ``body.label`` serves, offered to ``body.tenant`` (or every tenant); an offer made
    before to the same tenant now names this label."""
    subscriber = (
        None if body.tenant == EVERY else await _other(session, library, body.tenant, "tenant")
    )
    made = await repo.put_offer(
        session, library.id, subscriber.id if subscriber else None, body.label
    )
    # Who reads the library changed: its readers' caches drop in this worker as it commits (the
    # consent's own notification reaches the other workers).
    record_change(session, tenant_id=library.id, kind="library.offer", detail={"to": body.tenant})
    await record_audit(
        session,
        tenant_id=library.id,
        actor=caller.actor,
        action="library.offer",
        target=f"library:{body.tenant}",
        after={"tenant": body.tenant, "label": body.label},
    )
    shown = await subscribers(session, library)
    return next(s for s in shown if s.tenant == body.tenant and s.offered_at == made.created_at)


async def subscribers(session: AsyncSession, library: Tenant) -> list[SubscriberOut]:
    """The library's offers, each with the tenants that accepted it (a subscription made to the
    library whose label is the one the offer that reaches its tenant names)."""
    offers = await repo.offers_of(session, library.id)
    taken = await repo.subscribers_of(session, library.id)
    names = await repo.slugs(
        session, {o.subscriber_id for o in offers if o.subscriber_id} | {s.tenant_id for s in taken}
    )
    named = {o.subscriber_id for o in offers if o.subscriber_id is not None}
    shown = []
    for made in offers:
        reached = [
            s
            for s in taken
            if (
                s.tenant_id == made.subscriber_id
                or (made.subscriber_id is None and s.tenant_id not in named)
            )
            and s.label == made.label
        ]
        shown.append(
            SubscriberOut(
                tenant=EVERY if made.subscriber_id is None else names[made.subscriber_id],
                label=made.label,
                offered_at=made.created_at,
                accepted=[
                    AcceptedOut(
                        tenant=names[s.tenant_id],
                        label=s.label,
                        follow=s.follow,
                        pins=s.pins,
                        accepted_at=s.created_at,
                    )
                    for s in sorted(reached, key=lambda s: names[s.tenant_id])
                ],
            )
        )
    return shown


async def impact(session: AsyncSession, library: Tenant, name: str) -> ImpactOut:
    """Who the library's prompt ``name`` reaches: each tenant reading the library (its offer
    standing), following the label it reads or pinning a version, and the version it is served."""
    prompt = await prompt_reading.get_prompt(session, library, name)
    found = await prompt_reading.find_prompt(session, library, name)
    reach = []
    for made in await subscribers(session, library):
        for taken in made.accepted:
            pinned = None if taken.follow else taken.pins.get(name)
            if taken.follow:
                served = prompt.labels.get(taken.label)
            elif pinned is not None and await repo.published(
                session, library.id, found.id, taken.label, pinned
            ):
                served = pinned
            else:
                served = None
            reach.append(
                ReachOut(
                    tenant=taken.tenant,
                    label=taken.label,
                    follow=taken.follow,
                    pinned=pinned,
                    served=served,
                )
            )
    return ImpactOut(
        prompt=name, labels=prompt.labels, subscribers=sorted(reach, key=lambda r: r.tenant)
    )


async def reach(session: AsyncSession, library: Tenant, name: str, label: str) -> list[ReachOut]:
    """The tenants that read ``library`` on ``label``: whom moving that label of its prompt
    ``name`` reaches (the followers) and who keeps its version (the pinned); none when the tenant
    offers itself to nobody or has no such prompt."""
    if not library.library_offers:
        return []
    try:
        found = await impact(session, library, name)
    except NotFound:
        return []
    return [s for s in found.subscribers if s.label == label]


async def withdraw(session: AsyncSession, library: Tenant, caller: Principal, slug: str) -> None:
    """The offer to ``slug`` (or ``*``) withdrawn: its subscribers read nothing of the library
    from now on (their subscriptions stay, shown as not offered, until they end them)."""
    subscriber = None if slug == EVERY else await _other(session, library, slug, "tenant")
    if not await repo.delete_offer(session, library.id, subscriber.id if subscriber else None):
        raise NotFound(f"this library makes no offer to {slug!r}", field="tenant")
    record_change(session, tenant_id=library.id, kind="library.withdraw", detail={"to": slug})
    await record_audit(
        session,
        tenant_id=library.id,
        actor=caller.actor,
        action="library.withdraw",
        target=f"library:{slug}",
        after={"tenant": slug},
    )


# --- the subscriber's side ----------------------------------------------------------------------


async def subscribe(
    session: AsyncSession, tenant: Tenant, caller: Principal, body: SubscriptionIn
) -> SubscriptionOut:
    """An offer made to this tenant, accepted: the library must offer ``body.label`` to it."""
    library = await _other(session, tenant, body.library, "library")
    await _offered(session, tenant, library, body.label)
    if await repo.subscription(session, tenant.id, library.id) is not None:
        raise Conflict(
            f"this tenant subscribes to {library.slug!r} already: change it (PATCH) or end it "
            "(DELETE) first",
            field="library",
        )
    row = await repo.insert_subscription(
        session,
        tenant_id=tenant.id,
        library_id=library.id,
        label=body.label,
        follow=body.following,
        pins=body.pins or {},
        prefix=body.prefix,
        accepted_by=caller.actor,
    )
    await _audit(session, tenant, caller, "library.subscribe", library, row)
    return await _out(session, library.slug, row)


async def _offered(session: AsyncSession, tenant: Tenant, library: Tenant, label: str) -> None:
    made = await repo.offer_to(session, library.id, tenant.id)
    if made is None:
        raise Conflict(
            f"{library.slug!r} offers nothing to this tenant: its admin offers a label first "
            f"(POST /api/v1/tenants/{library.slug}/subscribers)",
            field="library",
        )
    if made.label != label:
        raise Conflict(
            f"{library.slug!r} offers its label {made.label!r} to this tenant, not {label!r}",
            field="label",
        )


async def offered(session: AsyncSession, tenant: Tenant) -> list[OfferedOut]:
    """The offers made to this tenant (each library's that reaches it: by name, else to all)."""
    offers = await repo.offers_to(session, tenant.id)
    names = await repo.slugs(session, {o.tenant_id for o in offers})
    reaching: dict[uuid.UUID, Any] = {}
    for made in sorted(offers, key=lambda o: o.subscriber_id is None):
        reaching.setdefault(made.tenant_id, made)  # by name first
    return sorted(
        (
            OfferedOut(
                library=names[o.tenant_id],
                label=o.label,
                to_every_tenant=o.subscriber_id is None,
                offered_at=o.created_at,
            )
            for o in reaching.values()
        ),
        key=lambda o: o.library,
    )


async def inherited(session: AsyncSession, tenant: Tenant) -> dict[str, list[str]]:
    """Library -> the names of the prompts it serves this tenant now (as served: prefixed)."""
    found: dict[str, list[str]] = {}
    for row in await repo.reads_of(session, tenant.id):
        library_id, library, prefix = row[0], row[1], row[5] or ""
        rows = await repo.entries(session, tenant.id, library_id, None, 1000)
        found[library] = [prefix + name for name, _, _ in rows]
    return found


async def subscriptions(session: AsyncSession, tenant: Tenant) -> list[SubscriptionOut]:
    rows = await repo.subscriptions_of(session, tenant.id)
    names = await repo.slugs(session, {r.library_id for r in rows})
    shown = [await _out(session, names[r.library_id], r) for r in rows]
    return sorted(shown, key=lambda s: s.library)


async def change(
    session: AsyncSession, tenant: Tenant, caller: Principal, slug: str, body: SubscriptionPatch
) -> SubscriptionOut:
    """A subscription's label, pins (moving a pin), following or prefix changed."""
    library = await _other(session, tenant, slug, "library")
    row = await _subscription(session, tenant, library)
    values: dict[str, Any] = {}
    if body.label is not None and body.label != row.label:
        await _offered(session, tenant, library, body.label)
        values["label"] = body.label
    if body.pins is not None:
        values |= {"pins": body.pins, "follow": not body.pins}
    if body.follow is not None:
        values |= {"follow": body.follow} | ({"pins": {}} if body.follow else {})
    if "prefix" in body.model_fields_set:
        values["prefix"] = body.prefix
    if not values.get("follow", row.follow) and not values.get("pins", row.pins):
        raise InvalidInput("not following: pin at least one version (pins)", field="pins")
    if values:
        row = await repo.update_subscription(session, row, values)
        await _audit(session, tenant, caller, "library.change", library, row)
    return await _out(session, library.slug, row)


async def unsubscribe(session: AsyncSession, tenant: Tenant, caller: Principal, slug: str) -> None:
    library = await _other(session, tenant, slug, "library")
    row = await _subscription(session, tenant, library)
    await repo.delete_subscription(session, row)
    await _audit(session, tenant, caller, "library.unsubscribe", library, row)


async def _subscription(
    session: AsyncSession, tenant: Tenant, library: Tenant
) -> LibrarySubscription:
    row = await repo.subscription(session, tenant.id, library.id, lock=True)
    if row is None:
        raise NotFound(f"this tenant does not subscribe to {library.slug!r}", field="library")
    return row


async def granted(session: AsyncSession, library_id: uuid.UUID) -> str | None:
    """The label of the library this transaction's tenant may read (both consents), or None."""
    return await repo.granted(session, library_id)


async def _out(session: AsyncSession, slug: str, row: LibrarySubscription) -> SubscriptionOut:
    label = await repo.granted(session, row.library_id)
    return SubscriptionOut(
        library=slug,
        label=row.label,
        follow=row.follow,
        pins=row.pins,
        prefix=row.prefix,
        state="active" if label == row.label else "not offered",
        accepted_by=row.accepted_by,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


async def _audit(
    session: AsyncSession,
    tenant: Tenant,
    caller: Principal,
    action: str,
    library: Tenant,
    row: LibrarySubscription,
) -> None:
    # What the subscriber serves changed: its caches drop in every worker, its streams are told.
    record_change(session, tenant_id=tenant.id, kind=action, detail={"library": library.slug})
    await record_audit(
        session,
        tenant_id=tenant.id,
        actor=caller.actor,
        action=action,
        target=f"library:{library.slug}",
        after={"library": library.slug, "label": row.label, "follow": row.follow, "pins": row.pins},
    )

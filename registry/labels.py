"""What every kind of artifact with labels (prompts, skills) agrees on: a label's name, who may
move a protected label, when a move needs a change request (the tenant's ``approvals``), and what
archiving means (an archived artifact's labels stay put; only an archived one is deleted). The
rest of a move's terms are the artifact's own (registry.prompts.policy adds the argument contract)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from registry.db.models import Tenant
from registry.errors import Conflict, Forbidden, InvalidInput
from registry.naming import LABEL_RE, LATEST
from registry.principal import Principal


def check_label_name(label: str) -> None:
    """A label a caller may move (``latest`` moves by itself)."""
    if not LABEL_RE.fullmatch(label):
        raise InvalidInput(
            f"invalid label {label!r}: use lowercase letters, digits, '.', '_' and '-'",
            field="label",
        )
    if label == LATEST:
        raise InvalidInput("the label 'latest' moves by itself to every new version", field="label")


def role_refusal(tenant: Tenant, caller: Principal, label: str) -> Forbidden | None:
    """Why ``caller`` may not move ``label`` at all (a protected label needs the publisher role);
    None when it may."""
    if label in tenant.protected_labels and not caller.has("publisher"):
        return Forbidden(
            f"label {label!r} is protected: moving it needs the publisher role "
            f"(the caller is {caller.role})",
            field="label",
        )
    return None


@dataclass(frozen=True)
class Terms:
    """How a move was asked for: directly (the default), directly by an admin who gives a
    ``reason`` (break-glass, for a label that needs approvals), or by change request ``release``
    being applied (approved already)."""

    reason: str | None = None
    release: int | None = None

    def break_glass(self, tenant: Tenant, label: str) -> bool:
        return self.release is None and bool(self.reason) and approvals_needed(tenant, label) > 0


DIRECT = Terms()


def approvals_needed(tenant: Tenant, label: str) -> int:
    """How many approvals a move of ``label`` needs (0: it moves directly)."""
    return int((tenant.approvals or {}).get(label, 0))


def approval_refusal(
    tenant: Tenant, caller: Principal, label: str, terms: Terms
) -> Conflict | Forbidden | None:
    """Why ``label`` may not move on these terms: it needs approvals, so it moves through a change
    request, or directly by an admin with a reason (break-glass); None when it may."""
    needed = approvals_needed(tenant, label)
    if needed == 0 or terms.release is not None:
        return None
    if terms.reason:
        if caller.has("admin"):
            return None
        return Forbidden(
            f"moving label {label!r} directly with a reason (break-glass) needs the admin role "
            f"(the caller is {caller.role})",
            field="reason",
        )
    route = f"/api/v1/tenants/{tenant.slug}/change-requests"
    return Conflict(
        f"label {label!r} moves through a change request ({needed} approval(s)): POST {route} "
        "(registry release open); an admin may move it directly with a reason (break-glass)",
        field="label",
        change_requests=route,
        approvals=needed,
    )


def archive_refusal(
    tenant: Tenant, caller: Principal, kind: str, name: str, labels: Iterable[str]
) -> Conflict | None:
    """Why ``caller`` may not archive (or bring back) a prompt or skill holding a label that needs
    approvals: that changes what the label serves without a change request, so only an admin may
    (audited like every archive); None when it may."""
    gated = sorted(label for label in labels if approvals_needed(tenant, label) > 0)
    if gated and not caller.has("admin"):
        return Conflict(
            f"{kind} {name!r} holds label {gated[0]!r}, which moves through change requests: "
            f"archiving it or bringing it back changes what that label serves, so it needs the "
            f"admin role (the caller is {caller.role})",
            field="label",
        )
    return None


def archived_refusal(kind: str, name: str, archived: bool, field: str = "label") -> Conflict | None:
    """Why a label of an archived prompt or skill does not move, directly or by a change request
    (an archived artifact serves nothing; moving its labels would serve it again unseen)."""
    if archived:
        return Conflict(
            f"{kind} {name!r} is archived: bring it back before moving its labels", field=field
        )
    return None


def delete_refusal(kind: str, name: str, archived: bool) -> Conflict | None:
    """Why a prompt or skill is not deleted yet: only an archived one is (archiving first shows,
    for as long as the team wants, what stops being served)."""
    if not archived:
        return Conflict(
            f"{kind} {name!r} is not archived: archive it before deleting it", field="name"
        )
    return None

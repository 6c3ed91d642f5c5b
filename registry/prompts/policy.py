"""The one label-move policy: whether a caller may move a prompt's label from one version to
another, and on what terms. Every door (REST, the CLI through it, the console) and every workflow
that moves labels (writes, restores, refreshes, imports, change requests applied) asks this module;
nothing else decides who moves a protected label or when a break may be forced."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from registry.db.models import Tenant
from registry.errors import Conflict, Forbidden, RegistryError
from registry.labels import DIRECT, Terms, approval_refusal
from registry.labels import archive_refusal as gated_archive_refusal
from registry.labels import role_refusal as role_refusal
from registry.principal import Principal
from registry.prompts import contracts
from registry.prompts.schemas import ContractChange


@dataclass(frozen=True)
class Ruling:
    """What the policy says of one move: ``move`` (forced, when ``breaking`` is not empty: force was
    given; ``break_glass``: a label that needs approvals moved directly by an admin with a reason),
    ``unchanged`` (the label is there already) or ``refused`` (``error`` says why)."""

    outcome: Literal["move", "unchanged", "refused"]
    breaking: tuple[ContractChange, ...] = ()
    error: RegistryError | None = None
    break_glass: bool = False

    def enforce(self) -> Ruling:
        """The ruling, or its refusal raised."""
        if self.error is not None:
            raise self.error
        return self


def archive_refusal(
    tenant: Tenant, caller: Principal, name: str, labels: Iterable[str]
) -> Forbidden | Conflict | None:
    """Why ``caller`` may not archive (or bring back) a prompt whose ``labels`` include a protected
    one (that takes it out of, or back into, what the label serves); None when it may."""
    labels = list(labels)
    protected = sorted(set(labels) & set(tenant.protected_labels))
    if protected and not caller.has("publisher"):
        return Forbidden(
            f"prompt {name!r} holds the protected label {protected[0]!r}: archiving or restoring it "
            f"needs the publisher role (the caller is {caller.role})"
        )
    return gated_archive_refusal(tenant, caller, "prompt", name, labels)


def contract_checked(tenant: Tenant, label: str) -> bool:
    """Whether moving ``label`` compares argument contracts, when it serves a version: a protected
    label (a version write reads what such labels serve with its own statement)."""
    return label in tenant.protected_labels


def needs_contract_check(tenant: Tenant, label: str, before: int | None) -> bool:
    """Whether the move must be compared with the argument contract the label serves now: a
    protected label that serves a version."""
    return contract_checked(tenant, label) and before is not None


def rule(
    tenant: Tenant,
    caller: Principal,
    prompt_name: str,
    label: str,
    *,
    before: int | None,
    after: int,
    breaking: Sequence[ContractChange] = (),
    force: bool = False,
    terms: Terms = DIRECT,
) -> Ruling:
    """The ruling on moving ``label`` of ``prompt_name`` from ``before`` to ``after``, given the
    contract changes that move makes (``breaking``: see ``needs_contract_check``) and how it was
    asked for (``terms``: directly, break-glass, or a change request applied). A change request's
    moves were checked when it was approved (an admin's recorded override lets breaks through)."""
    if before == after:
        return Ruling("unchanged")
    refused: RegistryError | None = None
    if terms.release is None:
        refused = role_refusal(tenant, caller, label)
    refused = refused or approval_refusal(tenant, caller, label, terms)
    if refused is not None:
        return Ruling("refused", error=refused)
    broken = tuple(contracts.breaking(breaking))
    if broken and not force and terms.release is None:
        # Door-neutral words: each door says how its callers move it anyway (REST: force=true;
        # the CLI: --force; the console: its check box), told by overridable_by.
        return Ruling(
            "refused",
            broken,
            error=Conflict(
                f"moving {label!r} of {prompt_name!r} from version {before} to {after} breaks the "
                "arguments its callers send: " + "; ".join(c.detail for c in broken),
                field="label",
                breaking=[c.model_dump() for c in broken],
                overridable_by="force",
            ),
        )
    return Ruling("move", broken, break_glass=terms.break_glass(tenant, label))

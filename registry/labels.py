"""What every kind of artifact with labels (prompts, skills) agrees on: a label's name, and who may
move a protected label. The rest of a move's terms are the artifact's own (registry.prompts.policy
adds the argument contract; a change request will add approvals there)."""

from __future__ import annotations

from registry.db.models import Tenant
from registry.errors import Forbidden, InvalidInput
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

"""Who is acting: an operator, or an API key or OAuth token of one tenant with a role."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from registry.naming import ROLE_RANK


@dataclass(frozen=True)
class Principal:
    role: str  # reader | editor | publisher | admin ("admin" for operators)
    tenant_id: uuid.UUID | None = None  # None for operators
    key_id: uuid.UUID | None = None
    operator: bool = False
    anonymous: bool = False  # public-read access without a key
    expires_at: datetime | None = None  # the key's or token's expiry, for those who keep it
    subject: str | None = (
        None  # an OAuth token's subject and issuer ("sub from iss"), for the audit
    )
    narrowed_from: str | None = None  # the role a token's rules gave before its scopes narrowed it
    # The key's last use is due to be recorded (in a transaction of its own, after the request's).
    use_due: bool = field(default=False, compare=False)
    # Work the registry does on its own (a scheduled change request applied), named so in the audit.
    system: str | None = None

    @property
    def actor(self) -> str:
        """How the audit log names this principal."""
        if self.system is not None:
            return self.system
        if self.operator:
            return "operator"
        if self.key_id is not None:
            return f"key:{self.key_id}"
        if self.subject is not None:
            return f"token:{self.subject}"
        return "anonymous"

    def has(self, role: str) -> bool:
        return ROLE_RANK[self.role] >= ROLE_RANK[role]


OPERATOR = Principal(role="admin", operator=True)


def roles_with(role: str) -> list[str]:
    """Every role that has ``role`` (``Principal.has``): what a statement that checks a key's
    role again in the database accepts."""
    return [name for name, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]

"""Who gets which side of a rollout: pure, the same in every worker and instance.

A caller's bucket is the first eight bytes of SHA-256(salt ‖ identity) modulo 10,000; it is on the
new side while its bucket is below the step's share (in hundredths of a percent). The salt is the
rollout's own (random, stored with it), so a caller's place differs from one rollout to the next;
within a rollout a caller's bucket never changes, so a caller that got the new version keeps it as
the share grows, and one step never shows a caller both versions. The identity is the caller as the
audit log names it (``key:ID``, ``token:SUBJECT``), or, for an anonymous caller, the client it says
it is (``anonymous:NAME/VERSION``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

BUCKETS = 10_000


@dataclass(frozen=True)
class Live:
    """What serving needs of a live rollout."""

    id: int
    kind: str
    name: str
    label: str
    from_version: int
    to_version: int
    step: int
    share: int  # percent of callers on the new side at this step
    salt: bytes


@dataclass(frozen=True)
class Routed:
    """Where a rollout sent one answer: the version (None: what the label serves, the old side)."""

    rollout: int
    step: int
    share: int
    new: bool
    version: int | None
    caller: str  # the caller's digest: what bounds its say in the rollout's outcomes
    served: tuple[str, str, int, str] = ("", "", 0, "")  # kind, name, version, label of this side

    def receipt(self) -> dict[str, object]:
        """What the answer's receipt says of it (signed with the rest: POST /feedback trusts it)."""
        return {
            "id": self.rollout,
            "step": self.step + 1,
            "share": self.share,
            "side": "new" if self.new else "old",
            "caller": self.caller,
        }


def bucket(salt: bytes, identity: str) -> int:
    return int.from_bytes(hashlib.sha256(salt + identity.encode()).digest()[:8], "big") % BUCKETS


def on_new_side(live: Live, identity: str) -> bool:
    return bucket(live.salt, identity) < live.share * (BUCKETS // 100)


def route(lives: Sequence[Live], kind: str, name: str, label: str, identity: str) -> Routed | None:
    """The side of ``identity`` in the live rollout of ``label`` of one artifact, if there is one."""
    for live in lives:
        if live.kind == kind and live.name == name and live.label == label:
            new = on_new_side(live, identity)
            caller = hashlib.sha256(identity.encode()).hexdigest()[:16]
            version = live.to_version if new else live.from_version
            return Routed(
                live.id,
                live.step,
                live.share,
                new,
                live.to_version if new else None,
                caller,
                (kind, name, version, label),
            )
    return None


def sides(lives: Sequence[Live], identity: str) -> bytes:
    """The caller's side in each live rollout of the tenant: what a kept answer is also keyed by,
    so that an answer kept for one side is never sent to the other."""
    return bytes(on_new_side(live, identity) for live in lives)


def identity_of(actor: str, anonymous: bool, client: str) -> str:
    return f"anonymous:{client}" if anonymous else actor

"""The typed shapes of libraries: an offer (the library's side), a subscription (the subscriber's),
and what each side is shown of the other."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, model_validator

from registry.inputs import StrictInput
from registry.naming import LABEL_PATTERN, MAX_VERSION, PROMPT_NAME_PATTERN

EVERY = "*"  # an offer to every tenant of the deployment
SLUG = r"^[a-z0-9][a-z0-9-]{0,62}$"
MAX_PINS = 1000

Pins = dict[str, int]


def _checked_pins(pins: Pins | None) -> Pins | None:
    if pins is None:
        return None
    if len(pins) > MAX_PINS:
        raise ValueError(f"pins: at most {MAX_PINS} names")
    for name, version in pins.items():
        if not re.fullmatch(PROMPT_NAME_PATTERN, name):
            raise ValueError(f"pins: {name!r} is not a prompt or skill name")
        if not 1 <= version <= MAX_VERSION:
            raise ValueError(f"pins: version {version} of {name!r} is not a version number")
    return pins


class OfferIn(StrictInput):
    tenant: str = Field(description='the tenant offered to (its name), or "*" for every tenant')
    label: str = Field(pattern=LABEL_PATTERN, description="the library's label it may read")

    @model_validator(mode="after")
    def _named(self) -> OfferIn:
        if self.tenant != EVERY and not re.fullmatch(SLUG, self.tenant):
            raise ValueError('tenant: a tenant\'s name, or "*" for every tenant')
        return self


class SubscriberOut(BaseModel):
    """One offer of the library, and the subscription that accepted it (where there is one)."""

    tenant: str = Field(description='the tenant offered to, or "*" (every tenant)')
    label: str
    offered_at: datetime
    accepted: list[AcceptedOut] = Field(
        default_factory=list,
        description="the tenants that accepted this offer (for *: every tenant that did)",
    )


class AcceptedOut(BaseModel):
    tenant: str
    label: str
    follow: bool
    pins: Pins
    accepted_at: datetime


class SubscriptionIn(StrictInput):
    library: str = Field(pattern=SLUG, description="the library's tenant name")
    label: str = Field(pattern=LABEL_PATTERN, description="the library's label it offered")
    follow: bool | None = Field(
        default=None, description="follow the label: every publish reaches this tenant"
    )
    pins: Pins | None = Field(
        default=None, description="name -> version: these versions until the pin is moved"
    )
    prefix: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9._-]{0,30}$",
        description="put before each library name (its own win on a clash otherwise)",
    )

    @model_validator(mode="after")
    def _follow_or_pin(self) -> SubscriptionIn:
        _checked_pins(self.pins)
        if self.pins and self.follow:
            raise ValueError("follow the label, or pin versions: not both")
        if not self.pins and self.follow is False:
            raise ValueError("not following: pin at least one version (pins)")
        return self

    @property
    def following(self) -> bool:
        return not self.pins


class SubscriptionPatch(StrictInput):
    label: str | None = Field(default=None, pattern=LABEL_PATTERN)
    follow: bool | None = None
    pins: Pins | None = None
    prefix: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9._-]{0,30}$")

    @model_validator(mode="after")
    def _follow_or_pin(self) -> SubscriptionPatch:
        _checked_pins(self.pins)
        if self.pins and self.follow:
            raise ValueError("follow the label, or pin versions: not both")
        return self


class SubscriptionOut(BaseModel):
    library: str
    label: str
    follow: bool
    pins: Pins
    prefix: str | None
    state: Literal["active", "not offered"] = Field(
        description="active: both consents hold; not offered: the library withdrew its offer "
        "(or offers another label), so nothing of it is read"
    )
    accepted_by: str
    created_at: datetime
    updated_at: datetime


class OfferedOut(BaseModel):
    """An offer made to this tenant: the library and the label it may read."""

    library: str
    label: str
    to_every_tenant: bool
    offered_at: datetime


class ReachOut(BaseModel):
    """One tenant that reads the library, and what it is served of one prompt."""

    tenant: str
    label: str = Field(description="the library's label it reads")
    follow: bool
    pinned: int | None = Field(description="the version it pinned of this prompt, if it did")
    served: int | None = Field(
        description="the version it is served now (following: what the label serves; pinned: "
        "the pin, when the label has served it); None: not served to it"
    )


class ImpactOut(BaseModel):
    """Who a change of one of the library's prompts reaches: its labels now, and every tenant that
    reads the library (the offer to it still standing)."""

    prompt: str
    labels: dict[str, int]
    subscribers: list[ReachOut]


SubscriberOut.model_rebuild()

"""Shapes of webhook endpoints and deliveries, as the REST API accepts and returns them."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from registry.inputs import StrictInput

# The change kinds an endpoint may ask for (an empty list: all of them).
EventType = Literal[
    "label.move",
    "label.delete",
    "prompt.archive",
    "prompt.unarchive",
    "prompt.delete",
    "tenant.update",
    "prompt.tool",
    "skill.label.move",
    "skill.label.delete",
    "skill.archive",
    "skill.delete",
    "label.break_glass",
    "skill.label.break_glass",
    "change_request.opened",
    "change_request.approved",
    "change_request.applied",
    "change_request.rejected",
    "change_request.withdrawn",
    "change_request.stale",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)


class EndpointIn(StrictInput):
    url: str = Field(min_length=1, max_length=2048, description="http(s) URL deliveries go to")
    events: list[EventType] = Field(
        default_factory=list, max_length=len(EVENT_TYPES), description="none: every event"
    )
    description: str | None = Field(default=None, max_length=1000)


class EndpointPatch(StrictInput):
    enabled: bool | None = None
    events: list[EventType] | None = Field(default=None, max_length=len(EVENT_TYPES))
    description: str | None = Field(default=None, max_length=1000)


class _FromRow(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class EndpointOut(_FromRow):
    id: uuid.UUID
    url: str
    events: list[str]
    description: str | None
    created_by: str
    created_at: datetime
    failing_since: datetime | None
    disabled_at: datetime | None
    disabled_reason: str | None
    previous_until: datetime | None = Field(description="until when the previous secret signs too")


class EndpointCreated(EndpointOut):
    secret: str = Field(description="shown once: verify deliveries with it (Standard Webhooks)")


class SecretRotated(BaseModel):
    secret: str = Field(description="shown once")
    previous_until: datetime


class AttemptOut(_FromRow):
    attempt: int
    at: datetime
    status_code: int | None
    error: str | None
    latency_ms: int
    response_body: str | None


class DeliveryOut(_FromRow):
    id: int
    message_id: str
    event_type: str
    payload: dict[str, Any]
    status: str
    attempts: int
    next_attempt_at: datetime
    created_at: datetime
    delivered_at: datetime | None
    log: list[AttemptOut] = Field(default_factory=list)


DeliveryStatus = Annotated[str, Field(pattern="^(pending|delivered|failed)$")]

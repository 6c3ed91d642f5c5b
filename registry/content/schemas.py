"""Content blocks as the REST API and prompt files submit them: one input model per kind (the MCP
2025-11-25 shapes), except that image, audio and resource bytes may be given as ``blob``, the sha256 of
a blob uploaded to the tenant. Inline base64 (``data`` of image and audio, ``resource.blob`` of an
embedded resource) is stored as a blob on write; stored content always refers to blobs by sha256.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from registry.inputs import StrictInput, bounded_value
from registry.naming import MIME_PATTERN

SHA256_PATTERN = r"^[0-9a-f]{64}$"


class Annotations(StrictInput):
    audience: list[Literal["user", "assistant"]] | None = None
    priority: float | None = Field(default=None, ge=0, le=1)
    lastModified: datetime | None = None


Meta = Annotated[dict[str, Any] | None, Field(alias="_meta"), AfterValidator(bounded_value)]


class Icon(StrictInput):
    src: str = Field(min_length=1, max_length=8192)
    mimeType: str | None = Field(default=None, pattern=MIME_PATTERN)
    sizes: list[Annotated[str, Field(max_length=32)]] | None = Field(default=None, max_length=16)
    theme: Literal["light", "dark"] | None = None

    @field_validator("src")
    @classmethod
    def _https_or_data(cls, value: str) -> str:
        if not value.startswith(("https://", "http://", "data:")):
            raise ValueError("icon src must be an http(s) URL or a data: URI")
        return value


class TextContent(StrictInput):
    type: Literal["text"]
    text: str = Field(description="a Mustache template")
    annotations: Annotations | None = None
    meta: Meta = None


class _BinaryContent(StrictInput):
    mimeType: str = Field(pattern=MIME_PATTERN)
    data: str | None = Field(default=None, description="inline base64 bytes, stored as a blob")
    blob: str | None = Field(default=None, pattern=SHA256_PATTERN, description="sha256 of a blob")
    annotations: Annotations | None = None
    meta: Meta = None

    @model_validator(mode="after")
    def _one_source(self) -> _BinaryContent:
        if (self.data is None) == (self.blob is None):
            raise ValueError(
                "give exactly one of data (base64) or blob (sha256 of an uploaded blob)"
            )
        return self


class ImageContent(_BinaryContent):
    type: Literal["image"]


class AudioContent(_BinaryContent):
    type: Literal["audio"]


class ResourceContents(StrictInput):
    uri: str = Field(min_length=1, max_length=4096)
    mimeType: str | None = Field(default=None, pattern=MIME_PATTERN)
    text: str | None = Field(default=None, description="a Mustache template")
    blob: str | None = Field(
        default=None, description="sha256 of an uploaded blob (64 hex digits), or inline base64"
    )
    meta: Meta = None

    @model_validator(mode="after")
    def _one_body(self) -> ResourceContents:
        if (self.text is None) == (self.blob is None):
            raise ValueError("an embedded resource needs exactly one of text or blob")
        return self


class EmbeddedResource(StrictInput):
    type: Literal["resource"]
    resource: ResourceContents
    annotations: Annotations | None = None
    meta: Meta = None


class ResourceLink(StrictInput):
    type: Literal["resource_link"]
    uri: str = Field(min_length=1, max_length=4096)
    name: str = Field(min_length=1, max_length=256)
    title: str | None = Field(default=None, max_length=256)
    description: str | None = Field(default=None, max_length=4096)
    mimeType: str | None = Field(default=None, pattern=MIME_PATTERN)
    size: int | None = Field(default=None, ge=0)
    icons: list[Icon] | None = Field(default=None, max_length=8)
    annotations: Annotations | None = None
    meta: Meta = None


Content = Annotated[
    TextContent | ImageContent | AudioContent | EmbeddedResource | ResourceLink,
    Field(discriminator="type"),
]

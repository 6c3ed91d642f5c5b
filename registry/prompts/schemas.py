"""Shapes of prompts, versions, labels, blobs and bundles, as the REST API accepts and returns them.

Message content is a content block of ``registry.content`` (its input models and kinds).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from registry.content.schemas import SHA256_PATTERN, Content, Icon
from registry.inputs import StrictInput
from registry.naming import LABEL_PATTERN, MAX_VERSION, MIME_PATTERN, PROMPT_NAME_PATTERN

ARGUMENT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$"
TAG_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$"

Label = Annotated[str, Field(pattern=LABEL_PATTERN)]
VersionNumber = Annotated[int, Field(ge=1, le=MAX_VERSION)]
Tag = Annotated[str, Field(pattern=TAG_PATTERN)]


class MessageIn(StrictInput):
    """A message: a role and one content block; ``{"role", "text"}`` (or a string as ``content``) is
    short for a text block, as in prompt files."""

    role: Literal["user", "assistant"]
    content: Content

    @model_validator(mode="before")
    @classmethod
    def _text_shorthand(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if "text" in data and "content" not in data:
            rest = {k: v for k, v in data.items() if k != "text"}
            return {**rest, "content": {"type": "text", "text": data["text"]}}
        if isinstance(data.get("content"), str):
            return {**data, "content": {"type": "text", "text": data["content"]}}
        return data


class ArgumentIn(StrictInput):
    name: str = Field(pattern=ARGUMENT_NAME_PATTERN)
    title: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=2000)
    required: bool = False
    default: str | None = Field(default=None, max_length=65536)
    enum: list[Annotated[str, Field(max_length=1000)]] | None = Field(
        default=None, min_length=1, max_length=1000
    )
    pattern: str | None = Field(default=None, min_length=1, max_length=1000)
    max_length: int | None = Field(default=None, ge=1)
    suggestions: list[Annotated[str, Field(max_length=1000)]] | None = Field(
        default=None, max_length=1000, description="completion hints, not enforced"
    )

    @model_validator(mode="after")
    def _consistent(self) -> ArgumentIn:
        if self.required and self.default is not None:
            raise ValueError(f"argument {self.name!r}: a required argument cannot have a default")
        if self.enum is not None and len(set(self.enum)) != len(self.enum):
            raise ValueError(f"argument {self.name!r}: enum values must be unique")
        return self


class VersionIn(StrictInput):
    """A new version of a prompt: everything a version holds."""

    title: str | None = Field(default=None, max_length=200)
    description: str | None = Field(default=None, max_length=10000)
    icons: list[Icon] | None = Field(default=None, max_length=8)
    commit_message: str | None = Field(default=None, max_length=2000)
    labels: list[Label] = Field(
        default_factory=list, max_length=32, description="labels to move here"
    )
    arguments: list[ArgumentIn] = Field(default_factory=list, max_length=100)
    messages: list[MessageIn] = Field(min_length=1, max_length=200)

    @model_validator(mode="after")
    def _unique_arguments(self) -> VersionIn:
        names = [a.name for a in self.arguments]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"argument {duplicates[0]!r} is declared twice")
        return self


class PromptCreate(VersionIn):
    name: str = Field(pattern=PROMPT_NAME_PATTERN)
    tags: list[Tag] = Field(default_factory=list, max_length=64)


class PromptPatch(StrictInput):
    tags: list[Tag] = Field(max_length=64)


class LabelMove(StrictInput):
    version: VersionNumber


class RenderRequest(StrictInput):
    arguments: dict[str, Any] = Field(default_factory=dict)
    version: VersionNumber | None = None
    label: Label | None = None

    @model_validator(mode="after")
    def _one_selector(self) -> RenderRequest:
        if self.version is not None and self.label is not None:
            raise ValueError("give version or label, not both")
        return self


# --- responses ----------------------------------------------------------------------------------
# Read straight from the ORM rows (``model_validate(row)``): field names are the column names.


class _FromRow(BaseModel):
    model_config = ConfigDict(from_attributes=True)


def _hex(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


HexDigest = Annotated[str, BeforeValidator(_hex)]


class ArgumentOut(_FromRow):
    name: str
    title: str | None = None
    description: str | None = None
    required: bool = False
    default: str | None = None
    enum: list[str] | None = None
    pattern: str | None = None
    max_length: int | None = None
    suggestions: list[str] | None = None


class MessageOut(_FromRow):
    role: str
    content: dict[str, Any]


class VersionSummary(_FromRow):
    version: int
    title: str | None
    commit_message: str | None
    author: str
    content_hash: HexDigest
    created_at: datetime


class VersionOut(VersionSummary):
    prompt: str
    description: str | None
    icons: list[dict[str, Any]] | None
    arguments: list[ArgumentOut]
    messages: list[MessageOut]


class PromptFields(_FromRow):
    id: uuid.UUID
    name: str
    tags: list[str]
    latest_version: int
    archived_at: datetime | None
    created_at: datetime
    updated_at: datetime


class PromptOut(PromptFields):
    labels: dict[str, int]
    latest: VersionOut | None = None


class PromptSummary(BaseModel):
    name: str
    title: str | None
    description: str | None
    tags: list[str]
    latest_version: int
    labels: dict[str, int]
    archived_at: datetime | None
    updated_at: datetime


class WriteResult(BaseModel):
    """The answer to a version write: whether a version was created, and the prompt as it now is."""

    created: bool
    version: int
    detail: str
    dry_run: bool = False
    labels_moved: list[str] = Field(
        default_factory=list, description="labels this write moved (besides latest)"
    )
    prompt: PromptOut


class LabelOut(_FromRow):
    prompt: str = Field(validation_alias=AliasChoices("prompt", "prompt_name"))
    label: str
    version: int
    updated_by: str
    updated_at: datetime


class LabelHistoryOut(_FromRow):
    id: int
    label: str
    from_version: int | None
    to_version: int | None
    actor: str
    moved_at: datetime


class BlobOut(BaseModel):
    sha256: str
    size: int
    mime_type: str
    created: bool = False


class RenderedPrompt(BaseModel):
    """What MCP prompts/get returns (2025-11-25 shape): the REST preview returns exactly this."""

    description: str | None = None
    messages: list[dict[str, Any]]


class FieldChange(BaseModel):
    before: Any = None
    after: Any = None


class ArgumentDiff(BaseModel):
    added: list[str]
    removed: list[str]
    changed: dict[str, dict[str, FieldChange]]


class MessageDiff(BaseModel):
    position: int
    status: Literal["added", "removed", "changed"]
    role: FieldChange | None = None
    diff: list[str] = Field(default_factory=list, description="unified diff of the text")
    note: str | None = Field(
        default=None, description="why there is no line diff, if there is none"
    )


class VersionDiff(BaseModel):
    prompt: str
    from_version: int
    to_version: int
    metadata: dict[str, FieldChange]
    arguments: ArgumentDiff
    messages: list[MessageDiff]


# --- bundles (export / import) ------------------------------------------------------------------


class BundleVersion(VersionIn):
    version: VersionNumber
    content_hash: str | None = None


class BundlePrompt(StrictInput):
    name: str = Field(pattern=PROMPT_NAME_PATTERN)
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    archived: bool = False
    versions: list[BundleVersion] = Field(min_length=1)
    labels: dict[Label, VersionNumber] = Field(default_factory=dict)


class BundleBlob(StrictInput):
    mime_type: str = Field(pattern=MIME_PATTERN)
    data: str = Field(description="base64")


class Bundle(StrictInput):
    format: Literal["prompt-registry/v1"] = "prompt-registry/v1"
    tenant: str | None = None
    exported_at: datetime | None = None
    blobs: dict[Annotated[str, Field(pattern=SHA256_PATTERN)], BundleBlob] = Field(
        default_factory=dict
    )
    prompts: list[BundlePrompt] = Field(default_factory=list)


class ImportResult(BaseModel):
    prompts_created: int = 0
    versions_created: int = 0
    labels_moved: int = 0
    blobs_stored: int = 0
    unchanged_versions: int = 0

"""Shapes of prompts, versions, labels, blobs and bundles, as the REST API accepts and returns them.

Message content is a content block of ``registry.content`` (its input models and kinds).
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Protocol

import orjson
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from registry.content.schemas import SHA256_PATTERN, Content, Icon
from registry.inputs import MAX_VALUE_DEPTH, StrictInput, bounded_value, check_json, json_schema
from registry.naming import LABEL_PATTERN, MAX_VERSION, MIME_PATTERN, PROMPT_NAME_PATTERN
from registry.testcases import TestCase, TestCases, TestRun

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


class PartialLock(StrictInput):
    """A partial tag of a version (``ref``, as written in the template) and the child version it
    was resolved to when the version was written."""

    ref: str = Field(max_length=200)
    version: VersionNumber


MAX_CONFIG_BYTES = 65_536  # a version's model config, as compact JSON
MAX_CONFIG_EXTRA_KEYS = 64
_EXTRA_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")

FreeJson = Annotated[Any, AfterValidator(bounded_value)]


class ModelConfig(StrictInput):
    """The model settings a version is written for: part of the version's content (its hash, diff,
    export, prompt files), handed to MCP clients in the ``_meta`` of prompts/get. Keys beyond the
    named ones are kept as given (a provider's own settings), within the size limit."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    model: str | None = Field(default=None, min_length=1, max_length=200)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    stop: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, max_length=16
    )
    tools: list[dict[str, FreeJson]] | None = Field(
        default=None, max_length=128, description="tool definitions, as the model's API takes them"
    )
    response_format: dict[str, FreeJson] | None = Field(
        default=None, description="a JSON Schema the model's answer must follow"
    )

    _response_format_valid = field_validator("response_format")(json_schema)

    @model_validator(mode="after")
    def _bounded(self) -> ModelConfig:
        extra = self.model_extra or {}
        if len(extra) > MAX_CONFIG_EXTRA_KEYS:
            raise ValueError(f"at most {MAX_CONFIG_EXTRA_KEYS} keys besides the named ones")
        for key, value in extra.items():
            if not _EXTRA_KEY.fullmatch(key):
                raise ValueError(f"invalid key {key!r}: letters, digits, '_', '.', '-'")
            check_json(value, MAX_VALUE_DEPTH, numbers=True, path=key)
        size = len(orjson.dumps(self.model_dump(mode="json", exclude_none=True)))
        if size > MAX_CONFIG_BYTES:
            raise ValueError(
                f"the config is {size:,} bytes as JSON; the most is {MAX_CONFIG_BYTES:,}"
            )
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
    config: ModelConfig | None = Field(default=None, description="the model settings")
    partials: list[PartialLock] | None = Field(
        default=None,
        max_length=100,
        description="the child version of each partial tag; by default each tag is resolved now "
        "(its label, or the tenant's default label); a restore or an import gives them",
    )

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
    as_tool: bool = Field(
        default=False, description="offered as an MCP tool of its own where the tenant serves tools"
    )
    tests: TestCases = Field(default_factory=list)


PUSH_PLAN_MAX = 500  # prompts in one plan: each a round of statements in one transaction


class PushPlan(StrictInput):
    """Prompts as prompt files give them, in the order a push writes them."""

    prompts: list[PromptCreate] = Field(default_factory=list, max_length=PUSH_PLAN_MAX)


class PushOutcome(BaseModel):
    """What pushing one prompt of a plan does: create, version (a new version), labels (labels
    move, no new version), unchanged, or error (with why)."""

    name: str
    kind: Literal["prompt", "skill"] = "prompt"
    action: Literal["create", "version", "labels", "unchanged", "error"]
    version: int | None = None
    labels_moved: list[str] = Field(default_factory=list)
    detail: str | None = None
    status: int | None = Field(
        default=None, description="for an error: the HTTP status a push gets"
    )


class PromptPatch(StrictInput):
    tags: list[Tag] | None = Field(default=None, max_length=64)
    as_tool: bool | None = Field(
        default=None, description="offered as an MCP tool of its own where the tenant serves tools"
    )
    tests: TestCases | None = None


class LabelMove(StrictInput):
    version: VersionNumber
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="break-glass: an admin moves a label that needs approvals directly, saying why "
        "(audited, and sent as a label.break_glass event)",
    )


class RefreshRequest(StrictInput):
    labels: list[Label] = Field(default_factory=list, max_length=32, description="labels to move")


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
    config: dict[str, Any] | None = None
    partials: list[PartialLock] = Field(default_factory=list)
    arguments: list[ArgumentOut]
    messages: list[MessageOut]


class PromptFields(_FromRow):
    id: uuid.UUID
    name: str
    tags: list[str]
    as_tool: bool
    tests: list[TestCase] = Field(default_factory=list)
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
    tests: TestRun | None = Field(
        default=None,
        description="the prompt's test cases run on the version (they do not block it)",
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
    config: dict[str, Any] | None = Field(default=None, description="the version's model config")
    meta: dict[str, Any] | None = Field(
        default=None, alias="_meta", description="the receipt of exactly what was served"
    )
    # What a receipt names besides the result (not part of the answer itself).
    version: int | None = Field(default=None, exclude=True)
    partials: tuple[str, ...] = Field(default=(), exclude=True)
    library: str | None = Field(default=None, exclude=True)  # the library that served it


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


class PartialChange(BaseModel):
    ref: str
    before: int | None = Field(description="the locked child version before (None: no such tag)")
    after: int | None


class ImpactEntry(BaseModel):
    """A labelled parent version that embeds a prompt."""

    prompt: str
    version: int
    labels: list[str] = Field(description="the parent's labels that serve this version")
    ref: str = Field(description="the partial tag, as written")
    locked_version: int
    current_version: int | None = Field(description="what the tag resolves to now")
    stale: bool = Field(description="a refresh would lock another child version")


class DeclaredArgument(Protocol):
    """An argument as declared: a stored row, a served argument or an output model (what the
    argument JSON Schema and the contract comparison read)."""

    @property
    def name(self) -> str: ...
    @property
    def title(self) -> str | None: ...
    @property
    def description(self) -> str | None: ...
    @property
    def required(self) -> bool: ...
    @property
    def default(self) -> str | None: ...
    @property
    def enum(self) -> list[str] | None: ...
    @property
    def pattern(self) -> str | None: ...
    @property
    def max_length(self) -> int | None: ...


class ContractChange(BaseModel):
    """One change to what callers may send (registry.prompts.contracts)."""

    argument: str
    change: Literal["removed", "added", "required", "enum", "pattern", "max_length", "default"]
    breaking: bool
    detail: str


class VersionDiff(BaseModel):
    prompt: str
    from_version: int
    to_version: int
    metadata: dict[str, FieldChange]
    arguments: ArgumentDiff
    contract: list[ContractChange] = Field(
        default_factory=list, description="argument contract changes, breaking ones first"
    )
    partials: list[PartialChange] = Field(
        default_factory=list, description="partial locks added, removed or moved"
    )
    messages: list[MessageDiff]


# --- bundles (export / import) ------------------------------------------------------------------


class BundleVersion(VersionIn):
    version: VersionNumber
    content_hash: str | None = None


class BundlePrompt(StrictInput):
    name: str = Field(pattern=PROMPT_NAME_PATTERN)
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    as_tool: bool = False
    tests: TestCases = Field(default_factory=list)
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


# --- what a label serves, for local rendering (registry.client) ----------------------------------


class ServedPage(BaseModel):
    tenant: str
    label: str
    seq: int = Field(description="the tenant's change sequence this page is current with")
    prompts: list[dict[str, Any]] = Field(description="served-version records, by name")
    blobs: dict[str, dict[str, str]] = Field(description="sha256 -> {mime_type, data (base64)}")
    next: str | None = Field(description="pass as ?after= for the next page; None at the end")


class ServedOne(BaseModel):
    prompt: dict[str, Any]
    blobs: dict[str, dict[str, str]]

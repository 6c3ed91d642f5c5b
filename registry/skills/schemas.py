"""The typed shapes that cross the skills domain's boundary: a version's files as a caller gives them,
and skills, versions, labels and diffs as the doors show them."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from registry.errors import InvalidInput
from registry.inputs import StrictInput
from registry.naming import LABEL_PATTERN, MIME_PATTERN
from registry.skills.folder import MAX_FILES, MAX_PATH, File, check_path, mime_type_of
from registry.testcases import TestCase, TestCases, TestRun

Label = Annotated[str, Field(pattern=LABEL_PATTERN)]
# The naming rule less "no two hyphens in a row" (a look-ahead the validator has not): folder.check_name
SKILL_NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$"


class SkillFileIn(StrictInput):
    """One file of the folder: its path and either its text (UTF-8) or its bytes in base64."""

    path: str = Field(min_length=1, max_length=MAX_PATH)
    text: str | None = None
    base64: str | None = None
    mime_type: str | None = Field(default=None, pattern=MIME_PATTERN)

    @model_validator(mode="after")
    def _one_content(self) -> SkillFileIn:
        if (self.text is None) == (self.base64 is None):
            raise ValueError(f"file {self.path!r}: give either text or base64")
        return self

    def as_file(self) -> File:
        if self.text is not None:
            data = self.text.encode("utf-8")
        else:
            assert self.base64 is not None
            try:
                data = base64.b64decode(self.base64, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidInput(
                    f"file {self.path!r}: base64 is not valid", field="files"
                ) from None
        return File(check_path(self.path), data, mime_type_of(self.path, self.mime_type))


class SkillVersionIn(StrictInput):
    """A new version of a skill: its whole folder (``SKILL.md`` and the files it refers to)."""

    files: list[SkillFileIn] = Field(min_length=1, max_length=MAX_FILES)
    commit_message: str | None = Field(default=None, max_length=2000)
    labels: list[Label] = Field(default_factory=list, max_length=32, description="labels to move")


class SkillCreate(SkillVersionIn):
    name: str = Field(pattern=SKILL_NAME_PATTERN, max_length=64)
    tests: TestCases = Field(default_factory=list)


class SkillPatch(StrictInput):
    tests: TestCases = Field(description="test cases of its SKILL.md (they take no arguments)")


class SkillFileOut(BaseModel):
    path: str
    sha256: str
    size: int
    mime_type: str


class PartialLockOut(BaseModel):
    ref: str
    prompt: str
    version: int


class ManifestSignature(BaseModel):
    """The registry's signature over ``{tenant, skill, version, files}`` (each file's path,
    sha256 and size), as a skill entry's provenance carries it over MCP."""

    alg: str = "Ed25519"
    keyId: str  # the name a skill entry gives it
    signature: str


class SkillVersionOut(BaseModel):
    version: int
    description: str
    frontmatter: dict[str, Any]
    files: list[SkillFileOut]
    partials: list[PartialLockOut] = Field(
        default_factory=list, description="the prompt version each partial tag of SKILL.md is"
    )
    manifest_sha256: str
    signature: ManifestSignature | None = Field(
        default=None,
        description="GET …/versions/N: the registry's signature over the version's files, when "
        "it has a signing key (what `registry install` verifies a pinned version by)",
    )
    author: str
    commit_message: str | None = None
    created_at: datetime


class SkillOut(BaseModel):
    name: str
    latest_version: int
    labels: dict[str, int]
    archived: bool
    created_at: datetime
    updated_at: datetime
    latest: SkillVersionOut | None = None
    tests: list[TestCase] = Field(default_factory=list)


class SkillWrite(BaseModel):
    created: bool
    version: int
    labels_moved: list[str]
    detail: str
    tests: TestRun | None = Field(
        default=None, description="the skill's test cases run on the version (they do not block it)"
    )
    skill: SkillOut


class SkillLabelIn(StrictInput):
    version: int = Field(ge=1, le=2**31 - 1)
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="break-glass: an admin moves a label that needs approvals directly, saying why",
    )


class SkillLabelOut(BaseModel):
    label: str
    version: int
    updated_by: str
    updated_at: datetime


class FileChange(BaseModel):
    path: str
    change: Literal["added", "removed", "changed", "unchanged"]
    before_sha256: str | None = None
    after_sha256: str | None = None
    diff: list[str] | None = Field(
        default=None, description="a unified diff of a changed text file, line by line"
    )
    note: str | None = Field(default=None, description="why a changed text file has no diff")


class SkillDiff(BaseModel):
    name: str
    from_version: int
    to_version: int
    files: list[FileChange]


class ArchiveIn(StrictInput):
    archived: bool


# --- bundles -----------------------------------------------------------------------------------


class BundleSkillFile(StrictInput):
    path: str = Field(min_length=1, max_length=MAX_PATH)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="its bytes: the bundle's blobs")
    mime_type: str = Field(pattern=MIME_PATTERN)


class BundleSkillVersion(StrictInput):
    version: int = Field(ge=1)
    commit_message: str | None = Field(default=None, max_length=2000)
    source: str = Field(description="SKILL.md as written (partial tags resolved again on import)")
    files: list[BundleSkillFile] = Field(min_length=1, max_length=MAX_FILES)


class BundleSkill(StrictInput):
    name: str = Field(pattern=SKILL_NAME_PATTERN, max_length=64)
    archived: bool = False
    labels: dict[Label, int] = Field(default_factory=dict)
    versions: list[BundleSkillVersion] = Field(min_length=1)


class SkillImportResult(BaseModel):
    skills_created: int = 0
    skill_versions_created: int = 0
    skill_labels_moved: int = 0

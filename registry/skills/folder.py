"""A skill's folder as the Skills extension defines it, checked before anything is stored: the file
paths (relative, no ``.`` or ``..``, ``SKILL.md`` at the root), the bounds (512 files, 16 MiB), the
front matter of ``SKILL.md`` (``name`` by the naming rule and equal to the skill's name, a
``description``, no key under the reserved ``io.modelcontextprotocol/`` prefix, JSON values only) and
the manifest a version is signed by. Pure: no I/O."""

from __future__ import annotations

import hashlib
import mimetypes
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from registry import inputs
from registry.errors import InvalidInput

SKILL_MD = "SKILL.md"
MAX_FILES = 512  # per skill, SKILL.md included (the extension's bound)
MAX_BYTES = 16 * 1024 * 1024  # all files of one skill (the extension's bound)
MAX_PATH = 1024
MAX_DESCRIPTION = 1024
# The front matter of SKILL.md: what every skills/list entry carries, so bounded far below the file's
# own bound (the format's fields are a name, a description and a few short keys).
MAX_FRONT_MATTER = 16_384  # bytes of YAML, and of the front matter as JSON
MAX_FRONT_MATTER_VALUES = 512  # scalars, lists and mappings
MAX_FRONT_MATTER_DEPTH = 8  # the front matter itself is level 1
NAME_RE = re.compile(r"^(?!.*--)[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
RESERVED_PREFIX = "io.modelcontextprotocol/"
# What a push's .registry.yaml says beside the files, never SKILL.md's front matter.
SETTINGS_KEYS = frozenset({"labels", "tests", "commit_message"})
_FRONT_MATTER = re.compile(r"^---\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)
_SEGMENT = re.compile(r"^[^\x00-\x1f\x7f/\\]{1,255}$")
# Types served as text (when their bytes are UTF-8); anything else goes out as base64.
_TEXT_TYPES = {
    "application/json",
    "application/xml",
    "application/yaml",
    "application/x-yaml",
    "application/javascript",
    "application/x-sh",
    "application/toml",
    "application/sql",
}


@dataclass(frozen=True)
class File:
    """One file of a version: where it is in the folder, its bytes and its type."""

    path: str
    data: bytes
    mime_type: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise InvalidInput(
            f"invalid skill name {name!r}: 1-64 lowercase letters, digits and single hyphens, "
            "starting and ending with a letter or digit",
            field="name",
        )
    return name


def check_path(path: str) -> str:
    """A file's path inside the folder, in NFC: relative, with ``/`` between segments, each segment
    one that every host's file system holds as it is written (``portable_segment``)."""
    path = unicodedata.normalize("NFC", path)
    segments = path.split("/")
    if len(path) > MAX_PATH or not all(_SEGMENT.fullmatch(s) for s in segments):
        raise InvalidInput(
            f"invalid file path {path[:80]!r}: a relative path of segments separated by '/', "
            "without backslashes or control characters",
            field="files",
        )
    for segment in segments:
        why = _not_portable(segment)
        if why:
            raise InvalidInput(f"invalid file path {path[:80]!r}: {why}", field="files")
    return path


# Characters drawn like a slash, a backslash, a dot or a colon that NFKC does not fold into one.
_LOOK_ALIKES = (
    "\u2044\u2215\u2216\u29f5\u29f8\u29f9\u2571\u2572\u27cb\u27cd\u1735\u0589\u05c3\ua789"
)
_WINDOWS_RESERVED = re.compile(
    r"^(con|prn|aux|nul|com[0-9\u00b9\u00b2\u00b3]|lpt[0-9\u00b9\u00b2\u00b3])(\..*)?$", re.I
)
_WINDOWS_FORBIDDEN = set('<>:"|?*')


def _not_portable(segment: str) -> str | None:
    """Why a host's file system would not hold ``segment`` as written, or shows it as another name
    (None: it would)."""
    if segment in (".", ".."):
        return "'.' and '..' are not segments of a path inside the folder"
    if len(segment.encode("utf-8")) > 255:
        return f"the segment {segment[:40]!r}… is longer than 255 bytes"
    for char in segment:
        category = unicodedata.category(char)
        if category in ("Cc", "Cf", "Co", "Cs", "Cn", "Zl", "Zp") or char in _LOOK_ALIKES:
            return (
                f"the character U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')}) is invisible, "
                "changes the text's direction or looks like a path separator"
            )
        if char in _WINDOWS_FORBIDDEN:
            return f"the character {char!r} is not allowed in a file name on Windows"
    folded = unicodedata.normalize("NFKC", segment)
    if (folded != segment and any(c in folded for c in "/\\:")) or folded.strip(".") == "":
        return f"{segment!r} reads as a path separator, a drive or '.'/'..' on some hosts"
    if segment[-1] in ". ":
        return f"{segment!r} ends with a dot or a space, which Windows drops"
    if _WINDOWS_RESERVED.match(segment):
        return f"{segment!r} is a device name reserved on Windows"
    return None


def mime_type_of(path: str, given: str | None) -> str:
    if path == SKILL_MD:
        return "text/markdown"
    if given:
        return given
    if path.endswith(".md"):
        return "text/markdown"
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def is_text(mime_type: str, data: bytes) -> bool:
    """Whether a file goes out as text (else as base64)."""
    if not (mime_type.startswith("text/") or mime_type in _TEXT_TYPES):
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def check_folder(files: Iterable[File]) -> list[File]:
    """The files in path order, once the folder holds up as a whole."""
    ordered = sorted(files, key=lambda f: f.path)
    paths = [f.path for f in ordered]
    if len(ordered) > MAX_FILES:
        raise InvalidInput(f"a skill holds at most {MAX_FILES} files; this one has {len(ordered)}")
    if SKILL_MD not in paths:
        raise InvalidInput(f"a skill needs a {SKILL_MD} at the root of its folder", field="files")
    seen: set[str] = set()
    folded: dict[str, str] = {}
    for path in paths:
        if path in seen:
            raise InvalidInput(f"the file {path!r} is given twice", field="files")
        seen.add(path)
        twin = folded.setdefault(path.casefold(), path)
        if twin != path:
            raise InvalidInput(
                f"the files {twin!r} and {path!r} differ only in case: hosts whose file system "
                "ignores case (Windows, macOS) would hold one of them",
                field="files",
            )
    folders = {"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)}
    clash = sorted(folders & seen)
    if clash:
        raise InvalidInput(f"{clash[0]!r} is both a file and a folder", field="files")
    total = sum(len(f.data) for f in ordered)
    if total > MAX_BYTES:
        raise InvalidInput(
            f"a skill's files hold at most {MAX_BYTES:,} bytes in all; these hold {total:,}"
        )
    return ordered


def front_matter(text: str, name: str) -> dict[str, Any]:
    """The front matter of ``SKILL.md`` (a YAML mapping between ``---`` lines at its top), checked."""
    found = _FRONT_MATTER.match(text.removeprefix("\ufeff"))
    if found is None:
        raise InvalidInput(
            f"{SKILL_MD} must begin with YAML front matter between '---' lines "
            "(with name and description)",
            field=SKILL_MD,
        )
    if len(found.group(1).encode()) > MAX_FRONT_MATTER:
        raise InvalidInput(
            f"{SKILL_MD} front matter: at most {MAX_FRONT_MATTER:,} bytes (it is "
            f"{len(found.group(1).encode()):,}); put longer text in the body or in a file",
            field=SKILL_MD,
        )
    try:
        parsed = inputs.load_yaml(
            found.group(1), max_nodes=MAX_FRONT_MATTER_VALUES, max_depth=MAX_FRONT_MATTER_DEPTH
        )
    except yaml.YAMLError as refused:
        raise InvalidInput(f"{SKILL_MD} front matter: {refused}", field=SKILL_MD) from None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{SKILL_MD} front matter must be a mapping of fields", field=SKILL_MD)
    _check_json(parsed, "front matter")
    misplaced = sorted(SETTINGS_KEYS & parsed.keys())
    if misplaced:
        raise InvalidInput(
            f"{SKILL_MD} front matter: {misplaced[0]!r} is not front matter, and would not move a "
            "label or store a test: a skill's labels, commit_message and tests go in "
            ".registry.yaml beside SKILL.md (registry push), or in the request's own fields",
            field=SKILL_MD,
        )
    if len(orjson.dumps(parsed)) > MAX_FRONT_MATTER:
        raise InvalidInput(
            f"{SKILL_MD} front matter: at most {MAX_FRONT_MATTER:,} bytes as JSON", field=SKILL_MD
        )
    if parsed.get("name") != name:
        raise InvalidInput(
            f"{SKILL_MD} front matter: name must be {name!r}, the skill's name "
            f"(it is {parsed.get('name')!r})",
            field=SKILL_MD,
        )
    description = parsed.get("description")
    if not isinstance(description, str) or not description.strip():
        raise InvalidInput(f"{SKILL_MD} front matter: a description is required", field=SKILL_MD)
    if len(description) > MAX_DESCRIPTION:
        raise InvalidInput(
            f"{SKILL_MD} front matter: the description holds at most {MAX_DESCRIPTION} characters",
            field=SKILL_MD,
        )
    metadata = parsed.get("metadata")
    keys = [*parsed, *(metadata if isinstance(metadata, dict) else {})]
    reserved = sorted(k for k in keys if k.startswith(RESERVED_PREFIX))
    if reserved:
        raise InvalidInput(
            f"{SKILL_MD} front matter: keys under {RESERVED_PREFIX!r} are reserved for MCP "
            f"extensions ({reserved[0]!r})",
            field=SKILL_MD,
        )
    return parsed


def served_front_matter(stored: dict[str, Any], description: str) -> dict[str, Any]:
    """The front matter a list entry carries: the stored one when it holds up to today's bounds,
    else only its name and description (a version written before the bounds stays servable)."""
    try:
        inputs.check_json(stored, MAX_FRONT_MATTER_DEPTH)
        if len(orjson.dumps(stored)) <= MAX_FRONT_MATTER:
            return stored
    except (ValueError, TypeError):
        pass
    name = stored.get("name") if isinstance(stored, dict) else None
    return {"name": str(name)[:64], "description": description[:MAX_DESCRIPTION]}


def _check_json(value: Any, where: str) -> None:
    """Only what JSON holds (a YAML date or binary would read back differently in every client)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"{SKILL_MD} {where}: keys must be strings", field=SKILL_MD)
            _check_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, f"{where}[{index}]")
    elif not (value is None or isinstance(value, str | int | float | bool)):
        raise InvalidInput(
            f"{SKILL_MD} {where}: a {type(value).__name__} is not a JSON value (quote it)",
            field=SKILL_MD,
        )
    elif isinstance(value, int | float) and (why := inputs.number_refused(value)):
        raise InvalidInput(f"{SKILL_MD} {where}: {why}", field=SKILL_MD)


def manifest(files: Iterable[tuple[str, str, int]]) -> list[dict[str, Any]]:
    """Every file as ``{path, digest, size}`` in path order: what a version is signed by."""
    return [
        {"path": path, "digest": f"sha256:{sha}", "size": size} for path, sha, size in sorted(files)
    ]


def manifest_sha256(document: Mapping[str, Any]) -> bytes:
    from registry.signing import canonical

    return hashlib.sha256(canonical(document)).digest()

"""`registry install`: a tenant's skills written into the folder an agent host reads them from,
verified against the registry's signature before they replace what was there, and kept current.

Hosts load skills from a folder on disk (``<skills folder>/NAME/SKILL.md`` and the files beside
it), at user scope (under the home directory) or project scope (under the project): ``HOSTS`` says
where each reads them, and which of its documents says so. What a label serves is read over MCP
as any client reads it (``skills/list`` on ``/mcp/TENANT/LABEL``, then ``resources/read`` of every
file); a pinned version (``NAME@VERSION``) over REST (``GET …/skills/NAME/versions/N``, signed the
same way, and its files). Each skill is written into a hidden folder beside its place, checked
against the signed manifest (the signature with a trusted key, then every file's digest and size,
none missing or extra), and only then renamed into place: a host never reads a half-written skill.

Trust: the keys the signatures must verify with are pinned in the lock file at the first install
(the registry's published key set) or given with ``--public-key``; a skill signed otherwise is not
installed, and the reason is printed. ``skills.lock.json`` beside the skills records what was
installed (name, version, label, the signed document and its digest, the key), so ``--check``
tells what is installed, stale, missing, removed upstream or edited by hand, and a skill a person
edited is never replaced or removed without ``--force``.

``--follow`` stays running on the tenant's change stream: on connecting (the first time and after
every reconnection) and on every change, what is wanted is compared with what is installed and
only what differs is written, so a missed event costs nothing (catching up is a comparison of
state, not a replay)."""

from __future__ import annotations

import base64
import os
import random
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import httpx
import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from registry import signing
from registry.naming import APPLIED_EVENT
from registry.skills import provenance
from registry.skills.folder import MAX_BYTES, MAX_FILES
from registry.skills.schemas import SKILL_NAME_PATTERN
from registry.sync import Client

LOCK_FILE = "skills.lock.json"
LOCK_FORMAT = 1
REVISION = "2026-07-28"
CLIENT = {"name": "registry-install", "version": "1"}
MAX_PAGES = 1_000  # skills/list pages of one install (100 skills each)
NAME_RE = re.compile(SKILL_NAME_PATTERN)


class InstallError(Exception):
    """What stops an install as a whole (the registry unreachable, untrusted, a lock not ours)."""


@dataclass(frozen=True)
class Host:
    user: str  # the skills folder under the home directory
    project: str  # the skills folder under the project directory
    documented: str  # where the host documents it (checked November 2026)


HOSTS: dict[str, Host] = {
    "claude-code": Host(".claude/skills", ".claude/skills", "code.claude.com/docs/en/skills"),
    "codex": Host(".agents/skills", ".agents/skills", "developers.openai.com/codex/skills"),
    "vscode": Host(
        ".copilot/skills", ".github/skills", "code.visualstudio.com/docs/copilot/customization"
    ),
    "cursor": Host(".cursor/skills", ".cursor/skills", "cursor.com/docs/context/skills"),
    "goose": Host(
        ".config/goose/skills", ".goose/skills", "block.github.io/goose/docs/guides/using-skills"
    ),
}


def skills_folder(host: str, scope: str, root: Path | None) -> Path:
    """Where ``host`` reads skills at ``scope``: under ``root`` when given (for tests and CI),
    else under the home directory (user) or the current directory (project)."""
    found = HOSTS[host]
    base = root if root is not None else (Path.home() if scope == "user" else Path.cwd())
    return base / (found.user if scope == "user" else found.project)


# --- what the registry serves ------------------------------------------------------------------


@dataclass
class Wanted:
    """One skill as the registry serves it now: its signed entry, and how to read its files."""

    name: str
    version: int
    label: str | None  # None: pinned
    entry: dict[str, Any]
    read: Callable[[str], bytes]  # a file's bytes by its path in the skill

    @property
    def document(self) -> dict[str, Any]:
        return provenance.entry_document(self.entry)[0]


class Registry:
    """The registry at ``url`` as one tenant's key sees it."""

    def __init__(
        self, url: str, key: str, tenant: str, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.tenant = tenant
        self.http = Client(url, key, tenant, transport=transport).http  # push's client, as is

    def close(self) -> None:
        self.http.close()

    def key_set(self) -> bytes:
        """The registry's published key set (JSON), for a first install's trust."""
        answer = self.http.get("/.well-known/prompt-registry/signing-keys")
        if answer.status_code == 404:
            raise InstallError(
                "the registry has no signing key (REGISTRY_SNAPSHOT_KEY_FILE): install writes only "
                "skills it can verify"
            )
        _ok(answer, "the registry's signing keys")
        return answer.content

    def _mcp(self, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        headers = {"MCP-Protocol-Version": REVISION, "Mcp-Method": method}
        if "uri" in params:
            headers["Mcp-Name"] = params["uri"]
        meta = {
            "io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientInfo": CLIENT,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        answer = self.http.post(
            path,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta, **params}},
            headers=headers,
        )
        _ok(answer, f"{method} on {path}")
        body = answer.json()
        if "error" in body:
            raise InstallError(f"{method} on {path}: {body['error'].get('message')}")
        return dict(body["result"])

    def served(self, label: str | None) -> list[Wanted]:
        """Every skill ``label`` serves (the tenant's default label when None), read over MCP."""
        path = f"/mcp/{self.tenant}" + (f"/{label}" if label else "")
        found: list[Wanted] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = self._mcp(path, "skills/list", {"cursor": cursor} if cursor else {})
            for entry in page.get("skills", []):
                name = str(entry["frontmatter"]["name"])
                meta = entry.get("_meta", {}).get(provenance.META_KEY, {})
                found.append(
                    Wanted(
                        name,
                        int(meta.get("version", 0)),
                        str(meta.get("label") or label or ""),
                        entry,
                        self._mcp_reader(path, name),
                    )
                )
            cursor = page.get("nextCursor")
            if not cursor:
                return found
        raise InstallError(f"skills/list on {path} did not end in {MAX_PAGES} pages")

    def _mcp_reader(self, path: str, name: str) -> Callable[[str], bytes]:
        def read(file: str) -> bytes:
            uri = f"{provenance.SCHEME}{name}/{file}"
            (contents,) = self._mcp(path, "resources/read", {"uri": uri})["contents"]
            if "text" in contents:
                return str(contents["text"]).encode("utf-8")
            return base64.b64decode(contents["blob"])

        return read

    def pinned(self, name: str, version: int) -> Wanted:
        """Version ``version`` of skill ``name``, read over REST, as an entry MCP would give."""
        base = f"/api/v1/tenants/{self.tenant}/skills/{name}/versions/{version}"
        answer = self.http.get(base)
        _ok(answer, f"{name}@{version}")
        found = answer.json()
        meta: dict[str, Any] = {"tenant": self.tenant, "version": version, "label": None}
        meta.update(found.get("signature") or {})
        entry = {
            "uri": f"{provenance.SCHEME}{name}/SKILL.md",
            "frontmatter": {**found["frontmatter"], "name": name},
            "resources": [
                {
                    "uri": f"{provenance.SCHEME}{name}/{f['path']}",
                    "digest": f"sha256:{f['sha256']}",
                    "size": f["size"],
                }
                for f in found["files"]
            ],
            "_meta": {provenance.META_KEY: meta},
        }

        def read(file: str) -> bytes:
            got = self.http.get(f"{base}/files/{file}")
            _ok(got, f"{name}@{version}/{file}")
            return got.content

        return Wanted(name, version, None, entry, read)

    def changes(self, idle_seconds: float) -> Iterator[str]:
        """The kinds of the tenant's changes as they commit (``gap``: some were missed), from now,
        until the stream ends; raises httpx errors when cut off."""
        timeout = httpx.Timeout(30, read=idle_seconds)
        with self.http.stream(
            "GET",
            f"/api/v1/tenants/{self.tenant}/changes",
            headers={"Accept": "text/event-stream"},
            timeout=timeout,
        ) as answer:
            if answer.status_code != 200:
                answer.read()
                _ok(answer, "the change stream")
            yield "connected"
            fields: dict[str, str] = {}
            for line in answer.iter_lines():
                if line == "":
                    if fields.get("event") == "gap":
                        yield "gap"
                    elif fields.get("event") == "change":
                        yield str(orjson.loads(fields.get("data", "{}")).get("kind", ""))
                    elif fields.get("event") in ("closed", "denied"):
                        return
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value[: 1 << 20]


def _ok(answer: httpx.Response, what: str) -> None:
    if answer.status_code >= 400:
        try:
            detail = answer.json().get("detail") or answer.json().get("title")
        except ValueError:
            detail = answer.text[:200]
        raise InstallError(f"{what}: {answer.status_code} {detail}")


# --- the lock file -----------------------------------------------------------------------------


@dataclass
class Lock:
    """``skills.lock.json``: what was installed into one skills folder, and whose keys it trusts."""

    path: Path
    host: str
    registry: str
    tenant: str
    label: str | None = None  # what is followed (None with no pins: the tenant's default label)
    pins: dict[str, int] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # key id: PEM
    skills: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Lock | None:
        if not path.is_file():
            return None
        try:
            data = orjson.loads(path.read_bytes())
            if data.get("format") != LOCK_FORMAT:
                raise InstallError(f"{path}: format {data.get('format')!r}, not {LOCK_FORMAT}")
            return cls(
                path,
                str(data["host"]),
                str(data["registry"]),
                str(data["tenant"]),
                data.get("label"),
                {str(k): int(v) for k, v in data.get("pins", {}).items()},
                {str(k): str(v) for k, v in data.get("keys", {}).items()},
                dict(data.get("skills", {})),
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as error:
            raise InstallError(f"{path} is not a lock file this command wrote: {error}") from None

    def trusted(self) -> dict[str, Ed25519PublicKey]:
        keys: dict[str, Ed25519PublicKey] = {}
        for pem in self.keys.values():
            key = signing.public_key(pem.encode())
            keys[signing.key_id(key)] = key
        return keys

    def write(self) -> None:
        data = {
            "format": LOCK_FORMAT,
            "host": self.host,
            "registry": self.registry,
            "tenant": self.tenant,
            "label": self.label,
            "pins": self.pins,
            "keys": self.keys,
            "skills": self.skills,
        }
        partial = self.path.with_name(f".{self.path.name}.writing")
        partial.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
        os.replace(partial, self.path)


def pems(keys: dict[str, Ed25519PublicKey]) -> dict[str, str]:
    return {kid: signing.public_pem(key).decode() for kid, key in keys.items()}


# --- installing --------------------------------------------------------------------------------


@dataclass
class Options:
    host: str
    folder: Path  # the skills folder
    label: str | None
    pins: dict[str, int]
    force: bool = False
    keep_removed: bool = False
    public_keys: bytes | None = None  # --public-key: PEM or key set, replacing the pinned keys


@dataclass
class Line:
    name: str
    action: str  # installed | unchanged | kept | removed | refused | stale | edited | missing | ok
    detail: str

    def text(self) -> str:
        return f"{self.name}: {self.action}: {self.detail}"


def open_lock(registry: Registry, url: str, options: Options) -> Lock:
    """The folder's lock (a new one for a first install), its trust settled: keys given, keys
    pinned before, or the registry's published keys pinned now."""
    path = options.folder / LOCK_FILE
    lock = Lock.read(path)
    if lock is None:
        lock = Lock(path, options.host, url, registry.tenant, options.label, dict(options.pins))
    elif lock.tenant != registry.tenant and not options.force:
        raise InstallError(
            f"{options.folder} holds tenant {lock.tenant!r}'s skills (its {LOCK_FILE}); install "
            "another tenant elsewhere (--scope, --root), or pass --force to replace them"
        )
    elif options.label is not None or options.pins:
        lock.label, lock.pins = options.label, dict(options.pins)
    lock.host, lock.registry, lock.tenant = options.host, url, registry.tenant
    if options.public_keys is not None:
        lock.keys = pems(signing.public_keys(options.public_keys))
    elif not lock.keys:
        lock.keys = pems(signing.public_keys(registry.key_set()))
    return lock


def wanted(registry: Registry, lock: Lock) -> dict[str, Wanted]:
    """What the lock asks for, as the registry serves it now: every skill of the label followed
    (when one is, or no pins are given), each pin overriding its name."""
    found: dict[str, Wanted] = {}
    if lock.label is not None or not lock.pins:
        found = {w.name: w for w in registry.served(lock.label)}
    for name, version in sorted(lock.pins.items()):
        found[name] = registry.pinned(name, version)
    return found


def install(registry: Registry, lock: Lock, options: Options) -> list[Line]:
    """Bring the folder to what the lock asks for; the lock written after. One line per skill."""
    options.folder.mkdir(parents=True, exist_ok=True)
    keys = lock.trusted()
    lines: list[Line] = []
    serving = wanted(registry, lock)
    for _, skill in sorted(serving.items()):
        lines.append(_install_one(lock, skill, keys, options))
    for name in sorted(set(lock.skills) - serving.keys()):
        lines.append(_remove(lock, name, options))
    lock.write()
    return lines


def _install_one(lock: Lock, skill: Wanted, keys: signing.Keys, options: Options) -> Line:
    name = skill.name
    if not NAME_RE.fullmatch(name):
        return Line(name[:64], "refused", "not a skill name (the entry came from elsewhere)")
    target = options.folder / name
    held = lock.skills.get(name)
    try:
        signed, meta = provenance.entry_document(skill.entry)
        digest = provenance.manifest_digest(signed)
    except signing.SignatureRefused as refused:
        return Line(name, "refused", str(refused))
    served_as = f"version {skill.version}" + (f" ({skill.label})" if skill.label else " (pinned)")
    if held is not None and target.is_dir():
        edited = provenance.differences(target, held["document"])
        if edited and not options.force:
            return Line(name, "kept", f"edited by hand ({edited[0]}); --force replaces it")
        if not edited and held.get("digest") == digest:
            held["label"] = skill.label
            return Line(name, "unchanged", served_as)
    elif target.exists() and not options.force:
        return Line(name, "kept", "a folder this command did not install; --force replaces it")
    # A library's skill is signed as the library's (its entry names the library it comes from).
    owner = str(meta.get("library") or lock.tenant)
    problem = _write(skill, signed, keys, owner, options.folder)
    if problem is not None:
        return Line(name, "refused", problem)
    lock.skills[name] = {
        "version": skill.version,
        "label": skill.label,
        "digest": digest,
        "keyId": meta.get("keyId"),
        "signature": meta.get("signature"),
        "document": signed,
        "installed_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return Line(name, "installed", f"{served_as}, {digest[:19]}…, key {meta.get('keyId')}")


def _write(
    skill: Wanted, signed: dict[str, Any], keys: signing.Keys, tenant: str, folder: Path
) -> str | None:
    """The skill written beside its place, verified, then renamed into it; what was wrong when
    it was not (nothing of it is left then, and the installed one stays)."""
    files = signed["files"]
    if len(files) > MAX_FILES or sum(int(f["size"]) for f in files) > MAX_BYTES:
        return f"more than a skill holds ({MAX_FILES} files, 16 MiB)"
    staging = folder / f".{skill.name}.installing"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for file in files:
            path = _inside(staging, str(file["path"]))
            if path is None:
                return f"a file outside the skill: {str(file['path'])[:200]!r}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(skill.read(str(file["path"])))
        try:
            problems = provenance.verify_folder(staging, skill.entry, keys, tenant=tenant)
        except signing.SignatureRefused as refused:
            return f"not verified, not installed: {refused}"
        if problems:
            return f"not verified, not installed: {'; '.join(problems[:3])}"
        _swap(staging, folder / skill.name)
        return None
    except InstallError as failed:
        return str(failed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _inside(root: Path, path: str) -> Path | None:
    parts = PurePosixPath(path).parts
    if (
        not parts
        or path.startswith("/")
        or "\\" in path
        or any(p in ("", ".", "..") for p in parts)
    ):
        return None
    return root.joinpath(*parts)


def _swap(staging: Path, target: Path) -> None:
    """``staging`` in ``target``'s place, the old one out of the way first (renames only)."""
    old = target.with_name(f".{target.name}.replaced")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    staging.rename(target)
    shutil.rmtree(old, ignore_errors=True)


def _remove(lock: Lock, name: str, options: Options) -> Line:
    """A skill installed before that is no longer wanted (archived, deleted, no longer on the
    label, or no longer asked for): removed, or kept and marked."""
    held = lock.skills[name]
    target = options.folder / name
    if options.keep_removed:
        held["removed_upstream"] = True
        return Line(name, "kept", "no longer served; kept and marked in the lock file")
    if target.is_dir() and provenance.differences(target, held["document"]) and not options.force:
        held["removed_upstream"] = True
        return Line(name, "kept", "no longer served, but edited by hand; --force removes it")
    shutil.rmtree(target, ignore_errors=True)
    del lock.skills[name]
    return Line(name, "removed", "no longer served")


def check(registry: Registry, lock: Lock, folder: Path) -> list[Line]:
    """What ``--check`` says, writing nothing: each installed skill as installed, stale or edited,
    each wanted one missing, each installed one no longer served."""
    serving = wanted(registry, lock)
    lines = []
    for name in sorted(set(lock.skills) | serving.keys()):
        held, now = lock.skills.get(name), serving.get(name)
        target = folder / name
        if held is None:
            assert now is not None
            lines.append(Line(name, "missing", f"served (version {now.version}), not installed"))
            continue
        edited = provenance.differences(target, held["document"]) if target.is_dir() else ["gone"]
        if edited:
            lines.append(Line(name, "edited", f"edited by hand: {'; '.join(edited[:3])}"))
        elif now is None:
            lines.append(Line(name, "removed", "installed, no longer served"))
        elif provenance.manifest_digest(now.document) != held["digest"]:
            lines.append(
                Line(name, "stale", f"version {held['version']} installed, {now.version} served")
            )
        else:
            lines.append(Line(name, "ok", f"version {held['version']} as installed"))
    return lines


def follow(
    registry: Registry,
    lock: Lock,
    options: Options,
    tell: Callable[[Line], None],
    *,
    idle_seconds: float = 90,
    backoff: tuple[float, float] = (0.25, 5.0),
) -> None:
    """Keep the folder current from the change stream until interrupted: installed on every
    connection and every change of a skill, reconnecting with growing, jittered delays."""
    delay = backoff[0]
    while True:
        try:
            for kind in registry.changes(idle_seconds):
                if kind in ("connected", "gap") or _touches_skills(kind):
                    for line in install(registry, lock, options):
                        if line.action != "unchanged":
                            tell(line)
                    delay = backoff[0]
        except (httpx.HTTPError, InstallError) as cut:
            tell(Line("(stream)", "reconnecting", str(cut)[:200]))
        time.sleep(delay * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not a secret
        delay = min(delay * 2, backoff[1])


def _touches_skills(kind: str) -> bool:
    """Whether a change may change what is installed: a skill's, a release (it may move a
    skill's label), or one of the whole tenant."""
    return kind.startswith(("skill.", "tenant.")) or kind == APPLIED_EVENT

"""`registry push` / `registry pull`: a folder of prompt files, kept in step through the REST API.

One file per prompt: ``NAME.yaml`` (or ``.yml``), or ``NAME.md`` with YAML front matter whose body is
the text of one user message. Fields are those of the API's prompt body (title, description, tags,
labels, arguments, messages, config), plus two conveniences: a message may be written ``{role, text}``, and an
image, audio or resource may name a local ``file`` instead of inline bytes. Blob bytes pulled from the
registry live in ``DIR/blobs/<sha256>`` and are uploaded again by push when a file refers to them.

Longer than 500 lines because it holds the prompt file format both ways (read for push, written for
pull): split, the two halves of one format would drift apart.
"""

from __future__ import annotations

import base64
import copy
import mimetypes
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from registry.content.kinds import KINDS
from registry.inputs import load_yaml
from registry.naming import PROMPT_NAME_RE
from registry.prompts.schemas import PUSH_PLAN_MAX
from registry.templates import mustache

SHA256_RE = re.compile(r"[0-9a-f]{64}")

PROMPT_SUFFIXES = (".yaml", ".yml", ".md")
BLOB_DIR = "blobs"


class FileError(Exception):
    """A prompt file that cannot be pushed; the message says why."""


@dataclass
class Outcome:
    path: str
    action: str  # create | version | labels | unchanged | error | wrote | label (push --check)
    detail: str
    # What a plan found (a dry run): the prompt or skill and the version that holds the file.
    kind: str = "prompt"
    name: str = ""
    version: int | None = None

    def line(self) -> str:
        return f"{self.path}: {self.action}: {self.detail}"


class Client:
    """The registry's REST API for one tenant."""

    def __init__(
        self, url: str, key: str, tenant: str, *, transport: httpx.BaseTransport | None = None
    ):
        self.tenant = tenant
        self.http = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
            transport=transport,
        )

    def close(self) -> None:
        self.http.close()

    def check(self) -> None:
        """The tenant answers with this key: else one FileError for the whole run (a wrong key or
        address would fail every file alike), naming what to fix."""
        base = str(self.http.base_url)
        hint = ""
        if any(part in base for part in ("/mcp", "/api/", "/ui")):
            hint = (
                "; REGISTRY_URL (--url) is the server's base address, such as "
                "http://127.0.0.1:8000, not an /mcp, /api or /ui address"
            )
        response = self.http.get(self._path(""))  # unreachable: the CLI's one line says where
        if response.status_code >= 400:
            raise FileError(f"tenant {self.tenant!r} at {base}: {_problem(response)}{hint}")

    def _path(self, tail: str) -> str:
        return f"/api/v1/tenants/{self.tenant}{tail}"

    def request(self, method: str, tail: str, **kwargs: Any) -> httpx.Response:
        response = self.http.request(method, self._path(tail), **kwargs)
        if response.status_code >= 400:
            raise FileError(_problem(response))
        return response

    def get_or_none(self, tail: str) -> Any:
        response = self.http.get(self._path(tail))
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise FileError(_problem(response))
        return response.json()


def _problem(response: httpx.Response) -> str:
    try:
        body = response.json()
        if body.get("overridable_by") == "force" and body.get("reason"):  # said the CLI's way
            return (
                f"{response.status_code} {body['reason']}. Pass --force to do it anyway (the "
                "audit log records it)"
            )
        return f"{response.status_code} {body.get('detail') or body.get('title')}"
    except ValueError:
        return f"{response.status_code} {response.text[:200]}"


# --- reading prompt files --------------------------------------------------------------------


def prompt_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in PROMPT_SUFFIXES)


# A delimiter is a line of exactly three dashes (trailing blanks allowed): a body line such as
# "--- notes" or "----" is text. (python-frontmatter was weighed: it strips the body's leading
# blanks and reads a front matter without its closing line as body text instead of refusing it.)
_DELIMITER = re.compile(r"^---[ \t]*\r?$", re.MULTILINE)


def delimiter_line(text: str) -> re.Match[str] | None:
    """The front matter's opening line at the top of ``text``, if it is one."""
    return _DELIMITER.match(text)


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    opening = _DELIMITER.match(text)
    if opening is None:
        return {}, text
    closing = _DELIMITER.search(text, opening.end() + 1)
    if closing is None:
        raise FileError("front matter starts with '---' but has no closing '---' line")
    head = text[opening.end() + 1 : closing.start()]
    body = text[closing.end() + 1 :]
    return yaml_mapping(head, first_line=2), body  # the front matter starts below its '---'


def yaml_mapping(text: str, *, first_line: int = 1) -> dict[str, Any]:
    try:
        data = load_yaml(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + first_line}, column {mark.column + 1}" if mark else ""
        raise FileError(f"invalid YAML{where}: {getattr(error, 'problem', error)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FileError("the file must hold a mapping of fields (name, messages, ...)")
    return data


def bytes_holder(content: dict[str, Any]) -> dict[str, Any] | None:
    kind = KINDS.get(str(content.get("type")))
    return kind.bytes_holder(content) if kind is not None else None


def _inline_file(content: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``file: path`` on an image, audio or resource becomes inline base64 (stored as a blob)."""
    content = copy.deepcopy(content)
    holder = bytes_holder(content)
    if holder is None or "file" not in holder:
        return content
    path = (folder / str(holder.pop("file"))).resolve()
    if not path.is_file():
        raise FileError(f"file {path} does not exist")
    holder.setdefault("mimeType", mimetypes.guess_type(path.name)[0] or "application/octet-stream")
    holder[KINDS[content["type"]].inline_field] = base64.b64encode(path.read_bytes()).decode()
    if holder is not content:  # an embedded resource names where its bytes came from
        holder.setdefault("uri", path.as_uri())
    return content


def read_prompt_file(path: Path) -> dict[str, Any]:
    """The API body for a prompt file (a PromptCreate), or FileError naming the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise FileError(f"cannot read: {error}") from None
    return prompt_from_text(text, path)


def prompt_from_text(text: str, path: Path) -> dict[str, Any]:
    """The API body of ``text`` as the prompt file ``path`` (its name, its format, the folder its
    ``file:`` references are read from)."""
    if path.suffix == ".md":
        data, body = _front_matter(text)
        if body.strip():
            if "messages" in data:
                raise FileError("give the messages in the front matter or the body, not both")
            data["messages"] = [{"role": "user", "text": body.strip("\n")}]
    else:
        data = yaml_mapping(text)
    data.setdefault("name", path.stem)
    if not isinstance(data["name"], str) or not PROMPT_NAME_RE.fullmatch(data["name"]):
        raise FileError(f"invalid prompt name {data['name']!r}")
    if data["name"] != path.stem:  # one of the two is a mistake, and a push would hide which
        raise FileError(
            f"the file says name: {data['name']}, but its file is {path.name}: a prompt's file is "
            f"named after it ({data['name']}{path.suffix}); rename one of them"
        )
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise FileError("no messages: add a `messages` list (or a Markdown body)")
    normalised = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise FileError(f"messages[{i}] must be a mapping with role and text or content")
        message = dict(message)
        if "text" in message:
            message["content"] = {"type": "text", "text": message.pop("text")}
        elif isinstance(message.get("content"), str):
            message["content"] = {"type": "text", "text": message["content"]}
        elif isinstance(message.get("content"), dict):
            message["content"] = _inline_file(message["content"], path.parent)
        normalised.append(message)
    data["messages"] = normalised
    return data


def referenced_blobs(body: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(sha256, media type) of every blob a prompt body refers to by hash."""
    for message in body.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        holder = bytes_holder(content) if isinstance(content, dict) else None
        sha = holder.get("blob") if holder is not None else None
        if isinstance(sha, str) and SHA256_RE.fullmatch(sha):
            yield sha, str(holder.get("mimeType") or "application/octet-stream")  # type: ignore[union-attr]


# --- push --------------------------------------------------------------------------------------


@dataclass
class Release:
    """``registry push --release``: the labels that need approvals (the tenant's ``approvals``)
    are not moved by the push; their moves are gathered here, for one change request."""

    gated: frozenset[str]
    moves: list[dict[str, Any]] = field(default_factory=list)

    def hold(self, body: dict[str, Any]) -> list[str]:
        """The gated labels a file asks for, taken out of its body."""
        labels = list(body.get("labels") or [])
        held = [label for label in labels if label in self.gated]
        if held:
            body["labels"] = [label for label in labels if label not in self.gated]
        return held

    already: list[int] = field(default_factory=list)  # requests that propose moves left out

    def add(
        self, kind: str, name: str, held: list[str], version: int, current: dict[str, int]
    ) -> None:
        """The moves of ``held`` labels of prompt or skill ``name`` (``kind``) to ``version``,
        those not there already."""
        self.moves += [
            {kind: name, "label": label, "version": version}
            for label in held
            if current.get(label) != version
        ]

    def open(self, client: Client, description: str) -> dict[str, Any] | None:
        """The change request of the gathered moves that no open (or approved) request proposes
        already (None: nothing left to move; ``already``: the requests that hold the others): a
        second push of one folder proposes nothing twice, so applying the first request never
        turns a second one stale."""
        waiting = _waiting_moves(client)
        fresh = []
        for move in self.moves:
            kind = "prompt" if "prompt" in move else "skill"
            held_by = waiting.get((kind, move[kind], move["label"], move["version"]))
            if held_by is None:
                fresh.append(move)
            elif held_by not in self.already:
                self.already.append(held_by)
        self.moves = fresh
        if not fresh:
            return None
        body = {"description": description, "moves": fresh}
        return dict(client.request("POST", "/change-requests", json=body).json())


def _waiting_moves(client: Client) -> dict[tuple[str, str, str, int], int]:
    """Every move an open or approved change request proposes: (kind, name, label, version) to
    the request's id."""
    found: dict[tuple[str, str, str, int], int] = {}
    params: dict[str, Any] = {"state": ["open", "approved"], "limit": 100}
    while True:  # newest first, a page at a time (ids below the last one seen)
        page = client.request("GET", "/change-requests", params=params).json()
        for summary in page:
            shown = client.request("GET", f"/change-requests/{summary['id']}").json()
            for move in shown["moves"]:
                kind = "prompt" if move.get("prompt") else "skill"
                found[(kind, move[kind], move["label"], move["version"])] = summary["id"]
        if len(page) < params["limit"]:
            return found
        params["before"] = page[-1]["id"]


def push_file(
    client: Client, path: Path, *, force: bool = False, release: Release | None = None
) -> Outcome:
    """One prompt file written: its blobs uploaded, then created or given a new version (a dry
    run of a folder is planned whole by the registry instead: see ``_plan``). With ``release``,
    the labels that need approvals are not moved: their moves are added to it instead."""
    try:
        body = read_prompt_file(path)
        name = body["name"]
        held = release.hold(body) if release is not None else []
        for sha, mime in referenced_blobs(body):
            local = path.parent / BLOB_DIR / sha
            if local.is_file():
                client.request(
                    "POST", "/blobs", content=local.read_bytes(), headers={"Content-Type": mime}
                )
        params = {}
        if force:  # protected labels move even onto a version that breaks their callers
            params["force"] = "true"
        existing = client.get_or_none(f"/prompts/{name}")
        if existing is None:
            result = client.request("POST", "/prompts", json=body, params=params).json()
            if release is not None:
                release.add("prompt", name, held, result["version"], {})
            return Outcome(
                path.name, "create", f"created prompt {name} at version {result['version']}"
            )
        tags, as_tool = body.pop("tags", None), body.pop("as_tool", None)
        tests = body.pop("tests", None)
        body.pop("name")
        result = client.request(
            "POST", f"/prompts/{name}/versions", json=body, params=params
        ).json()
        if release is not None:
            release.add("prompt", name, held, result["version"], existing.get("labels") or {})
        patch: dict[str, Any] = {}
        if tags is not None and sorted(tags) != sorted(existing["tags"]):
            patch["tags"] = tags
        if as_tool is not None and as_tool != existing.get("as_tool", False):
            patch["as_tool"] = as_tool
        if tests is not None and tests != existing.get("tests", []):
            patch["tests"] = tests
        if patch:
            client.request("PATCH", f"/prompts/{name}", json=patch)
        moved = result.get("labels_moved") or []
        if not result["created"] and moved:
            labels = ", ".join(moved)
            return Outcome(
                path.name, "labels", f"moved {labels} of {name} to version {result['version']}"
            )
        if not result["created"]:
            return Outcome(path.name, "unchanged", f"{name} is at version {result['version']}")
        also = f"; moved {', '.join(moved)} to it" if moved else ""
        return Outcome(path.name, "version", f"wrote {name} version {result['version']}{also}")
    except FileError as error:
        return Outcome(path.name, "error", str(error))


def _partial_names(path: Path) -> set[str]:
    """The prompts a file's templates include as partials (none when it cannot be read: pushing it
    reports why)."""
    try:
        body = read_prompt_file(path)
    except FileError:
        return set()
    names: set[str] = set()
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, dict) or content.get("type") not in KINDS:
            continue
        source = KINDS[content["type"]].template(content)
        if source is None or not isinstance(source[1], str):
            continue
        try:
            names.update(p.name for p in mustache.parse(source[1]).partials())
        except mustache.TemplateError:
            continue
    return names


def children_first(files: list[Path]) -> list[Path]:
    """The files ordered so that a prompt another file includes as a partial is pushed before it
    (its new version is then what the including prompt locks); otherwise by name."""
    by_stem = {path.stem: path for path in files}
    ordered: list[Path] = []
    state: dict[Path, str] = {}

    def visit(path: Path) -> None:
        if state.get(path) is not None:  # done, or on the current path (a cycle: pushing says so)
            return
        state[path] = "visiting"
        for name in sorted(_partial_names(path)):
            if name in by_stem and by_stem[name] != path:
                visit(by_stem[name])
        state[path] = "done"
        ordered.append(path)

    for path in files:
        visit(path)
    return ordered


def push(
    client: Client,
    folder: Path,
    *,
    dry_run: bool,
    force: bool = False,
    progress: Callable[[Path], None] | None = None,
    skills: Sequence[tuple[str, dict[str, Any]]] = (),
    release: Release | None = None,
) -> list[Outcome]:
    """Every prompt file of ``folder``; two files for one prompt (``greet.md`` and ``greet.yaml``)
    are an error naming both, and neither is pushed: one would silently undo the other. A dry run
    also plans ``skills`` (where each is shown, its body with its name), after the prompts."""
    files = children_first(prompt_files(folder))
    by_name: dict[str, list[Path]] = {}
    for path in files:
        by_name.setdefault(path.stem, []).append(path)
    if dry_run:
        return _plan(client, files, by_name, force=force, progress=progress, skills=skills)
    outcomes = []
    for path in files:
        twins = by_name[path.stem]
        if len(twins) > 1:
            outcomes.append(_twins(path, twins))
        else:
            outcomes.append(push_file(client, path, force=force, release=release))
        if progress:
            progress(path)
    return outcomes


def _twins(path: Path, twins: list[Path]) -> Outcome:
    names = " and ".join(p.name for p in twins)
    return Outcome(path.name, "error", f"{names} both hold prompt {path.stem}: keep one")


def _plan(
    client: Client,
    files: list[Path],
    by_name: dict[str, list[Path]],
    *,
    force: bool,
    progress: Callable[[Path], None] | None,
    skills: Sequence[tuple[str, dict[str, Any]]] = (),
) -> list[Outcome]:
    """A dry run: the registry plans the whole folder in one transaction that it rolls back, in
    the order a push writes it, so each file sees what the folder's earlier files would write
    (a new child, a child's new version; the skills, last, see every prompt) and the plan says
    exactly what the push will do."""
    outcomes: dict[Path, Outcome] = {}
    planned: list[tuple[Path, dict[str, Any]]] = []
    for path in files:
        if len(by_name[path.stem]) > 1:
            outcomes[path] = _twins(path, by_name[path.stem])
            continue
        try:
            planned.append((path, _with_local_blobs(read_prompt_file(path), path.parent)))
        except FileError as error:
            outcomes[path] = Outcome(path.name, "error", str(error))
    params = {"force": "true"} if force else {}
    skill_outcomes: list[Outcome] = []
    starts = range(0, max(len(planned), 1), PUSH_PLAN_MAX)  # the server's bound on one plan
    for start in starts:
        chunk = planned[start : start + PUSH_PLAN_MAX]
        last = start == starts[-1]  # the skills go with the last chunk of prompts
        extra = [body for _, body in skills] if last else []
        try:
            answers = client.request(
                "POST",
                "/push-plan",
                params=params,
                json={"prompts": [body for _, body in chunk], "skills": extra},
            ).json()
        except FileError as error:
            answers = [{"action": "error", "detail": str(error)} for _ in [*chunk, *extra]]
        for (path, body), answer in zip(chunk, answers, strict=False):
            outcomes[path] = _planned(path.name, body["name"], answer)
        if last:
            skill_outcomes = [
                _planned(shown, body["name"], answer, noun="skill")
                for (shown, body), answer in zip(skills, answers[len(chunk) :], strict=True)
            ]
    for path in files:
        if progress:
            progress(path)
    return [outcomes[path] for path in files] + skill_outcomes


def _planned(shown: str, name: str, answer: dict[str, Any], noun: str = "prompt") -> Outcome:
    action, version = answer["action"], answer.get("version")
    if action == "create":
        return Outcome(shown, "create", f"would create {noun} {name} at version {version}")
    if action == "version":
        moved = answer.get("labels_moved") or []
        also = f"; would move {', '.join(moved)} to it" if moved else ""
        return Outcome(shown, "version", f"would write {name} version {version}{also}")
    if action == "labels":
        labels = ", ".join(answer.get("labels_moved") or [])
        return Outcome(shown, "labels", f"would move {labels} of {name} to version {version}")
    if action == "unchanged":
        return Outcome(shown, "unchanged", f"{name} is at version {version}", noun, name, version)
    status = f"{answer['status']} " if answer.get("status") else ""
    return Outcome(shown, "error", f"{status}{answer.get('detail')}")


def _with_local_blobs(body: dict[str, Any], folder: Path) -> dict[str, Any]:
    """For a plan: a blob referenced by hash whose bytes are in the folder (blobs/SHA, where pull
    puts them) travels inline, as the push uploads it first; the plan stores nothing."""
    for message in body.get("messages", []):
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, dict):
            continue
        holder = bytes_holder(content)
        sha = holder.get("blob") if holder is not None else None
        local = folder / BLOB_DIR / str(sha)
        if holder is not None and isinstance(sha, str) and local.is_file():
            del holder["blob"]
            data = base64.b64encode(local.read_bytes()).decode()
            holder[KINDS[content["type"]].inline_field] = data
    return body


# --- pull --------------------------------------------------------------------------------------


def list_names(client: Client) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        page = client.request("GET", "/prompts", params=params).json()
        names += [p["name"] for p in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            return names


# --- refresh -----------------------------------------------------------------------------------


def refresh_prompt(
    client: Client, name: str, labels: list[str], *, dry_run: bool, force: bool
) -> Outcome:
    """A new version of ``name`` with its partials resolved anew, through the API."""
    params = {"dry_run": "true"} if dry_run else {}
    if force:
        params["force"] = "true"
    try:
        result = client.request(
            "POST", f"/prompts/{name}/refresh", json={"labels": labels}, params=params
        ).json()
    except FileError as error:
        return Outcome(name, "error", str(error))
    moved = result.get("labels_moved") or []
    moves = ", ".join(f"{label} -> version {result['version']}" for label in moved)
    if not result["created"]:
        if moved:  # no new version, yet the labels asked for move to the latest
            verb = "would move" if dry_run else "moved"
            return Outcome(
                name, "labels", f"{verb} {moves} (its partials are current: no new version)"
            )
        return Outcome(
            name, "unchanged", f"{name}: its partials are current (version {result['version']})"
        )
    verb = "would write" if dry_run else "wrote"
    told = f"; {'would move' if dry_run else 'moved'} {moves}" if moved else ""
    return Outcome(
        name,
        "version",
        f"{verb} {name} version {result['version']} with refreshed partials{told}",
    )

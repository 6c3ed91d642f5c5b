"""`registry push` / `registry pull` for skills: ``DIR/skills/NAME/`` holds one skill's folder (its
``SKILL.md`` and the files it refers to), beside the prompt files of ``DIR``.

A skill folder is pushed whole: every file under it but dotfiles, which never belong to a skill.
``.registry.yaml`` in the folder may say what the push does besides the files (``labels`` to move to
the version, a ``commit_message``, the skill's ``tests``). Pull writes the version a label serves
(or the latest), with ``SKILL.md`` as it was written (its partial tags kept, so a push of it
resolves them anew), and removes files the version no longer has. A dry run asks the registry what
a push would do, in a transaction it rolls back: the same checks, nothing written.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from registry.inputs import load_yaml
from registry.naming import LATEST
from registry.sync import Client, FileError, Outcome, Release

SKILLS_DIR = "skills"
SETTINGS_FILE = ".registry.yaml"
MAX_FILES = 512
MAX_BYTES = 16 * 1024 * 1024


def skill_folders(folder: Path) -> list[Path]:
    """The skill folders of ``DIR`` (``DIR/skills/NAME/``), by name."""
    root = folder / SKILLS_DIR
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def read_skill(path: Path) -> dict[str, Any]:
    """The body of a skill version from its folder (files as text when UTF-8, else base64)."""
    files: list[dict[str, str]] = []
    total = 0
    for file in sorted(path.rglob("*")):
        relative = file.relative_to(path)
        if not file.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        data = file.read_bytes()
        total += len(data)
        if len(files) >= MAX_FILES or total > MAX_BYTES:
            raise FileError(
                f"a skill holds at most {MAX_FILES} files and 16 MiB; {path} holds more"
            )
        try:
            files.append({"path": relative.as_posix(), "text": data.decode("utf-8")})
        except UnicodeDecodeError:
            files.append({"path": relative.as_posix(), "base64": base64.b64encode(data).decode()})
    body: dict[str, Any] = {"files": files}
    settings = path / SETTINGS_FILE
    if settings.is_file():
        try:
            given = load_yaml(settings.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as error:
            raise FileError(f"{settings}: {error}") from None
        if not isinstance(given, dict) or set(given) - {"labels", "commit_message", "tests"}:
            raise FileError(f"{settings}: a mapping of labels, commit_message and tests")
        body.update(given)
    return body


def shown(path: Path) -> str:
    return f"{SKILLS_DIR}/{path.name}/"


def plan_bodies(paths: list[Path]) -> tuple[list[tuple[str, dict[str, Any]]], list[Outcome]]:
    """For a dry run: each readable folder's body (with its name), and an error for the others."""
    bodies, unread = [], []
    for path in paths:
        try:
            bodies.append((shown(path), {"name": path.name, **read_skill(path)}))
        except FileError as error:
            unread.append(Outcome(shown(path), "error", str(error)))
    return bodies, unread


def push_skill(client: Client, path: Path, release: Release | None = None) -> Outcome:
    """One skill folder written: created, or given a new version when its files changed, its
    labels moved; with ``release``, the labels that need approvals are not moved: their moves are
    added to it (as ``registry.sync.push_file`` does for a prompt)."""
    name = path.name
    try:
        body = read_skill(path)
        held = release.hold(body) if release is not None else []
        existing = client.get_or_none(f"/skills/{quote(name)}")
        exists = existing is not None
        if existing is not None:
            tests = body.pop("tests", None)
            if tests is not None and tests != existing.get("tests", []):
                client.request("PATCH", f"/skills/{quote(name)}", json={"tests": tests})
            result = client.request("POST", f"/skills/{quote(name)}/versions", json=body).json()
        else:
            result = client.request("POST", "/skills", json={"name": name, **body}).json()
    except FileError as error:
        return Outcome(shown(path), "error", str(error))
    if release is not None:
        current = existing.get("labels") or {} if existing is not None else {}
        release.add("skill", name, held, result["version"], current)
    moved = result.get("labels_moved") or []
    labels = f"; moved {', '.join(moved)}" if moved else ""
    version = result["version"]
    if not exists:
        return Outcome(shown(path), "create", f"created skill {name} (version 1){labels}")
    if result["created"]:
        return Outcome(shown(path), "version", f"wrote version {version}{labels}")
    if moved:
        return Outcome(shown(path), "labels", f"moved {', '.join(moved)} to version {version}")
    return Outcome(shown(path), "unchanged", f"version {version} has this folder")


def skill_names(client: Client) -> list[str]:
    return [s["name"] for s in client.request("GET", "/skills").json()]


def pull_skill(client: Client, name: str, folder: Path, *, label: str | None) -> Outcome:
    shown = f"{SKILLS_DIR}/{name}/"
    try:
        skill = client.request("GET", f"/skills/{quote(name)}").json()
        number = skill["labels"].get(label) if label else skill["latest_version"]
        if number is None:
            return Outcome(shown, "skipped", f"no version labelled {label!r}")
        version = client.request("GET", f"/skills/{quote(name)}/versions/{number}").json()
        target = folder / SKILLS_DIR / name
        wanted = set()
        for file in version["files"]:
            path = file["path"]
            params = {"as_written": "true"} if path == "SKILL.md" else {}
            data = client.request(
                "GET", f"/skills/{quote(name)}/versions/{number}/files/{quote(path)}", params=params
            ).content
            local = _inside(target, path)
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_bytes(data)
            wanted.add(local)
        _write_settings(target, skill, number)
        for stale in sorted(target.rglob("*"), reverse=True):
            relative = stale.relative_to(target)
            if any(part.startswith(".") for part in relative.parts):
                continue
            if stale.is_file() and stale not in wanted:
                stale.unlink()
            elif stale.is_dir() and not any(stale.iterdir()):
                stale.rmdir()
        return Outcome(shown, "wrote", f"{name} version {number}")
    except FileError as error:
        return Outcome(shown, "error", str(error))


def _write_settings(target: Path, skill: dict[str, Any], number: int) -> None:
    """``.registry.yaml`` as a push reads it back: the labels that serve the pulled version (but
    ``latest``, which moves by itself) and the skill's test cases, a ``commit_message`` already
    there kept; left as it is when it says that already, so a pull then a push changes nothing."""
    path = target / SETTINGS_FILE
    kept: dict[str, Any] = {}
    if path.is_file():
        try:
            found = load_yaml(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            found = None
        if isinstance(found, dict):
            kept = found
    wanted = {key: value for key, value in kept.items() if key == "commit_message"}
    labels = sorted(
        label for label, at in skill["labels"].items() if at == number and label != LATEST
    )
    if labels:
        wanted["labels"] = labels
    if skill.get("tests"):
        wanted["tests"] = skill["tests"]
    if wanted == kept:
        return
    if not wanted:
        path.unlink(missing_ok=True)
        return
    path.write_text(yaml.safe_dump(wanted, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _inside(target: Path, path: str) -> Path:
    """Where a file of the skill goes, never outside its folder (the registry checked the path;
    this checks it again on the way in)."""
    local = (target / path).resolve()
    if not local.is_relative_to(target.resolve()):
        raise FileError(f"the skill names a file outside its folder: {path!r}")
    return local

"""`registry import --from langfuse FILE`: a team's prompts brought over from where they lived, with
their versions, labels, tags, model config and variables, and a report of what could not be mapped.

Langfuse: the file holds prompt versions as Langfuse's public API answers ``GET
/api/public/v2/prompts/{name}?version=N`` (its OpenAPI ``Prompt``: ``type`` ``text`` or ``chat``,
``name``, ``version``, ``prompt``, ``config``, ``labels``, ``tags``, ``commitMessage``): a JSON list of
them, an object with such a list under ``data`` or ``prompts``, or one per line. The mapping:

- a text prompt is one user message; a chat prompt's ``user`` and ``assistant`` messages are
  messages, a ``system`` (or ``developer``) message becomes a user message (an MCP prompt has no
  system role; reported), a placeholder (``{"type": "placeholder"}``) is dropped (reported);
- each ``{{variable}}`` becomes a required string argument (Langfuse's variables are untyped);
- ``@@@langfusePrompt:name=N|version=V@@@`` (or ``|label=L``) becomes the partial tag ``{{> N@V}}``
  (``{{> N@L}}``), the prompts it names imported first;
- versions are written in order (numbered anew from 1 when Langfuse's have gaps; reported), each label
  moved to the version that held it (``latest`` is the registry's own), the config kept where the
  registry's model config accepts it (else dropped, reported), tags and commit messages as given;
- a name the registry does not accept (Langfuse's folders: ``a/b``) is renamed (``a.b``; reported).

A prompt the tenant already has is not touched (reported): an import brings prompts in, it does not
merge histories. ``--dry-run`` prints the same report and writes nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError

from registry.naming import LABEL_RE, LATEST, PROMPT_NAME_RE
from registry.prompts.schemas import ARGUMENT_NAME_PATTERN, TAG_PATTERN, ModelConfig
from registry.sync import Client, FileError

MAX_VERSIONS = 10_000  # prompt versions in one file
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]{0,63})\s*\}\}")
_REFERENCE = re.compile(r"@@@langfusePrompt:name=([^|@]{1,200})\|(version|label)=([^|@]{1,100})@@@")
_PARTIAL = re.compile(r"\{\{> ([A-Za-z0-9][A-Za-z0-9_.:-]{0,127})@([0-9]{1,10})\}\}")
_ARGUMENT = re.compile(ARGUMENT_NAME_PATTERN)
_TAG = re.compile(TAG_PATTERN)


@dataclass
class Version:
    source: int  # its number where it came from
    body: dict[str, Any]  # the registry's version body, without labels
    labels: list[str]
    children: list[tuple[str, str, str]]  # partial tags: (prompt, "version" | "label", value)


@dataclass
class Imported:
    name: str
    source_name: str
    tags: list[str] = field(default_factory=list)
    versions: list[Version] = field(default_factory=list)


@dataclass
class Plan:
    prompts: dict[str, Imported] = field(default_factory=dict)  # by the registry's name
    report: list[str] = field(default_factory=list)  # what could not be mapped as it was


def read_langfuse(data: bytes) -> Plan:
    """The plan of an import from a Langfuse file; FileError when it holds no prompt versions."""
    plan = Plan()
    for item in _items(data):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise FileError("not a Langfuse prompt (an object with name, version, type, prompt)")
        source_name = item["name"]
        name = _name(source_name)
        where = f"{source_name} v{item.get('version')}"
        if name is None:
            plan.report.append(f"{where}: the name cannot be made a prompt name; skipped")
            continue
        prompt = plan.prompts.setdefault(name, Imported(name, source_name))
        if name != source_name and len(prompt.versions) == 0:
            plan.report.append(f"{source_name}: imported as {name!r} (no '/' in prompt names)")
        if prompt.source_name != source_name:
            plan.report.append(f"{where}: {prompt.source_name!r} has that name here too; skipped")
            continue
        version = _langfuse_version(item, where, plan.report)
        if version is not None:
            prompt.versions.append(version)
            prompt.tags = _tags(item.get("tags"), where, plan.report)
    for prompt in plan.prompts.values():
        prompt.versions.sort(key=lambda v: v.source)
        numbers = [v.source for v in prompt.versions]
        if len(set(numbers)) != len(numbers):
            raise FileError(f"{prompt.source_name}: a version appears twice in the file")
        if numbers != list(range(1, len(numbers) + 1)):
            renumbered = ", ".join(f"v{n}→v{i}" for i, n in enumerate(numbers, 1) if i != n)
            plan.report.append(f"{prompt.source_name}: versions numbered anew ({renumbered})")
    if not plan.prompts:
        raise FileError("the file holds no prompt this command can import")
    return plan


def _items(data: bytes) -> list[Any]:
    try:
        loaded = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # one per line
            loaded = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        except orjson.JSONDecodeError as error:
            raise FileError(f"not JSON, nor JSON lines: {error}") from None
    if isinstance(loaded, dict):
        listed = loaded.get("data", loaded.get("prompts"))
        loaded = listed if isinstance(listed, list) else [loaded]
    if not isinstance(loaded, list):
        raise FileError("expected a list of prompt versions")
    if len(loaded) > MAX_VERSIONS:
        raise FileError(f"at most {MAX_VERSIONS} prompt versions in one file")
    return loaded


def _name(source: str) -> str | None:
    name = source.replace("/", ".").replace(" ", "-")
    return name if PROMPT_NAME_RE.fullmatch(name) else None


def _tags(given: Any, where: str, report: list[str]) -> list[str]:
    tags = [t for t in given if isinstance(t, str)] if isinstance(given, list) else []
    for tag in tags:
        if not _TAG.fullmatch(tag):
            report.append(f"{where}: tag {tag[:80]!r} is not a tag here; dropped")
    return [t for t in tags if _TAG.fullmatch(t)][:64]


def _langfuse_version(item: dict[str, Any], where: str, report: list[str]) -> Version | None:
    number = item.get("version")
    if not isinstance(number, int) or number < 1:
        report.append(f"{where}: no version number; skipped")
        return None
    messages = _messages(item, where, report)
    if not messages:
        report.append(f"{where}: no message left to import; skipped")
        return None
    children: list[tuple[str, str, str]] = []
    for message in messages:
        message["text"], found = _references(message["text"], where, report)
        children += found
    body: dict[str, Any] = {
        "messages": messages,
        "arguments": _arguments(m["text"] for m in messages),
    }
    if isinstance(item.get("commitMessage"), str):
        body["commit_message"] = item["commitMessage"][:2000]
    config = item.get("config")
    if isinstance(config, dict) and config:
        try:
            body["config"] = ModelConfig.model_validate(config).model_dump(
                mode="json", exclude_none=True
            )
        except ValidationError as refused:
            problem = refused.errors()[0]
            report.append(
                f"{where}: config not kept ({'.'.join(map(str, problem['loc']))}: {problem['msg']})"
            )
    labels = []
    for label in item.get("labels") or []:
        if label == LATEST:
            continue
        if isinstance(label, str) and LABEL_RE.fullmatch(label):
            labels.append(label)
        else:
            report.append(f"{where}: label {str(label)[:80]!r} is not a label name here; dropped")
    return Version(number, body, labels, children)


def _messages(item: dict[str, Any], where: str, report: list[str]) -> list[dict[str, str]]:
    """A Langfuse version's prompt as messages (``{role, text}``), what did not map reported."""
    messages: list[dict[str, str]] = []
    if item.get("type") == "chat" or isinstance(item.get("prompt"), list):
        for i, message in enumerate(item.get("prompt") or [], 1):
            if not isinstance(message, dict):
                continue
            if message.get("type") == "placeholder":
                report.append(
                    f"{where}: message {i} is a placeholder ({message.get('name')!r}), which a "
                    "prompt here has no counterpart for; dropped"
                )
                continue
            role, text = message.get("role"), message.get("content")
            if not isinstance(text, str):
                report.append(f"{where}: message {i} has no text content; dropped")
                continue
            if role not in ("user", "assistant"):
                report.append(
                    f"{where}: message {i} ({role}) written as a user message (an MCP prompt has "
                    "user and assistant messages only)"
                )
                role = "user"
            messages.append({"role": str(role), "text": text})
    elif isinstance(item.get("prompt"), str):
        messages.append({"role": "user", "text": item["prompt"]})
    return messages


def _references(text: str, where: str, report: list[str]) -> tuple[str, list[tuple[str, str, str]]]:
    found: list[tuple[str, str, str]] = []

    def tag(match: re.Match[str]) -> str:
        child = _name(match.group(1))
        if child is None:
            report.append(f"{where}: a reference to {match.group(1)!r} kept as text")
            return match.group(0)
        found.append((child, match.group(2), match.group(3)))
        return f"{{{{> {child}@{match.group(3)}}}}}"

    return _REFERENCE.sub(tag, text), found


def _arguments(texts: Iterable[str]) -> list[dict[str, Any]]:
    names: dict[str, None] = {}
    for text in texts:
        for match in _VARIABLE.finditer(text):
            if _ARGUMENT.fullmatch(match.group(1)):
                names.setdefault(match.group(1))
    return [{"name": n, "required": True} for n in names]


# --- writing -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    action: str  # create | exists | error (with --dry-run: would create)
    detail: str

    def line(self) -> str:
        return f"{self.name}: {self.action}: {self.detail}"


def order(plan: Plan) -> list[Imported]:
    """The prompts, each after those its partial tags name (a cycle: in the file's order)."""
    done: dict[str, Imported] = {}
    visiting: set[str] = set()

    def visit(prompt: Imported) -> None:
        if prompt.name in done or prompt.name in visiting:
            return
        visiting.add(prompt.name)
        for version in prompt.versions:
            for child, _, _ in version.children:
                if child in plan.prompts:
                    visit(plan.prompts[child])
        done[prompt.name] = prompt

    for prompt in plan.prompts.values():
        visit(prompt)
    return list(done.values())


def apply(client: Client, plan: Plan, *, dry_run: bool) -> list[Outcome]:
    """Write the plan through the REST API, one prompt at a time, its versions in order."""
    numbers: dict[tuple[str, int], int] = {}  # (prompt, source version): the version written
    outcomes = []
    for prompt in order(plan):
        if client.get_or_none(f"/prompts/{prompt.name}") is not None:
            outcomes.append(Outcome(prompt.name, "exists", "the tenant has it; not imported"))
            continue
        if dry_run:
            labels = sorted({label for v in prompt.versions for label in v.labels})
            outcomes.append(Outcome(prompt.name, "would create", _summary(prompt.versions, labels)))
            continue
        outcomes.append(_write(client, prompt, numbers))
    return outcomes


def _write(client: Client, prompt: Imported, numbers: dict[tuple[str, int], int]) -> Outcome:
    moved: list[str] = []
    problems: list[str] = []
    for index, version in enumerate(prompt.versions):
        body = _with_children(version, numbers)
        try:
            if index == 0:
                written = client.request(
                    "POST", "/prompts", json={"name": prompt.name, "tags": prompt.tags, **body}
                ).json()
            else:
                written = client.request(
                    "POST", f"/prompts/{prompt.name}/versions", json=body
                ).json()
        except FileError as refused:
            where = f"version {version.source}"
            if index == 0:
                return Outcome(prompt.name, "error", f"{where}: {refused}")
            problems.append(f"{where} and later not written: {refused}")
            break
        number = int(written["version"])
        numbers[(prompt.name, version.source)] = number
        for label in version.labels:
            try:
                client.request(
                    "PUT", f"/prompts/{prompt.name}/labels/{label}", json={"version": number}
                )
                moved.append(label)
            except FileError as refused:
                problems.append(f"label {label} not moved: {refused}")
    written_count = len([k for k in numbers if k[0] == prompt.name])
    detail = _summary(prompt.versions[:written_count], moved)
    return Outcome(prompt.name, "error" if problems else "create", "; ".join([detail, *problems]))


def _with_children(version: Version, numbers: dict[tuple[str, int], int]) -> dict[str, Any]:
    """The body, with each partial tag naming a version by its Langfuse number renamed to the
    number it was written as here."""
    body = dict(version.body)
    wanted = {(c, int(v)) for c, kind, v in version.children if kind == "version" and v.isdigit()}
    if not wanted:
        return body

    def renamed(match: re.Match[str]) -> str:
        key = (match.group(1), int(match.group(2)))
        return (
            f"{{{{> {key[0]}@{numbers[key]}}}}}"
            if key in wanted and key in numbers
            else (match.group(0))
        )

    body["messages"] = [{**m, "text": _PARTIAL.sub(renamed, m["text"])} for m in body["messages"]]
    return body


def _summary(versions: list[Version], labels: Iterable[str]) -> str:
    shown = ", ".join(sorted(set(labels))) or "none"
    return f"{len(versions)} version(s), labels: {shown}"

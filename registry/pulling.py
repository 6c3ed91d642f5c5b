"""What `registry pull` writes: a tenant's prompts as prompt files (a label's version or the
latest), their blobs under ``blobs/``, each prompt into the file that holds it already and in that
file's format (Markdown stays Markdown while it is one text message), leaving a file that already
says what is served as it is, and keeping a ``file:`` reference while its bytes are the blob's.
The files are read back as ``registry.sync`` reads them for a push."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import yaml

from registry.sync import (
    BLOB_DIR,
    PROMPT_SUFFIXES,
    Client,
    FileError,
    Outcome,
    bytes_holder,
    delimiter_line,
    prompt_from_text,
    read_prompt_file,
    referenced_blobs,
    yaml_mapping,
)


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_presenter)


def _file_body(
    prompt: dict[str, Any], version: dict[str, Any], labels: list[str]
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": prompt["name"]}
    for key in ("title", "description"):
        if version.get(key):
            body[key] = version[key]
    if prompt["tags"]:
        body["tags"] = prompt["tags"]
    if prompt.get("as_tool"):
        body["as_tool"] = True
    if prompt.get("tests"):
        body["tests"] = prompt["tests"]
    if labels:
        body["labels"] = labels
    if version.get("icons"):
        body["icons"] = version["icons"]
    if version.get("config"):
        body["config"] = version["config"]
    if version["arguments"]:
        body["arguments"] = [
            {k: v for k, v in a.items() if v is not None and not (k == "required" and v is False)}
            for a in version["arguments"]
        ]
    body["messages"] = [
        {"role": m["role"], "text": m["content"]["text"]}
        if m["content"]["type"] == "text" and set(m["content"]) == {"type", "text"}
        else {"role": m["role"], "content": m["content"]}
        for m in version["messages"]
    ]
    return body


def pull_prompt(client: Client, name: str, folder: Path, *, label: str | None) -> Outcome:
    try:
        prompt = client.request("GET", f"/prompts/{name}").json()
        number = prompt["labels"].get(label) if label else prompt["latest_version"]
        if number is None:
            return Outcome(f"{name}.yaml", "skipped", f"no version labelled {label!r}")
        version = client.request("GET", f"/prompts/{name}/versions/{number}").json()
        labels = sorted(k for k, v in prompt["labels"].items() if v == number and k != "latest")
        body = _file_body(prompt, version, labels)
        for sha, _ in referenced_blobs(body):
            local = folder / BLOB_DIR / sha
            if not local.is_file():
                data = client.request("GET", f"/blobs/{sha}").content
                if hashlib.sha256(data).hexdigest() != sha:
                    raise FileError(f"blob {sha} arrived corrupted")
                local.parent.mkdir(exist_ok=True)
                local.write_bytes(data)
        target = _target(folder, name)
        _keep_file_references(body, target)
        text = _markdown(body) if target.suffix == ".md" else _yaml_text(body)
        if text is None:
            raise FileError(
                f"{target.name} holds prompt {name}, whose version {number} is more than one "
                f"text message: it cannot stay Markdown; remove {target.name} to pull it as "
                f"{name}.yaml"
            )
        if _same_prompt(target, text):  # what the file says already: left as it is
            return Outcome(target.name, "unchanged", f"{name} version {number}")
        target.write_text(text)
        return Outcome(target.name, "wrote", f"{name} version {number}")
    except FileError as error:
        return Outcome(f"{name}.yaml", "error", str(error))


def _target(folder: Path, name: str) -> Path:
    """The file a pulled prompt goes to: the one that holds it already, in its format (Markdown
    stays Markdown), else NAME.yaml."""
    found = [folder / f"{name}{suffix}" for suffix in PROMPT_SUFFIXES]
    present = [path for path in found if path.is_file()]
    if len(present) > 1:
        raise FileError(
            f"{present[0].name} and {present[1].name} both hold prompt {name}: remove one"
        )
    return present[0] if present else folder / f"{name}.yaml"


def _yaml_text(body: dict[str, Any]) -> str:
    return yaml.dump(body, Dumper=_Dumper, sort_keys=False, allow_unicode=True)


def _markdown(body: dict[str, Any]) -> str | None:
    """A pulled prompt as a Markdown prompt file (its fields in the front matter, its one user
    text message as the body), or None when it is not one text message."""
    messages = body["messages"]
    if len(messages) != 1 or messages[0].get("role") != "user" or "text" not in messages[0]:
        return None
    text = str(messages[0]["text"]).strip("\n")
    fields = {k: v for k, v in body.items() if k not in ("name", "messages")}
    if not text:
        return None
    head = f"---\n{_yaml_text(fields)}---\n" if fields or delimiter_line(text) else ""
    return f"{head}{text}\n"


def _same_prompt(target: Path, text: str) -> bool:
    """Whether ``target`` already says what ``text`` says (the same prompt when pushed), so that
    a pull over a folder just pushed changes no file, its formatting and comments included."""
    if not target.is_file():
        return False
    try:
        before = read_prompt_file(target)
    except FileError:
        return False
    try:
        after = prompt_from_text(text, target)
    except FileError:
        return False
    return before == after


def _keep_file_references(body: dict[str, Any], target: Path) -> None:
    """Where the file being pulled over names a local file (``file: diagram.png``) whose bytes are
    exactly the blob the registry holds at that place, keep the reference instead of a hash."""
    if not target.is_file():
        return
    try:
        before = yaml_mapping(target.read_text(encoding="utf-8")).get("messages")
    except (FileError, OSError, UnicodeDecodeError):
        return  # not readable as it is: written anew
    if not isinstance(before, list):
        return
    for message, old in zip(body["messages"], before, strict=False):
        content = message.get("content")
        previous = old.get("content") if isinstance(old, dict) else None
        if not isinstance(content, dict) or not isinstance(previous, dict):
            continue
        holder, local = bytes_holder(content), bytes_holder(previous)
        if holder is None or local is None or not isinstance(local.get("file"), str):
            continue
        path = target.parent / local["file"]
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == holder.get("blob"):
            message["content"] = previous

"""A prompt's entry in an MCP prompts/list page, decided here once.

The MCP layer shapes every page with ``list_entry`` (choosing, by revision, whether titles and icons
are carried). The write path stores each new version's entry as the newest revisions carry it
(``stored_entry``, with titles and icons): versions never change, so an uncached page of those
revisions is an index scan and a concatenation of stored entries instead of three joins, a JSON
aggregate and a few thousand objects shaped in the worker (bench/history.md measures both)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import orjson

from registry.naming import META_ARGUMENTS
from registry.prompts.schemas import DeclaredArgument


class ServedArgument(NamedTuple):
    """An argument as a served version declares it. Named tuples, not dataclasses: a page builds a
    few thousand of them, and a tuple is made in a fraction of a frozen dataclass's time."""

    name: str
    title: str | None
    description: str | None
    required: bool
    default: str | None = None
    enum: list[str] | None = None
    pattern: str | None = None
    max_length: int | None = None


class ServedPrompt(NamedTuple):
    """A prompt as a label serves it (the MCP layer shapes it for each protocol revision)."""

    name: str
    version: int
    title: str | None
    description: str | None
    icons: list[dict[str, Any]] | None
    arguments: list[ServedArgument]


def served_prompt(
    name: str,
    version: int,
    title: str | None,
    description: str | None,
    icons: list[dict[str, Any]] | None,
    arguments: Iterable[Sequence[Any]] | None,
) -> ServedPrompt:
    """A served prompt from a row of the page functions: its name, then the version's fields as
    ``registry_served_page_v1`` (and, for a version stored without an entry, the entries function)
    returns them, each argument positional."""
    return ServedPrompt(
        name, version, title, description, icons, [ServedArgument(*a) for a in arguments or ()]
    )


def list_entry(prompt: ServedPrompt, *, titles: bool, icons: bool) -> dict[str, Any]:
    """The prompts/list entry of ``prompt``: ``titles`` (titles and the arguments' JSON Schema in
    ``_meta``) and ``icons`` say what the caller's revision defines."""
    entry: dict[str, Any] = {"name": prompt.name}
    if prompt.title and titles:
        entry["title"] = prompt.title
    if prompt.description:
        entry["description"] = prompt.description
    if prompt.arguments:
        entry["arguments"] = [_argument(a, titles) for a in prompt.arguments]
    if prompt.icons and icons:
        entry["icons"] = prompt.icons
    if prompt.arguments and titles:
        entry["_meta"] = {META_ARGUMENTS: argument_schema(prompt.arguments)}
    return entry


# What ``list_entry`` is told for the entry a version is stored with: the revisions that show titles
# and icons list it (registry.mcp.shaping serves the stored entry to a revision only when its own
# options are exactly these, so an option added for a later revision falls back to shaping).
STORED_OPTIONS: dict[str, bool] = {"titles": True, "icons": True}


def narrowed(entry: dict[str, Any], *, titles: bool, icons: bool) -> dict[str, Any]:
    """A stored entry (``STORED_OPTIONS``, decoded) as ``list_entry`` shapes it for a revision
    with fewer options: what ``titles`` and ``icons`` leave out, left out."""
    if not titles:
        entry.pop("title", None)
        entry.pop("_meta", None)
        for argument in entry.get("arguments", ()):
            argument.pop("title", None)
    if not icons:
        entry.pop("icons", None)
    return entry


def stored_entry(prompt: ServedPrompt) -> str:
    """The entry a version is stored with (``STORED_OPTIONS``), encoded."""
    return orjson.dumps(list_entry(prompt, **STORED_OPTIONS)).decode()


def entry_of_version(
    name: str, meta: Mapping[str, Any], arguments: Sequence[Mapping[str, Any]]
) -> str:
    """``stored_entry`` of a version being written, from its metadata and declared arguments."""
    return stored_entry(
        ServedPrompt(
            name,
            0,  # not part of the entry
            meta.get("title"),
            meta.get("description"),
            meta.get("icons"),
            [
                ServedArgument(
                    a["name"],
                    a.get("title"),
                    a.get("description"),
                    bool(a.get("required")),
                    a.get("default"),
                    a.get("enum"),
                    a.get("pattern"),
                    a.get("max_length"),
                )
                for a in arguments
            ],
        )
    )


def argument_schema(
    arguments: Iterable[DeclaredArgument], *, leave_out: Container[str] = ()
) -> dict[str, Any]:
    """A JSON Schema of a prompt's arguments (every value a string, with its constraints): what
    prompts/list carries in ``_meta`` and what the elicitation form asks for."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for argument in arguments:
        if argument.name in leave_out:
            continue
        field: dict[str, Any] = {"type": "string"}
        if argument.title:
            field["title"] = argument.title
        if argument.description:
            field["description"] = argument.description
        if argument.enum:
            field["enum"] = list(argument.enum)
        if argument.max_length is not None:
            field["maxLength"] = argument.max_length
        if argument.pattern is not None:
            field["pattern"] = argument.pattern
        if argument.default is not None:
            field["default"] = argument.default
        properties[argument.name] = field
        if argument.required:
            required.append(argument.name)
    return {"type": "object", "properties": properties, "required": required}


def _argument(argument: ServedArgument, titles: bool) -> dict[str, Any]:
    shaped: dict[str, Any] = {"name": argument.name, "required": argument.required}
    if argument.title and titles:
        shaped["title"] = argument.title
    if argument.description:
        shaped["description"] = argument.description
    return shaped

"""Partials: a template includes another prompt of the tenant with ``{{> name}}`` (the tenant's
default label), ``{{> name@staging}}`` (a label) or ``{{> name@3}}`` (a version).

A reference is resolved when the parent version is written, and the exact child version is recorded
with it (its lock, in ``prompt_partials``), so a parent version renders the same forever: moving a
child's label changes no parent. Writing the parent again (``refresh``, ``registry push``) resolves
the references anew; ``impact`` tells, for a child, which parents embed it, through which lock, and
which of their labels a refresh would change.

A child must be one text message (its template is put in place of the tag, inline, with the parent's
values); its variables must be arguments of the parent. Partials nest at most ``MAX_DEPTH`` deep, a
prompt never includes itself however indirectly (refused with the path of names), and a parent with
its partials expanded is at most ``MAX_TEMPLATE_CHARS`` long.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Tenant
from registry.errors import InvalidInput, NotFound
from registry.naming import ascii_number
from registry.prompts import label_repository as label_repo
from registry.prompts import partial_repository as partial_repo
from registry.prompts import repository as repo
from registry.prompts.schemas import ImpactEntry
from registry.templates.mustache import MAX_TEMPLATE_CHARS, Partial, Template, compiled

MAX_DEPTH = 5  # a parent, its children, theirs...: at most five levels below the parent

Key = tuple[uuid.UUID, int]  # (prompt id, version)


@dataclass(frozen=True)
class Lock:
    """What one partial tag (``ref``, as written) of a version was resolved to."""

    ref: str
    child_name: str
    child_prompt_id: uuid.UUID
    child_version: int

    @property
    def key(self) -> Key:
        return self.child_prompt_id, self.child_version


@dataclass(frozen=True)
class Node:
    """A locked child version: its name, its template (None with the reason when it cannot be a
    partial), and its own locks."""

    name: str
    source: str | None
    unusable: str | None
    locks: tuple[Lock, ...]


def refs(templates: Iterable[Template]) -> list[Partial]:
    """The distinct partial tags of some templates, first occurrence first."""
    seen: dict[str, Partial] = {}
    for template in templates:
        for partial in template.partials():
            seen.setdefault(partial.ref, partial)
    return list(seen.values())


async def resolve(
    session: AsyncSession,
    tenant: Tenant,
    partials: list[Partial],
    *,
    pinned: Mapping[str, int] | None,
    where: str,
) -> list[Lock]:
    """Each tag resolved to a child version: by its selector, or by ``pinned`` (ref -> version:
    a restore, an import) when given."""
    locks = []
    for partial in partials:
        prompt = await repo.prompt_by_name(session, tenant.id, partial.name)
        tag = "{{> " + partial.ref + "}}"
        if prompt is None:
            raise InvalidInput(
                f"{where}: partial {tag}: no prompt {partial.name!r} in this tenant", field=where
            )
        if pinned is not None:
            if partial.ref not in pinned:
                raise InvalidInput(
                    f"{where}: partial {tag} has no entry in partials (the locked versions)",
                    field="partials",
                )
            number: int | None = pinned[partial.ref]
            missing = f"no version {number}"
        elif partial.selector is not None and ascii_number(partial.selector) is not None:
            number = int(partial.selector)
            missing = f"no version {number}"
        else:
            label = partial.selector or tenant.default_label
            row = await label_repo.label_row(session, prompt, label)
            number = row.version if row else None
            missing = f"no version labelled {label!r}"
        if number is None or not 1 <= number <= prompt.latest_version:
            raise InvalidInput(
                f"{where}: partial {tag}: prompt {partial.name!r} has {missing}", field=where
            )
        locks.append(Lock(partial.ref, partial.name, prompt.id, number))
    if pinned is not None:
        extra = sorted(set(pinned) - {p.ref for p in partials})
        if extra:
            raise InvalidInput(
                f"partials names {extra[0]!r}, which no template of this version includes",
                field="partials",
            )
    return locks


async def load(
    session: AsyncSession, tenant_id: uuid.UUID, roots: Iterable[Key]
) -> dict[Key, Node]:
    """Every version reachable from ``roots`` through locks, one level past the depth limit."""
    rows = await partial_repo.partial_tree(session, tenant_id, list(roots), MAX_DEPTH + 1)
    nodes = {}
    for row in rows:
        messages = row["messages"] or []
        source = unusable = None
        if len(messages) != 1 or messages[0].get("type") != "text":
            kinds = ", ".join(m.get("type", "?") for m in messages)
            unusable = f"it has {len(messages)} message(s) ({kinds}); a partial is one text message"
        else:
            source = messages[0]["text"]
        locks = tuple(
            Lock(
                lock["ref"],
                lock["child_name"],
                uuid.UUID(lock["child_prompt"]),
                lock["child_version"],
            )
            for lock in row["locks"] or []
        )
        nodes[(row["prompt_id"], row["version"])] = Node(row["name"], source, unusable, locks)
    return nodes


class Expander:
    """Expanded templates of locked versions, each built once (versions are immutable)."""

    def __init__(self, nodes: Mapping[Key, Node], *, check: bool) -> None:
        self.nodes = nodes
        self.check = check
        self._expanded: dict[Key, Template] = {}
        self._names: dict[Key, frozenset[str]] = {}
        self._depth: dict[Key, int] = {}

    def children(self, parent: str, locks: Iterable[Lock]) -> dict[str, Template]:
        """ref -> the expanded child template, for the locks of a version of ``parent``."""
        out = {}
        for lock in locks:
            if self.check:
                self._check(parent, lock)
            out[lock.ref] = self.expanded(lock.key)
        return out

    def expanded(self, key: Key) -> Template:
        found = self._expanded.get(key)
        if found is None:
            node = self.nodes[key]
            template = compiled(node.source or "")
            found = template.expand(self.children(node.name, node.locks))
            self._expanded[key] = found
        return found

    def _check(self, parent: str, lock: Lock) -> None:
        tag = "{{> " + lock.ref + "}}"
        node = self.nodes.get(lock.key)
        if node is None or self._depth_of(lock.key) > MAX_DEPTH:
            raise InvalidInput(
                f"partial {tag}: partials nest more than {MAX_DEPTH} levels deep "
                f"({' > '.join([parent, *self._deepest(lock.key)])})",
                field="partials",
            )
        if node.unusable is not None:
            raise InvalidInput(
                f"partial {tag}: {lock.child_name} version {lock.child_version} cannot be "
                f"included: {node.unusable}",
                field="partials",
            )
        if parent in self._names_of(lock.key):
            raise InvalidInput(
                f"partial {tag}: partials form a cycle "
                f"({' > '.join([parent, *self._path_to(lock.key, parent)])})",
                field="partials",
            )

    def _names_of(self, key: Key) -> frozenset[str]:
        found = self._names.get(key)
        if found is None:
            node = self.nodes.get(key)
            found = frozenset()
            if node is not None:
                found = frozenset({node.name}).union(
                    *(self._names_of(lock.key) for lock in node.locks)
                )
            self._names[key] = found
        return found

    def _depth_of(self, key: Key) -> int:
        found = self._depth.get(key)
        if found is None:
            node = self.nodes.get(key)
            if node is None:  # not loaded: past the limit
                found = MAX_DEPTH + 1
            else:
                found = 1 + max((self._depth_of(lock.key) for lock in node.locks), default=0)
            self._depth[key] = found
        return found

    def _path_to(self, key: Key, name: str) -> list[str]:
        """The names from ``key`` down to a version of ``name``."""
        node = self.nodes[key]
        if node.name == name:
            return [name]
        for lock in node.locks:
            if name in self._names_of(lock.key):
                return [node.name, *self._path_to(lock.key, name)]
        return [node.name]

    def _deepest(self, key: Key) -> list[str]:
        node = self.nodes.get(key)
        if node is None:
            return ["…"]
        if not node.locks:
            return [node.name]
        deepest = max(node.locks, key=lambda lock: self._depth_of(lock.key))
        return [node.name, *self._deepest(deepest.key)]


def check_expanded(
    template: Template,
    children: Mapping[str, Template],
    declared: set[str],
    where: str,
) -> Template:
    """The template with its partials in place, once their variables are the parent's arguments
    and the whole is within the size limit."""
    for partial in template.partials():
        child = children[partial.ref]
        unknown = sorted({v.name for v in child.variables()} - declared)
        if unknown:
            raise InvalidInput(
                f"{where}: partial {{{{> {partial.ref}}}}} uses "
                + ", ".join(repr(u) for u in unknown)
                + ", which "
                + ("is not an argument" if len(unknown) == 1 else "are not arguments")
                + " of this prompt (declare "
                + ("it" if len(unknown) == 1 else "them")
                + ")",
                field=where,
                unknown=unknown,
            )
    # Measured before anything is built: a tag repeated over levels of partials multiplies.
    size = template.size() + sum(children[p.ref].size() for p in template.partials())
    if size > MAX_TEMPLATE_CHARS:
        raise InvalidInput(
            f"{where}: with its partials the template holds {size:,} characters of text and "
            f"tags; the most is {MAX_TEMPLATE_CHARS:,}",
            field=where,
        )
    return template.expand(children)


# A partial tag in text that is not a template (a skill's SKILL.md: Markdown, whose other braces are
# left as they are); the tag's own form is the one templates have.
_TEXT_TAG = re.compile(r"\{\{>\s*([^{}\s]+)\s*\}\}")


async def expand_text(
    session: AsyncSession, tenant: Tenant, text: str, *, where: str
) -> tuple[str, list[dict[str, object]]]:
    """``text`` with each partial tag replaced by the text of the prompt version it resolves to
    (a child's own tags in place, as its locks say: the same depth, cycle and size rules as
    templates), and what each tag resolved to (``{ref, prompt, version}``). Only partial tags are
    read: any other ``{{...}}`` in the text stays as it is."""
    partials: list[Partial] = []
    for ref in dict.fromkeys(m.group(1) for m in _TEXT_TAG.finditer(text)):
        partials.extend(compiled("{{> " + ref + "}}").partials())
    if not partials:
        return text, []
    locks = await resolve(session, tenant, partials, pinned=None, where=where)
    nodes = await load(session, tenant.id, [lock.key for lock in locks])
    Expander(nodes, check=True).children(where, locks)  # depth, cycles, usable children
    root = Node(where, text, None, tuple(locks))
    lengths: dict[Key | None, int] = {}

    def children(node: Node) -> dict[str, Key]:
        return {lock.ref: lock.key for lock in node.locks}

    def length(key: Key | None, node: Node) -> int:
        """How long ``node``'s text is once expanded, computed before anything is built (a tag
        repeated over levels multiplies)."""
        if key not in lengths:
            refs = children(node)
            total = len(node.source or "")
            for found in _TEXT_TAG.finditer(node.source or ""):
                child = refs[_ref_of(found.group(1))]
                total += length(child, nodes[child]) - len(found.group(0))
            lengths[key] = total
        return lengths[key]

    if length(None, root) > MAX_TEMPLATE_CHARS:
        raise InvalidInput(
            f"{where}: with its partials the text holds {length(None, root):,} characters; "
            f"the most is {MAX_TEMPLATE_CHARS:,}",
            field=where,
        )

    def expanded(node: Node) -> str:
        refs = children(node)
        return _TEXT_TAG.sub(
            lambda found: expanded(nodes[refs[_ref_of(found.group(1))]]), node.source or ""
        )

    return expanded(root), [
        {"ref": lock.ref, "prompt": lock.child_name, "version": lock.child_version}
        for lock in locks
    ]


def _ref_of(written: str) -> str:
    """A tag's ref as templates record it (the parser's own reading of the tag)."""
    (partial,) = compiled("{{> " + written + "}}").partials()
    return partial.ref


async def impact(session: AsyncSession, tenant: Tenant, name: str) -> list[ImpactEntry]:
    """Every labelled parent version that embeds ``name``: through which lock, and whether
    refreshing it would change what that label serves."""
    child = await repo.prompt_by_name(session, tenant.id, name)
    if child is None:
        raise NotFound(f"no prompt {name!r}", field="name")
    entries = []
    current: dict[str, int | None] = {}
    for row in await partial_repo.embedding(session, tenant.id, child.id):
        ref = row["ref"]
        if ref not in current:
            _, _, selector = ref.partition("@")
            if selector and ascii_number(selector) is not None:
                current[ref] = int(selector)
            else:
                label = await label_repo.label_row(session, child, selector or tenant.default_label)
                current[ref] = label.version if label else None
        now = current[ref]
        entries.append(
            ImpactEntry(
                prompt=row["prompt"],
                version=row["version"],
                labels=sorted(row["labels"]),
                ref=ref,
                locked_version=row["child_version"],
                current_version=now,
                stale=now is not None and now != row["child_version"],
            )
        )
    return entries

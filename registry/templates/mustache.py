"""A logic-less Mustache subset: parsed once when a version is written, rendered in one linear pass.

Supported: variables ``{{name}}`` (also ``{{{name}}}`` and ``{{&name}}``; nothing is ever escaped),
sections ``{{#name}}…{{/name}}`` (rendered when the value is non-empty), inverted sections
``{{^name}}…{{/name}}`` (rendered when it is empty), comments ``{{! … }}`` and set-delimiter
``{{=<% %>=}}``. Section, comment and delimiter tags alone on a line take the line with them, as the
Mustache spec says. Partials ``{{> name}}``, ``{{> name@label}}`` and ``{{> name@3}}`` name another
prompt of the tenant; the prompts domain resolves them to locked versions and ``Template.expand``
puts the child templates in their place (inline, with the parent's values), so what renders is again
one template.

A value is inserted verbatim and never parsed again, so arguments cannot inject template syntax.
Parsing and rendering are linear in the template (no step rescans a line) and iterative (no
recursion, whatever the nesting); a template is at most ``MAX_TEMPLATE_CHARS`` long and nests
sections at most ``MAX_DEPTH`` deep, and ``compiled()`` keeps parsed templates for reuse.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from registry.errors import InvalidInput
from registry.naming import LABEL_RE, PROMPT_NAME_RE, ascii_number

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
MAX_TEMPLATE_CHARS = 1_000_000
MAX_DEPTH = 64  # sections inside sections
_BLANKS = re.compile(r"[ \t]*")
_LINE_END = re.compile(r"[ \t\r]*(?:\n|\Z)")


class TemplateError(InvalidInput):
    """A template that cannot be accepted; carries the 1-based line and column of the fault."""

    code = "template_error"

    def __init__(self, message: str, *, line: int, column: int, **detail: Any) -> None:
        super().__init__(
            f"{message} at line {line}, column {column}", line=line, column=column, **detail
        )
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Variable:
    name: str
    line: int
    column: int


@dataclass(frozen=True)
class Section:
    name: str
    inverted: bool
    line: int
    column: int
    children: list[Node] = field(default_factory=list)


@dataclass(frozen=True)
class Partial:
    """``{{> name}}`` (selector None: the tenant's default label), ``{{> name@staging}}`` (a label)
    or ``{{> name@3}}`` (a version)."""

    name: str
    selector: str | None
    line: int
    column: int

    @property
    def ref(self) -> str:
        return self.name if self.selector is None else f"{self.name}@{self.selector}"


Node = str | Variable | Section | Partial


@dataclass(frozen=True)
class Template:
    source: str
    nodes: list[Node]

    def variables(self) -> Iterator[Variable | Section]:
        """Every variable and section tag, in source order, with its position."""
        stack = list(reversed(self.nodes))
        while stack:
            node = stack.pop()
            if isinstance(node, Variable):
                yield node
            elif isinstance(node, Section):
                yield node
                stack.extend(reversed(node.children))

    def partials(self) -> Iterator[Partial]:
        """Every partial tag, in source order."""
        stack = list(reversed(self.nodes))
        while stack:
            node = stack.pop()
            if isinstance(node, Partial):
                yield node
            elif isinstance(node, Section):
                stack.extend(reversed(node.children))

    def expand(self, children: Mapping[str, Template]) -> Template:
        """This template with each partial replaced by the (already expanded) template of its
        ``ref`` in ``children``: one template again, rendered in one pass. Recurses only as deep as
        sections nest (at most MAX_DEPTH)."""
        if next(self.partials(), None) is None:
            return self
        return Template(self.source, _expanded(self.nodes, children))

    def size(self) -> int:
        """Characters of literal text and of tags, counted through every section (what an
        expansion adds; a tag counts as written, so the number of nodes is bounded too)."""
        total = 0
        stack = list(self.nodes)
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                total += len(node)
            else:
                total += len(node.name) + 4  # {{name}}: however written, at least this long
                if isinstance(node, Section):
                    stack.extend(node.children)
        return total

    @cached_property
    def _text_and_uses(self) -> tuple[int, tuple[tuple[str, int], ...]]:
        """Literal characters, and how many times each variable is inserted (sections included)."""
        text, uses = 0, Counter[str]()
        stack = list(self.nodes)
        while stack:
            node = stack.pop()
            if isinstance(node, str):
                text += len(node)
            elif isinstance(node, Variable):
                uses[node.name] += 1
            elif isinstance(node, Section):
                stack.extend(node.children)
        return text, tuple(uses.items())

    def most_rendered(self, longest: Mapping[str, int], otherwise: int) -> int:
        """The longest output any values could give, each value at most ``longest[name]`` (or
        ``otherwise``) characters long: what a writer can know before anything renders."""
        text, uses = self._text_and_uses
        return text + sum(count * longest.get(name, otherwise) for name, count in uses)

    def most_inserted(self, values: Mapping[str, str]) -> int:
        """The longest ``render(values)`` could be: every value inserted everywhere it appears
        (sections left out can only make it shorter). No walk of the template."""
        text, uses = self._text_and_uses
        return text + sum(count * len(values.get(name, "")) for name, count in uses)

    def rendered_length(self, values: Mapping[str, str], limit: int) -> int:
        """The length ``render(values)`` has, counted without building it; counting stops once
        past ``limit`` (the number returned is then some length above the limit)."""
        total = 0
        pending = [iter(self.nodes)]
        while pending and total <= limit:
            for node in pending[-1]:
                if isinstance(node, str):
                    total += len(node)
                elif isinstance(node, Variable):
                    total += len(values.get(node.name, ""))
                elif isinstance(node, Section) and bool(values.get(node.name)) != node.inverted:
                    pending.append(iter(node.children))
                    break
                if total > limit:
                    break
            else:
                pending.pop()
        return total

    def render(self, values: Mapping[str, str]) -> str:
        out: list[str] = []
        pending = [iter(self.nodes)]  # the sections being rendered, innermost last
        while pending:
            for node in pending[-1]:
                if isinstance(node, str):
                    out.append(node)
                elif isinstance(node, Variable):
                    out.append(values.get(node.name, ""))
                elif isinstance(node, Partial):  # never: what renders was expanded first
                    raise TemplateError(
                        f"partial {node.ref!r} was not resolved", line=node.line, column=node.column
                    )
                elif bool(values.get(node.name)) != node.inverted:
                    pending.append(iter(node.children))
                    break
            else:
                pending.pop()
        return "".join(out)


def _expanded(nodes: list[Node], children: Mapping[str, Template]) -> list[Node]:
    """``nodes`` with each partial replaced by its child's nodes (``Template.expand``). A function
    of the module, not one nested in ``expand``: a nested function that calls itself is a reference
    cycle, left for the cycle collector by every expansion (tests/test_collector.py)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Partial):
            out.extend(children[node.ref].nodes)
        elif isinstance(node, Section):
            out.append(
                Section(
                    node.name,
                    node.inverted,
                    node.line,
                    node.column,
                    _expanded(node.children, children),
                )
            )
        else:
            out.append(node)
    return out


class _Scanner:
    def __init__(self, source: str) -> None:
        self.source = source
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self._first_mark: dict[int, int] = {}  # line -> offset of its first non-blank character

    def line(self, offset: int) -> int:
        """The 0-based line holding ``offset``."""
        return bisect.bisect_right(self.line_starts, offset) - 1

    def position(self, offset: int) -> tuple[int, int]:
        line = self.line(offset)
        return line + 1, offset - self.line_starts[line] + 1

    def fail(self, message: str, offset: int) -> TemplateError:
        line, column = self.position(offset)
        return TemplateError(message, line=line, column=column)

    def standalone(self, start: int, end: int) -> tuple[int, int] | None:
        """If the tag [start, end) is alone on its line, the span of that whole line (with its
        newline). Each line's leading blanks are measured once, so a long line costs no rescans."""
        line = self.line(start)
        first = self._first_mark.get(line)
        if first is None:
            blanks = _BLANKS.match(self.source, self.line_starts[line])
            first = self._first_mark[line] = blanks.end() if blanks else self.line_starts[line]
        if first < start:
            return None
        trailing = _LINE_END.match(self.source, end)
        if trailing is None:
            return None
        return self.line_starts[line], trailing.end()


def parse(source: str) -> Template:
    """Parse ``source`` or raise TemplateError naming the fault and its position."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateError(
            f"the template is {len(source):,} characters long; the most is {MAX_TEMPLATE_CHARS:,}",
            line=1,
            column=1,
        )
    scanner = _Scanner(source)
    tree = _Tree(scanner)
    open_tag, close_tag = "{{", "}}"
    pos = 0
    text_start = 0
    while (start := source.find(open_tag, pos)) != -1:
        sigil, body, tag_end = _tag(scanner, start, open_tag, close_tag)
        span = scanner.standalone(start, tag_end) if sigil in "#^/!=" else None
        tree.text(source[text_start : span[0] if span else start])
        text_start = pos = span[1] if span else tag_end
        if sigil == "=":
            open_tag, close_tag = _delimiters(body, scanner, start)
        elif sigil == ">":
            tree.current.append(_partial(body.strip(), scanner, start))
        elif sigil != "!":
            tree.tag(sigil, body.strip(), start)
    tree.text(source[text_start:])
    return Template(source, tree.finish())


def _tag(scanner: _Scanner, start: int, open_tag: str, close_tag: str) -> tuple[str, str, int]:
    """The tag at ``start``: its sigil ("" for a variable), its body and where it ends."""
    source = scanner.source
    inner_start = start + len(open_tag)
    sigil = source[inner_start : inner_start + 1]
    if open_tag == "{{" and sigil == "{":  # {{{name}}}
        end = source.find("}" + close_tag, inner_start)
        if end == -1:
            raise scanner.fail("unclosed tag '{{{'", start)
        return "&", source[inner_start + 1 : end], end + 1 + len(close_tag)
    end = source.find(close_tag, inner_start)
    if end == -1:
        raise scanner.fail(f"unclosed tag {open_tag!r}", start)
    body, tag_end = source[inner_start:end], end + len(close_tag)
    if sigil not in "#^/!=>&" or not sigil:
        return "", body, tag_end
    if sigil == "=" and not body[1:].endswith("="):
        raise scanner.fail("set-delimiter tag must end with '='", start)
    return sigil, body[1:], tag_end


def _delimiters(body: str, scanner: _Scanner, start: int) -> tuple[str, str]:
    parts = body[:-1].split()
    if len(parts) != 2 or any("=" in p for p in parts):
        raise scanner.fail("set-delimiter needs two delimiters, e.g. {{=<% %>=}}", start)
    return parts[0], parts[1]


class _Tree:
    """The nodes being built: the open sections (with their tag offsets) and where text goes."""

    def __init__(self, scanner: _Scanner) -> None:
        self.scanner = scanner
        self.root: list[Node] = []
        self.stack: list[tuple[Section, int]] = []
        self.current = self.root

    def text(self, text: str) -> None:
        if text:
            self.current.append(text)

    def tag(self, sigil: str, name: str, start: int) -> None:
        """A variable, or a section's opening or closing tag."""
        if name == ".":
            raise self.scanner.fail(
                "the implicit iterator {{.}} is not supported; use the argument name", start
            )
        if not NAME_RE.fullmatch(name):
            raise self.scanner.fail(f"invalid name {name!r} in tag", start)
        line, column = self.scanner.position(start)
        if sigil in ("#", "^"):
            if len(self.stack) >= MAX_DEPTH:
                raise self.scanner.fail(f"sections nest more than {MAX_DEPTH} deep", start)
            section = Section(name, sigil == "^", line, column)
            self.current.append(section)
            self.stack.append((section, start))
            self.current = section.children
        elif sigil == "/":
            self._close(name, start)
        else:
            self.current.append(Variable(name, line, column))

    def _close(self, name: str, start: int) -> None:
        if not self.stack:
            raise self.scanner.fail(f"closing tag {{{{/{name}}}}} without an open section", start)
        section, _ = self.stack.pop()
        if section.name != name:
            raise self.scanner.fail(
                f"closing tag {{{{/{name}}}}} does not match open section {section.name!r} "
                f"(line {section.line}, column {section.column})",
                start,
            )
        self.current = self.stack[-1][0].children if self.stack else self.root

    def finish(self) -> list[Node]:
        if self.stack:
            section, offset = self.stack[-1]
            raise self.scanner.fail(f"section {section.name!r} is never closed", offset)
        return self.root


def _partial(ref: str, scanner: _Scanner, start: int) -> Partial:
    name, at, selector = ref.partition("@")
    if not PROMPT_NAME_RE.fullmatch(name):
        raise scanner.fail(f"invalid prompt name {name!r} in partial tag", start)
    if at and not (
        ascii_number(selector) is not None
        or (LABEL_RE.fullmatch(selector) and not selector.isdigit())
    ):
        raise scanner.fail(
            f"invalid version or label {selector!r} after '@' in partial {ref!r}", start
        )
    line, column = scanner.position(start)
    return Partial(name, selector if at else None, line, column)


class _Compiled:
    """Parsed templates by source, kept while they fit in a budget of characters (templates are
    immutable values: a version's, once parsed, serves every render of it)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self.items: OrderedDict[str, Template] = OrderedDict()

    def get(self, source: str) -> Template:
        found = self.items.get(source)
        if found is not None:
            self.items.move_to_end(source)
            return found
        template = parse(source)
        if len(source) <= self.budget:
            self.items[source] = template
            self.size += len(source)
            while self.size > self.budget:
                dropped, _ = self.items.popitem(last=False)
                self.size -= len(dropped)
        return template


_COMPILED = _Compiled(budget=32 * MAX_TEMPLATE_CHARS)


def is_uri_template(uri: str) -> bool:
    """Whether a content block's URI is a template over the arguments (else a literal URI)."""
    return "{{" in uri


def compiled(source: str) -> Template:
    """``parse(source)``, from the parsed templates kept when the same source was seen before."""
    return _COMPILED.get(source)

"""A logic-less Mustache subset: parsed once when a version is written, rendered in one linear pass.

Supported: variables ``{{name}}`` (also ``{{{name}}}`` and ``{{&name}}``; nothing is ever escaped),
sections ``{{#name}}…{{/name}}`` (rendered when the value is non-empty), inverted sections
``{{^name}}…{{/name}}`` (rendered when it is empty), comments ``{{! … }}`` and set-delimiter
``{{=<% %>=}}``. Section, comment and delimiter tags alone on a line take the line with them, as the
Mustache spec says. Partials are reserved for prompt composition and refused for now.

A value is inserted verbatim and never parsed again, so arguments cannot inject template syntax.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from registry.errors import InvalidInput

NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


class TemplateError(InvalidInput):
    """A template that cannot be accepted; carries the 1-based line and column of the fault."""

    code = "template_error"

    def __init__(self, message: str, *, line: int, column: int) -> None:
        super().__init__(f"{message} at line {line}, column {column}", line=line, column=column)
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


Node = str | Variable | Section


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

    def render(self, values: Mapping[str, str]) -> str:
        out: list[str] = []
        _render(self.nodes, values, out)
        return "".join(out)


def _render(nodes: list[Node], values: Mapping[str, str], out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, Variable):
            out.append(values.get(node.name, ""))
        elif bool(values.get(node.name)) != node.inverted:
            _render(node.children, values, out)


class _Scanner:
    def __init__(self, source: str) -> None:
        self.source = source
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == "\n"]

    def position(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:  # the last line start <= offset
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.line_starts[lo] + 1

    def fail(self, message: str, offset: int) -> TemplateError:
        line, column = self.position(offset)
        return TemplateError(message, line=line, column=column)


def _standalone(source: str, start: int, end: int) -> tuple[int, int] | None:
    """If the tag [start, end) is alone on its line, the span of that whole line (with its newline)."""
    line_start = source.rfind("\n", 0, start) + 1
    if source[line_start:start].strip(" \t"):
        return None
    newline = source.find("\n", end)
    line_end = len(source) if newline == -1 else newline + 1
    if source[end:line_end].strip(" \t\r\n"):
        return None
    return line_start, line_end


def parse(source: str) -> Template:
    """Parse ``source`` or raise TemplateError naming the fault and its position."""
    scanner = _Scanner(source)
    root: list[Node] = []
    stack: list[tuple[Section, int]] = []  # open sections and their tag offsets
    current = root
    open_tag, close_tag = "{{", "}}"
    pos = 0
    text_start = 0

    def emit_text(upto: int) -> None:
        if upto > text_start:
            current.append(source[text_start:upto])

    while True:
        start = source.find(open_tag, pos)
        if start == -1:
            break
        inner_start = start + len(open_tag)
        sigil = source[inner_start : inner_start + 1]
        if open_tag == "{{" and sigil == "{":  # {{{name}}}
            end = source.find("}" + close_tag, inner_start)
            if end == -1:
                raise scanner.fail("unclosed tag '{{{'", start)
            body, tag_end = source[inner_start + 1 : end], end + 1 + len(close_tag)
            sigil = "&"
        else:
            end = source.find(close_tag, inner_start)
            if end == -1:
                raise scanner.fail(f"unclosed tag {open_tag!r}", start)
            body, tag_end = source[inner_start:end], end + len(close_tag)
            if sigil in "#^/!=>&":
                body = body[1:]
            else:
                sigil = ""
        if sigil == "=" and not body.endswith("="):
            raise scanner.fail("set-delimiter tag must end with '='", start)

        span = _standalone(source, start, tag_end) if sigil in "#^/!=" else None
        emit_text(span[0] if span else start)
        text_start = span[1] if span else tag_end
        pos = text_start

        if sigil == "!":
            continue
        if sigil == "=":
            parts = body[:-1].split()
            if len(parts) != 2 or any("=" in p for p in parts):
                raise scanner.fail("set-delimiter needs two delimiters, e.g. {{=<% %>=}}", start)
            open_tag, close_tag = parts
            continue
        if sigil == ">":
            raise scanner.fail("partials ({{> name}}) are not supported", start)

        name = body.strip()
        if name == ".":
            raise scanner.fail(
                "the implicit iterator {{.}} is not supported; use the argument name", start
            )
        if not NAME_RE.fullmatch(name):
            raise scanner.fail(f"invalid name {name!r} in tag", start)
        line, column = scanner.position(start)
        if sigil in ("#", "^"):
            section = Section(name, sigil == "^", line, column)
            current.append(section)
            stack.append((section, start))
            current = section.children
        elif sigil == "/":
            if not stack:
                raise scanner.fail(f"closing tag {{{{/{name}}}}} without an open section", start)
            section, _ = stack.pop()
            if section.name != name:
                raise scanner.fail(
                    f"closing tag {{{{/{name}}}}} does not match open section {section.name!r} "
                    f"(line {section.line}, column {section.column})",
                    start,
                )
            current = stack[-1][0].children if stack else root
        else:
            current.append(Variable(name, line, column))

    emit_text(len(source))
    if stack:
        section, offset = stack[-1]
        raise scanner.fail(f"section {section.name!r} is never closed", offset)
    return Template(source, root)

"""Argument contracts: what a caller may send to a version, compared between two versions.

A change is breaking when a call that the old version accepted could fail, or mean something else,
on the new one: an argument removed (or renamed: removed and added), a new required argument, an
optional argument made required, an enum narrowed (or one added where any value was accepted), a
pattern added or changed (whether one regular expression accepts everything another does is not
decided here, so any change to a pattern counts as tightening, unless it is removed), a maximum
length lowered or added, a default removed. Everything else (a new optional argument, a widened
enum, a longer or removed limit, a changed default, descriptions) is compatible.

Moving a protected label checks the contract of the version it would serve against the one it
serves now (``registry.prompts.writing.move_label``); the diff lists every change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from registry.prompts.schemas import ContractChange, DeclaredArgument


def _change(argument: str, change: str, breaking: bool, detail: str) -> ContractChange:
    return ContractChange(argument=argument, change=change, breaking=breaking, detail=detail)


def _shown(values: Iterable[Any]) -> str:
    return ", ".join(repr(v) for v in sorted(values))


def compare(
    old: Iterable[DeclaredArgument], new: Iterable[DeclaredArgument]
) -> list[ContractChange]:
    """Every contract change from ``old`` to ``new``, breaking ones first, by argument name."""
    before = {a.name: a for a in old}
    after = {a.name: a for a in new}
    changes: list[ContractChange] = []
    for name in sorted(before.keys() - after.keys()):
        changes.append(_change(name, "removed", True, f"argument {name!r} was removed"))
    for name in sorted(after.keys() - before.keys()):
        required = after[name].required
        changes.append(
            _change(
                name,
                "added",
                required,
                f"required argument {name!r} was added"
                if required
                else f"optional argument {name!r} was added",
            )
        )
    for name in sorted(before.keys() & after.keys()):
        changes.extend(_argument_changes(name, before[name], after[name]))
    changes.sort(key=lambda c: (not c.breaking, c.argument, c.change))
    return changes


def _argument_changes(name: str, a: DeclaredArgument, b: DeclaredArgument) -> list[ContractChange]:
    changes = []
    if a.required != b.required:
        changes.append(
            _change(
                name,
                "required",
                b.required,
                f"argument {name!r} is now {'required' if b.required else 'optional'}",
            )
        )
    if a.enum != b.enum:
        old, new = set(a.enum or ()), set(b.enum or ())
        if b.enum is None:
            changes.append(_change(name, "enum", False, f"argument {name!r} takes any value now"))
        elif a.enum is None:
            changes.append(
                _change(name, "enum", True, f"argument {name!r} is limited to {_shown(new)} now")
            )
        elif old - new:
            changes.append(
                _change(
                    name, "enum", True, f"argument {name!r} no longer accepts {_shown(old - new)}"
                )
            )
        elif new - old:
            changes.append(
                _change(name, "enum", False, f"argument {name!r} also accepts {_shown(new - old)}")
            )
    if a.pattern != b.pattern:
        if b.pattern is None:
            changes.append(_change(name, "pattern", False, f"argument {name!r} has no pattern now"))
        else:
            changes.append(
                _change(
                    name,
                    "pattern",
                    True,
                    f"argument {name!r} must match {b.pattern!r} now"
                    + (f" (was {a.pattern!r})" if a.pattern is not None else ""),
                )
            )
    if a.max_length != b.max_length:
        tighter = b.max_length is not None and (a.max_length is None or b.max_length < a.max_length)
        limit = "no limit" if b.max_length is None else f"at most {b.max_length} characters"
        changes.append(_change(name, "max_length", tighter, f"argument {name!r} takes {limit} now"))
    if a.default != b.default:
        if b.default is None:
            changes.append(
                _change(name, "default", not b.required, f"argument {name!r} has no default now")
            )
        else:
            changes.append(
                _change(name, "default", False, f"argument {name!r} defaults to {b.default!r} now")
            )
    return changes


def breaking(changes: Iterable[ContractChange]) -> list[ContractChange]:
    return [c for c in changes if c.breaking]

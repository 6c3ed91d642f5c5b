"""Templates are bounded and handled in linear, iterative steps: what is accepted always renders."""

from __future__ import annotations

import re

import pytest

from registry.templates import mustache
from registry.templates.mustache import MAX_DEPTH, MAX_TEMPLATE_CHARS, TemplateError, parse


def test_nesting_is_bounded_and_the_deepest_accepted_renders() -> None:
    deepest = "{{#a}}" * MAX_DEPTH + "x" + "{{/a}}" * MAX_DEPTH
    assert parse(deepest).render({"a": "1"}) == "x"
    with pytest.raises(TemplateError, match=f"nest more than {MAX_DEPTH} deep"):
        parse("{{#a}}" * 1500 + "{{/a}}" * 1500)  # a recursive renderer failed on this one


def test_size_is_bounded() -> None:
    with pytest.raises(TemplateError, match="characters long; the most is"):
        parse("x" * (MAX_TEMPLATE_CHARS + 1))


class _Counting:
    """A stand-in for a compiled pattern that counts the characters its matches start from."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def match(self, source: str, pos: int = 0) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.match(source, pos)


def test_a_long_line_is_measured_once_not_once_per_tag(monkeypatch: pytest.MonkeyPatch) -> None:
    counting = _Counting(mustache._BLANKS)
    monkeypatch.setattr(mustache, "_BLANKS", counting)
    line = "{{#a}}{{a}}{{/a}}" * 20_000  # 40,000 standalone candidates on one line
    template = parse(line + "\n" + line)
    assert counting.calls == 2  # one per line
    assert template.render({"a": "y"}) == ("y" * 20_000) + "\n" + ("y" * 20_000)


def test_parsed_templates_are_kept_for_reuse() -> None:
    source = "Hello {{who}}, from the cache test"
    assert mustache.compiled(source) is mustache.compiled(source)
    with pytest.raises(TemplateError):
        mustache.compiled("{{#never closed")

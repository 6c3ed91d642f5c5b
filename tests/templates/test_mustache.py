"""The Mustache subset: rendering rules, standalone lines, and errors with their positions."""

from __future__ import annotations

import pytest

from registry.templates.mustache import TemplateError, parse


@pytest.mark.parametrize(
    ("source", "values", "expected"),
    [
        ("Hello {{who}}!", {"who": "Ann"}, "Hello Ann!"),
        ("Hello {{ who }}!", {"who": "Ann"}, "Hello Ann!"),
        ("{{{who}}} {{&who}}", {"who": "<b>"}, "<b> <b>"),  # never HTML-escaped
        ("{{who}}", {"who": "<b>&"}, "<b>&"),
        ("a{{#x}}[{{x}}]{{/x}}b", {"x": "1"}, "a[1]b"),
        ("a{{#x}}[{{x}}]{{/x}}b", {"x": ""}, "ab"),
        ("a{{^x}}none{{/x}}b", {}, "anoneb"),
        ("a{{^x}}none{{/x}}b", {"x": "set"}, "ab"),
        ("a{{! a comment }}b", {}, "ab"),
        ("{{=<% %>=}}{{literal}} <%x%>", {"x": "1"}, "{{literal}} 1"),
        ("missing: [{{y}}]", {}, "missing: []"),
        # Standalone section and comment lines vanish with their newline.
        ("Intro\n{{#x}}\nX is {{x}}\n{{/x}}\nEnd\n", {"x": "1"}, "Intro\nX is 1\nEnd\n"),
        ("Intro\n  {{! note }}  \nEnd", {}, "Intro\nEnd"),
        ("Intro\n{{^x}}\nno x\n{{/x}}\n", {}, "Intro\nno x\n"),
    ],
)
def test_render(source: str, values: dict[str, str], expected: str) -> None:
    assert parse(source).render(values) == expected


def test_values_are_inserted_verbatim_never_parsed_again() -> None:
    template = parse("{{a}}|{{b}}")
    assert template.render({"a": "{{b}}", "b": "{{#a}}x{{/a}}"}) == "{{b}}|{{#a}}x{{/a}}"


def test_variables_are_listed_with_positions() -> None:
    template = parse("Hi {{who}}\n{{#extra}}{{more}}{{/extra}}")
    found = [(v.name, v.line, v.column) for v in template.variables()]
    assert found == [("who", 1, 4), ("extra", 2, 1), ("more", 2, 11)]


@pytest.mark.parametrize(
    ("source", "message", "line", "column"),
    [
        ("ok\n{{#a}}x", "section 'a' is never closed", 2, 1),
        ("{{/a}}", "without an open section", 1, 1),
        ("{{#a}}\n  {{/b}}", "does not match open section 'a'", 2, 3),
        ("x {{bad name}}", "invalid name 'bad name'", 1, 3),
        ("x\ny {{who", "unclosed tag", 2, 3),
        ("{{> bad name}}", "invalid prompt name", 1, 1),
        ("x {{> a@B!}}", "invalid version or label", 1, 3),
        ("{{.}}", "implicit iterator", 1, 1),
        ("{{=<% %>}}", "set-delimiter", 1, 1),
        ("{{{x}}", "unclosed tag", 1, 1),
    ],
)
def test_syntax_errors_name_the_position(source: str, message: str, line: int, column: int) -> None:
    with pytest.raises(TemplateError, match=message) as caught:
        parse(source)
    assert (caught.value.line, caught.value.column) == (line, column)
    assert f"at line {line}, column {column}" in caught.value.message


def test_large_template_renders_in_one_pass() -> None:
    # 20,000 tags and 1 MB of values: a quadratic renderer would take minutes here.
    source = "{{a}} {{#b}}{{b}}{{/b}}\n" * 10_000
    out = parse(source).render({"a": "x" * 50, "b": "y" * 50})
    assert len(out) == 10_000 * 102


def test_partial_tags_parse_with_their_selector_and_position() -> None:
    template = parse("a {{> intro}}\n{{#x}}{{> tone@staging}}{{/x}} {{>  sig@3 }}")
    found = [(p.name, p.selector, p.line, p.column, p.ref) for p in template.partials()]
    assert found == [
        ("intro", None, 1, 3, "intro"),
        ("tone", "staging", 2, 7, "tone@staging"),
        ("sig", "3", 2, 32, "sig@3"),
    ]


def test_expand_puts_children_in_place_inline_and_inside_sections() -> None:
    parent = parse("[{{> a}}]{{#on}}<{{> b}}>{{/on}}")
    children = {"a": parse("A={{x}}"), "b": parse("B{{^x}}!{{/x}}")}
    expanded = parent.expand(children)
    assert expanded.render({"x": "1", "on": "y"}) == "[A=1]<B>"
    assert expanded.render({"x": "", "on": "y"}) == "[A=]<B!>"
    assert sorted({v.name for v in expanded.variables()}) == ["on", "x"]
    assert next(expanded.partials(), None) is None
    plain = parse("no partials")
    assert plain.expand({}) is plain


def test_an_unexpanded_partial_never_renders_silently() -> None:
    with pytest.raises(TemplateError, match="partial 'a' was not resolved"):
        parse("{{> a}}").render({})

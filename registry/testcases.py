"""Test cases stored with a prompt (or a skill): the arguments of a rendering, and what that rendering
must be. Pure and deterministic: a case is checked against a rendering, nothing calls a model.

A rendering is checked as its messages (each a role and content blocks) and as its text: the text of
every text block (and of embedded text resources), messages joined by a blank line. A skill's case
checks its SKILL.md, as one user message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator, model_validator

from registry import jsonschemas
from registry.errors import RegistryError
from registry.inputs import StrictInput
from registry.inputs import json_schema as a_json_schema
from registry.naming import LABEL_PATTERN, MAX_VERSION
from registry.templates.arguments import compile_pattern

MAX_CASES = 50  # test cases one prompt or skill carries
CASE_NAME_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,62}$"
MAX_TEXT = 200_000  # characters of an expected text (equals, a golden message)
MAX_SHOWN = 2_000  # characters of a rendering quoted in a failure


class GoldenMessage(StrictInput):
    role: Literal["user", "assistant"]
    text: str = Field(max_length=MAX_TEXT)


class Expect(StrictInput):
    """What a rendering must be; every expectation given must hold."""

    contains: list[str] = Field(default_factory=list, max_length=32)
    not_contains: list[str] = Field(default_factory=list, max_length=32)
    matches: str | None = Field(
        default=None, max_length=1000, description="an RE2 pattern the text must match (search)"
    )
    equals: str | None = Field(default=None, max_length=MAX_TEXT)
    max_length: int | None = Field(default=None, ge=0, le=10_000_000)
    roles: list[Literal["user", "assistant"]] | None = Field(
        default=None, max_length=256, description="every message's role, in order"
    )
    json_: bool = Field(default=False, alias="json", description="the text is one JSON document")
    json_schema: dict[str, Any] | None = Field(
        default=None, description="the text is JSON valid against this JSON Schema"
    )
    golden: list[GoldenMessage] | None = Field(
        default=None,
        max_length=256,
        description="the stored rendering: every message's role and text",
    )

    @field_validator("contains", "not_contains")
    @classmethod
    def _bounded_texts(cls, values: list[str]) -> list[str]:
        for value in values:
            if not value or len(value) > 10_000:
                raise ValueError("each text is 1 to 10,000 characters")
        return values

    @field_validator("matches")
    @classmethod
    def _a_pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                compile_pattern(value)
            except RegistryError as error:
                raise ValueError(str(error)) from None
        return value

    _json_schema_valid = field_validator("json_schema")(a_json_schema)


class TestCase(StrictInput):
    __test__ = False  # not a pytest class

    name: str = Field(pattern=CASE_NAME_PATTERN)
    arguments: dict[str, str] = Field(default_factory=dict, max_length=64)
    expect: Expect


def stored(cases: Sequence[TestCase]) -> list[dict[str, Any]]:
    """Test cases as a prompt or skill stores them (and bundles compare them): JSON, defaults out."""
    return [case.model_dump(mode="json", by_alias=True, exclude_defaults=True) for case in cases]


def loaded(rows: Sequence[dict[str, Any]] | None) -> list[TestCase]:
    """Test cases as stored, read back."""
    return [TestCase.model_validate(row) for row in rows or []]


def unique_cases(cases: list[TestCase]) -> list[TestCase]:
    """``cases`` if their names are unique (a validator of every list of cases)."""
    seen: set[str] = set()
    for case in cases:
        if case.name in seen:
            raise ValueError(f"two test cases are named {case.name!r}")
        seen.add(case.name)
    return cases


# A prompt's (or skill's) test cases: at most MAX_CASES, names unique.
TestCases = Annotated[
    list[TestCase],
    Field(max_length=MAX_CASES, description="test cases run on every version written"),
    AfterValidator(unique_cases),
]


class TestRequest(StrictInput):
    """Run the test cases of a prompt or skill (or the cases given) on a version, or on what a
    label serves (neither: the latest version)."""

    __test__ = False

    version: int | None = Field(default=None, ge=1, le=MAX_VERSION)
    label: str | None = Field(default=None, pattern=LABEL_PATTERN)
    tests: TestCases | None = Field(
        default=None, description="these cases instead of the stored ones"
    )

    @model_validator(mode="after")
    def _one_selector(self) -> TestRequest:
        if self.version is not None and self.label is not None:
            raise ValueError("give version or label, not both")
        return self


class CaseResult(BaseModel):
    name: str
    passed: bool
    failures: list[str] = Field(default_factory=list)
    rendered: list[GoldenMessage] | None = Field(
        default=None, description="the rendering checked (a golden rendering to store, when right)"
    )


class TestRun(BaseModel):
    """The cases of one prompt (or skill) run on one of its versions."""

    __test__ = False

    version: int
    passed: int
    failed: int
    cases: list[CaseResult]

    @model_validator(mode="after")
    def _counted(self) -> TestRun:
        if self.passed + self.failed != len(self.cases):
            raise ValueError("passed and failed must count the cases")
        return self


def run(
    version: int, cases: Sequence[TestCase], render: Callable[[TestCase], list[dict[str, Any]]]
) -> TestRun:
    """Every case rendered with ``render`` (a rendering refused, such as for a missing argument,
    fails its case, saying so) and checked."""
    results = []
    with jsonschemas.budget():
        for case in cases:
            results.append(_run_case(case, render))
    passed = sum(r.passed for r in results)
    return TestRun(version=version, passed=passed, failed=len(results) - passed, cases=results)


def _run_case(case: TestCase, render: Callable[[TestCase], list[dict[str, Any]]]) -> CaseResult:
    try:
        messages = render(case)
    except (RegistryError, ValueError) as error:  # a refused rendering: the case fails
        return CaseResult(name=case.name, passed=False, failures=[f"does not render: {error}"])
    failures = check(case.expect, messages)
    shown = [GoldenMessage(role=m["role"], text=_text_of(m)) for m in messages]
    return CaseResult(name=case.name, passed=not failures, failures=failures, rendered=shown)


def check(expect: Expect, messages: list[dict[str, Any]]) -> list[str]:
    """What ``messages`` fail of ``expect``, in words (empty: every expectation holds)."""
    text = "\n\n".join(_text_of(m) for m in messages)
    failures = [f"does not contain {want!r}" for want in expect.contains if want not in text]
    failures += [f"contains {bad!r}" for bad in expect.not_contains if bad in text]
    if expect.matches is not None and not compile_pattern(expect.matches).search(text):
        failures.append(f"does not match the pattern {expect.matches!r}")
    if expect.equals is not None and text != expect.equals:
        failures.append(f"is not the expected text: it is {_shown(text)}")
    if expect.max_length is not None and len(text) > expect.max_length:
        failures.append(f"is {len(text):,} characters long, more than {expect.max_length:,}")
    roles = [m["role"] for m in messages]
    if expect.roles is not None and roles != expect.roles:
        failures.append(f"has the roles {roles}, not {expect.roles}")
    failures += _json_failures(expect, text)
    if expect.golden is not None:
        failures += _golden_failures(expect.golden, messages)
    return failures


def _json_failures(expect: Expect, text: str) -> list[str]:
    if not (expect.json_ or expect.json_schema is not None):
        return []
    try:
        document = json.loads(text)
    except ValueError as error:
        return [f"is not JSON: {error}"]
    if expect.json_schema is None:
        return []
    try:
        errors = jsonschemas.errors(expect.json_schema, document)
    except jsonschemas.SchemaRefused as refused:
        return [f"cannot be checked against the schema: {refused}"]
    return [
        f"is JSON not valid against the schema (at {'/'.join(map(str, e.absolute_path)) or 'the top'}): "
        f"{e.message[:300]}"
        for e in errors
    ]


def _golden_failures(golden: list[GoldenMessage], messages: list[dict[str, Any]]) -> list[str]:
    if len(golden) != len(messages):
        return [f"has {len(messages)} message(s), the golden rendering {len(golden)}"]
    return [
        f"message {position} differs from the golden rendering: it is {m['role']}: {_shown(_text_of(m))}"
        for position, (want, m) in enumerate(zip(golden, messages, strict=True))
        if (want.role, want.text) != (m["role"], _text_of(m))
    ]


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "resource" and "text" in (block.get("resource") or {}):
            texts.append(str(block["resource"]["text"]))
    return "\n".join(texts)


def _shown(text: str) -> str:
    return repr(text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "…")

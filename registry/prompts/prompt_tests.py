"""A prompt's test cases run on one of its versions: rendered as prompts/get would (the one
renderer), checked by registry.testcases. Run at every version write (the answer shows the results;
they never block the write), on demand (``POST .../prompts/{name}/test``, ``registry test``) and on
the versions a change request moves labels to."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from registry.db.models import Prompt, Tenant
from registry.errors import NotFound
from registry.prompts import label_repository as label_repo
from registry.prompts import rendering
from registry.prompts.reading import find_prompt
from registry.testcases import TestCase, TestRequest, TestRun, loaded, run

# The longest argument value a stored case may pass (cases are an author's own text, bounded by the
# request that stored them; the render's output bound still applies).
MAX_VALUE_LENGTH = 100_000


async def run_tests(
    session: AsyncSession,
    tenant: Tenant,
    prompt: Prompt,
    version: int,
    cases: Sequence[TestCase] | None = None,
) -> TestRun:
    """``cases`` (else the prompt's own) run on ``version`` of ``prompt``: compiled once, each case
    rendered with its arguments and checked."""
    chosen = list(cases) if cases is not None else loaded(prompt.tests)
    if not chosen:
        return TestRun(version=version, passed=0, failed=0, cases=[])
    _, _, compiled = await rendering.served_version(
        session, tenant, prompt.name, version=version, label=None
    )
    blobs = await rendering.load_blobs(session, tenant.id, compiled.blobs)
    return run(
        version,
        chosen,
        lambda case: (
            rendering.render_compiled(
                compiled, case.arguments, blobs, max_value_length=MAX_VALUE_LENGTH
            ).messages
        ),
    )


async def test_prompt(
    session: AsyncSession, tenant: Tenant, name: str, request: TestRequest
) -> TestRun:
    """The prompt's cases (or the request's) on the version asked for: a number, what a label
    serves, or (neither) the latest version."""
    prompt = await find_prompt(session, tenant, name)
    version = request.version or prompt.latest_version
    if request.label is not None:
        found = await label_repo.label_version(session, prompt, request.label)
        if found is None:
            raise NotFound(f"prompt {name!r} has no label {request.label!r}", field="label")
        version = found
    elif version > prompt.latest_version:
        raise NotFound(f"prompt {name!r} has no version {version}", field="version")
    return await run_tests(session, tenant, prompt, version, request.tests)

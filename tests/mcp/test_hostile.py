"""Hostile input on the MCP endpoint: nothing kept, nothing stalled, never a 500."""

from __future__ import annotations

from tests.conftest import Api
from tests.mcp.test_stateless import Stateless, meta


async def test_refusals_are_cached_without_the_exception_or_its_request(api: Api) -> None:
    """A cached "unknown prompt" must not keep the exception: its traceback pins the frames, and so
    the params, of every request that raised it."""
    await api.tenant("pub", public_read=True)
    anonymous = Stateless(api.client, "/mcp/pub", {})
    padding = "x" * 100_000
    for _ in range(3):
        answer = await anonymous.post(
            "prompts/get", {"_meta": meta(), "name": "nope", "padding": padding}
        )
        assert answer.status_code == 200
        assert answer.json()["error"]["code"] == -32602
        assert "unknown prompt 'nope'" in answer.json()["error"]["message"]
    cached = [value for value, _ in api.app.mcp.caches.resolved._lru._items.values()]
    assert cached, "the refusal was not cached at all"
    for value in cached:
        assert not isinstance(value, BaseException)
        assert not any(isinstance(v, BaseException) for v in vars(value).values())

"""Plain routes: the REST writes a publisher sends all day, answered without FastAPI's routing and
dependency machinery when the request is the ordinary case; any other request of the same path goes
on to the FastAPI route, which answers it as it always did (its errors included).

A plain route comes first in the route table and matches its one method and path. Its endpoint is
given the request and the body, read once; it answers, or says None (a query string, a body that
is not a JSON object its model accepts...), and the request is routed again past it, with the body
it read handed on. The middleware (security headers, metrics by the route's template, the body
limit) and the error handlers are the same for both ways; the FastAPI route documents the path
(the plain route is not in the API description) and shares the endpoint's work (one function each
calls). What it bought: a version write, 6.04 million instructions of the worker through the
FastAPI route, is 4.54 million through its plain route (bench/instructions, rest-write; a quarter
less, as bench/history.md says).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, compile_path
from starlette.types import Receive, Scope, Send

from registry.api.auth import bearer
from registry.api.limits import replaying

# Set on a request's scope once its plain route passed it on: routed again, it goes past.
_PASSED = "registry.plain_passed"

Endpoint = Callable[[Request, bytes], Awaitable[Response | None]]
M = TypeVar("M", bound=BaseModel)


class PlainRoute(BaseRoute):
    """``method`` ``path`` answered by ``endpoint`` (None: routed on to the FastAPI route)."""

    def __init__(self, method: str, path: str, endpoint: Endpoint, router: Any) -> None:
        self.method = method
        self.path = path  # the template, as the FastAPI route's: what the metrics are labelled by
        self.endpoint = endpoint
        self.router = router  # routes the requests it passes on
        self.path_regex, self.path_format, self.param_convertors = compile_path(path)
        self.include_in_schema = False

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http" or scope["method"] != self.method or scope.get(_PASSED):
            return Match.NONE, {}
        if scope.get("root_path"):  # served under a prefix: FastAPI's routing knows how
            return Match.NONE, {}
        found = self.path_regex.match(scope["path"])
        if found is None:
            return Match.NONE, {}
        params = {k: self.param_convertors[k].convert(v) for k, v in found.groupdict().items()}
        return Match.FULL, {"path_params": {**scope.get("path_params", {}), **params}}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _body(receive)
        again = replaying(body, receive)
        scope["route"] = self
        response = await self.endpoint(Request(scope, again), body)
        if response is None:
            scope[_PASSED] = True
            await self.router.app(scope, again, send)
            return
        await response(scope, again, send)


async def _body(receive: Receive) -> bytes:
    """The request's whole body (the body limit's middleware bounds it)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def ordinary(request: Request) -> bool:
    """Whether a request is the ordinary case a plain endpoint may answer: no query string, and a
    credential (the prompts router's one dependency, ``auth.require_credential``, says 401 without
    one); else the FastAPI route answers."""
    return not request.scope["query_string"] and bearer(request) is not None


def parsed(
    request: Request, body: bytes, model: type[M], *, headers: tuple[str, ...] = ()
) -> M | None:
    """The body as ``model`` when the request is the ordinary case a plain endpoint answers
    (``ordinary``, a JSON body by its content type and as ``model`` accepts it, each of ``headers``
    at most once); else None, and the FastAPI route answers. Anything orjson reads, the standard
    library's parser that FastAPI uses reads alike; what orjson refuses goes on to it."""
    if not ordinary(request):
        return None
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/json":
        return None
    if any(len(request.headers.getlist(name)) > 1 for name in headers):
        return None
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def json_answer(model: BaseModel, answer: Response) -> Response:
    """``model`` as the FastAPI route's answer would carry it (its JSON by alias), with the status
    and headers that the shared work set on ``answer``."""
    extra = {k: v for k, v in answer.headers.items() if k not in ("content-length", "content-type")}
    return Response(
        model.model_dump_json(by_alias=True),
        status_code=answer.status_code,
        headers=extra,
        media_type="application/json",
    )

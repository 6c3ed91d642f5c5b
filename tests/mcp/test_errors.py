"""The one table from errors to JSON-RPC codes and HTTP statuses."""

from __future__ import annotations

from pydantic import BaseModel, ValidationError

from registry.errors import (
    Forbidden,
    InvalidInput,
    NotFound,
    RegistryError,
    Unauthenticated,
    Unavailable,
)
from registry.mcp import errors
from registry.sessions.service import SessionGone


def test_refusals_choose_code_and_status() -> None:
    cases: list[tuple[errors.McpError | RegistryError | SessionGone, int, int]] = [
        (errors.ParseError("x"), -32700, 400),
        (errors.InvalidRequest("x"), -32600, 400),
        (errors.BodyTooLarge("x"), -32600, 413),
        (errors.NotAcceptable("x"), -32600, 406),
        (errors.MethodNotAllowed("x", headers={"Allow": "POST"}), -32600, 405),
        (errors.MethodNotFound("x"), -32601, 404),
        (errors.InvalidParams("x"), -32602, 400),
        (errors.HeaderMismatch("x"), -32020, 400),
        (errors.UnsupportedVersion("x"), -32022, 400),
        (errors.Forbidden("x"), errors.UNAUTHORIZED, 403),
        (Unauthenticated("x"), errors.UNAUTHORIZED, 401),
        (Forbidden("x"), errors.UNAUTHORIZED, 403),
        (NotFound("x"), errors.NOT_FOUND, 404),
        (SessionGone(), errors.NOT_FOUND, 404),
        (Unavailable("x"), -32603, 503),
    ]
    for error, code, status in cases:
        answer = errors.refusal(error)
        assert (answer.code, answer.status) == (code, status), error
    assert errors.refusal(Unauthenticated("x")).headers["WWW-Authenticate"].startswith("Bearer")
    assert errors.refusal(errors.MethodNotAllowed("x", headers={"Allow": "POST"})).headers == {
        "Allow": "POST"
    }


def test_errors_inside_a_result_keep_their_code_and_hide_internals() -> None:
    class Params(BaseModel):
        name: str

    try:
        Params.model_validate({})
    except ValidationError as error:
        invalid = errors.in_result(error, "prompts/get")
    assert invalid.code == -32602 and "name" in invalid.message
    assert errors.in_result(NotFound("unknown prompt 'x'"), "prompts/get").code == -32602
    assert errors.in_result(InvalidInput("bad"), "prompts/get").code == -32602
    assert errors.in_result(errors.MethodNotFound("m"), "m").code == -32601
    internal = errors.in_result(RuntimeError("secret detail"), "prompts/get")
    assert internal.code == -32603
    assert "secret" not in internal.message and set(internal.data) == {"request_id"}

"""The registry's own tables of MCP revisions, methods, wire constants and error codes agree with the
official ``mcp-types`` package (pinned in constraints.txt): a release of it that adds a revision or a
method, or moves a constant, fails here. Serving never imports the package (each worker and command
would build every revision's models)."""

from __future__ import annotations

import mcp_types
import pytest
from mcp_types import jsonrpc, methods, version

from registry import revisions
from registry.mcp import errors, protocol
from tests.conftest import modules_loaded


def test_revisions_and_their_methods_are_the_official_ones() -> None:
    assert revisions.SESSION_REVISIONS == version.HANDSHAKE_PROTOCOL_VERSIONS
    assert revisions.STATELESS_REVISIONS == version.MODERN_PROTOCOL_VERSIONS
    assert revisions.ALL_REVISIONS == version.KNOWN_PROTOCOL_VERSIONS
    assert frozenset(methods.CLIENT_REQUESTS) == revisions.CLIENT_REQUESTS
    assert not revisions.EXTENSION_METHODS & {method for method, _ in methods.CLIENT_REQUESTS}


def test_ordering_is_the_official_one_and_unknown_names_are_never_newer() -> None:
    for name in [*version.KNOWN_PROTOCOL_VERSIONS, "zzz", "2099-01-01", ""]:
        for minimum in version.KNOWN_PROTOCOL_VERSIONS:
            assert revisions.at_least(name, minimum) == version.is_version_at_least(name, minimum)
    with pytest.raises(ValueError, match="not a revision"):
        revisions.at_least("2025-06-18", "2099-01-01")


def test_wire_constants_and_error_codes_are_the_official_ones() -> None:
    assert protocol.META_VERSION == mcp_types.PROTOCOL_VERSION_META_KEY
    assert protocol.META_CAPABILITIES == mcp_types.CLIENT_CAPABILITIES_META_KEY
    assert protocol.META_CLIENT == mcp_types.CLIENT_INFO_META_KEY
    assert protocol.META_SERVER == mcp_types.SERVER_INFO_META_KEY
    for code in (
        "PARSE_ERROR", "INVALID_REQUEST", "METHOD_NOT_FOUND", "INVALID_PARAMS", "INTERNAL_ERROR",
        "HEADER_MISMATCH", "UNSUPPORTED_PROTOCOL_VERSION",
    ):  # fmt: skip
        assert getattr(errors, code) == getattr(jsonrpc, code), code


def test_serving_does_not_import_the_package() -> None:
    assert modules_loaded("import registry.app, registry.mcp.stdio", ("mcp_types",)) == []

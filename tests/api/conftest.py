"""The REST API harness lives in tests/conftest.py, shared with the MCP tests."""

from tests.conftest import SIMPLE, Api, auth

__all__ = ["SIMPLE", "Api", "auth"]

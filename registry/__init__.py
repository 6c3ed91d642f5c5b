"""Prompt Registry: a multi-tenant registry of prompt templates served over MCP."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prompt-registry")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

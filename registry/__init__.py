"""Prompt Registry: a multi-tenant registry of prompt templates served over MCP."""


def __getattr__(name: str) -> str:
    """``registry.__version__``, read from the installed package's metadata when first asked for
    (reading it costs every process a scan of the installed distributions, and most `registry`
    commands never ask)."""
    if name != "__version__":
        raise AttributeError(f"module 'registry' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("prompt-registry")
    except PackageNotFoundError:  # running from a source tree that was not installed
        found = "0.0.0"
    globals()["__version__"] = found
    return found

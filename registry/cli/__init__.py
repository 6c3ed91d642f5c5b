"""The ``registry`` command, a package by command group: ``base`` (the group, the context every command
works in, the one error path), ``operating`` (serve, migrate, backup, restore, mcp-stdio),
``tenants`` (tenants, issuers, keys), ``webhooks`` (webhooks, snapshots), ``files`` (push, pull,
refresh, login). Importing the package registers every command on ``main``."""

from registry.cli import files, operating, tenants, webhooks
from registry.cli.base import main

__all__ = ["files", "main", "operating", "tenants", "webhooks"]

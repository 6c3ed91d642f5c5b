"""The ``registry`` command, a package by command group: ``base`` (the group, the context every command
works in, the one error path, and ``COMMANDS``: which module defines each command), ``operating``
(serve, migrate, backup, restore, mcp-stdio), ``tenants`` (tenants, issuers, keys), ``webhooks``
(webhooks, snapshots, verify-skill, verify-receipt), ``files`` (push, pull, refresh, login). A
command's module is imported when that command runs."""

from registry.cli.base import main

__all__ = ["main"]

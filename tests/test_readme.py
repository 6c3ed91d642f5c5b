"""The README's quick start is what CI runs."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def _quick_start_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", section)


def test_quick_start_is_two_commands_and_ci_runs_the_test_one() -> None:
    commands = _quick_start_commands()
    assert len(commands) == 2
    serve, test = commands
    assert "registry serve" in serve
    assert "pytest" in test
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci


def test_every_setting_is_in_the_configuration_table() -> None:
    from registry.config import ENV_PREFIX, Settings

    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    missing = [
        f"{ENV_PREFIX}{name.upper()}"
        for name in Settings.model_fields
        if f"`{ENV_PREFIX}{name.upper()}`" not in table
    ]
    assert not missing, f"settings missing from the README's table: {missing}"

"""The console editor's document (YAML), read without a browser: what the live check and a save
accept and refuse."""

from __future__ import annotations

import pytest

from registry.console.documents import parse
from registry.errors import InvalidInput
from tests.test_prompt_files import BOMB


def test_an_alias_bomb_is_refused_with_where_it_is() -> None:
    with pytest.raises(InvalidInput, match="anchors and aliases") as refused:
        parse(BOMB, commit_message=None)
    assert refused.value.detail == {"line": 1, "column": 4}


def test_a_plain_document_is_read() -> None:
    version = parse("messages:\n  - role: user\n    text: Hello.\n", commit_message="first")
    assert version.commit_message == "first"

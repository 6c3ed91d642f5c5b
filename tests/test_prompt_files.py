"""Reading prompt files (no server): front matter, the Markdown body, local files."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from registry.sync import FileError, read_prompt_file


def test_a_body_line_starting_with_dashes_stays_in_the_body(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text(
        "---\ndescription: Notes\narguments:\n  - name: topic\n---\n"
        "Summarise {{topic}}.\n--- notes\n----\nThe end.\n"
    )
    body = read_prompt_file(path)
    assert body["description"] == "Notes"
    assert body["messages"] == [
        {
            "role": "user",
            "content": {"type": "text", "text": "Summarise {{topic}}.\n--- notes\n----\nThe end."},
        }
    ]


def test_front_matter_without_its_closing_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "open.md"
    path.write_text("---\ndescription: Notes\n--- notes\nbody\n")
    with pytest.raises(FileError, match="no closing '---' line"):
        read_prompt_file(path)


def test_the_real_closing_line_never_moves_into_the_message(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("---\ndescription: Notes\n--- notes\nmore\n---\nThe body.\n")
    # The front matter runs to the line of exactly '---', so it holds '--- notes' (a YAML document
    # marker) and is refused as such, instead of ending early and moving '---' into the message.
    with pytest.raises(FileError, match="invalid YAML"):
        read_prompt_file(path)


def test_windows_line_endings_and_blank_front_matter(tmp_path: Path) -> None:
    path = tmp_path / "crlf.md"
    path.write_bytes(b"---\r\ntitle: T\r\n---\r\nHello\r\n")
    body = read_prompt_file(path)
    assert body["title"] == "T"
    assert body["messages"][0]["content"]["text"].strip() == "Hello"
    empty = tmp_path / "empty.md"
    empty.write_text("---\n---\nJust text\n")
    assert read_prompt_file(empty)["messages"][0]["content"]["text"] == "Just text"


def test_local_files_become_inline_bytes_where_each_kind_keeps_them(tmp_path: Path) -> None:
    (tmp_path / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\nxx")
    (tmp_path / "doc.txt").write_bytes(b"plain")
    path = tmp_path / "look.yaml"
    path.write_text(
        "messages:\n"
        "  - role: user\n    content: {type: image, file: pic.png}\n"
        "  - role: user\n    content: {type: resource, resource: {file: doc.txt}}\n"
    )
    image, resource = (m["content"] for m in read_prompt_file(path)["messages"])
    assert image == {
        "type": "image",
        "mimeType": "image/png",
        "data": base64.b64encode(b"\x89PNG\r\n\x1a\nxx").decode(),
    }
    assert resource["resource"]["blob"] == base64.b64encode(b"plain").decode()
    assert resource["resource"]["mimeType"] == "text/plain"
    assert resource["resource"]["uri"] == (tmp_path / "doc.txt").resolve().as_uri()


BOMB = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)  # about 400 bytes that a plain YAML loader expands into 9**9 strings


def test_yaml_aliases_and_huge_documents_are_refused_before_anything_is_built(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bomb.md"
    path.write_text(f"---\n{BOMB}---\nHello.\n")
    with pytest.raises(FileError, match=r"at line 2, column 4: anchors and aliases"):
        read_prompt_file(path)
    many = tmp_path / "many.md"
    many.write_text("---\ntags: [" + "x, " * 30_000 + "]\n---\nHello.\n")
    with pytest.raises(FileError, match="more than 20,000 values"):
        read_prompt_file(many)


def test_a_name_that_is_not_the_file_name_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "greet.yaml"
    path.write_text("name: greeting\nmessages:\n  - role: user\n    text: Hi\n")
    with pytest.raises(FileError, match=r"says name: greeting, but its file is greet\.yaml"):
        read_prompt_file(path)
    path.write_text("name: greet\nmessages:\n  - role: user\n    text: Hi\n")
    assert read_prompt_file(path)["name"] == "greet"

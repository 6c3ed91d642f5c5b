"""The mutation check stays runnable: each mutation still finds its line, once, and names tests that
exist (the check itself runs after the suite in CI: python -m bench.mutations), and there are at
least 40 of them (issue 68)."""

from __future__ import annotations

import os
from pathlib import Path

from bench.mutations import MUTATIONS, ROOT, Mutation, copy_tree, run


def test_every_mutation_applies_and_names_real_tests() -> None:
    for mutation in MUTATIONS:
        source = (ROOT / mutation.path).read_text()
        assert source.count(mutation.old) == 1, f"{mutation.name}: its line moved or repeats"
        for test in mutation.tests:
            path, _, name = test.partition("::")
            assert (ROOT / path).is_file(), f"{mutation.name}: no {path}"
            assert not name or f"def {name}(" in (ROOT / path).read_text(), (
                f"{mutation.name}: {test}"
            )
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS) >= 40


def test_a_harmless_edit_survives_and_a_broken_copy_is_an_error(tmp_path: Path) -> None:
    """The runner tells the three outcomes apart: a change no test sees survives, and a copy
    pytest cannot even load is an error (never a kill)."""
    first = (ROOT / "registry/tokens.py").read_text().splitlines()[0]
    tree = copy_tree(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    harmless = Mutation("harmless", "-", "registry/tokens.py", first, first + "  ",
                        ("tests/test_tokens.py",))  # fmt: skip
    assert run(harmless, tree, env, 120)[0] == "SURVIVED"
    broken = Mutation("broken", "-", "registry/tokens.py", first, "not python",
                      ("tests/test_tokens.py",))  # fmt: skip
    assert run(broken, tree, env, 120)[0].startswith("error")

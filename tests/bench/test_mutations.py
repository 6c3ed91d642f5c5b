"""The mutation check stays runnable: each mutation still finds its line, once, and names tests that
exist (the check itself runs after the suite in CI: python -m bench.mutations), and there are at
least 40 of them (issue 68)."""

from __future__ import annotations

from bench.mutations import MUTATIONS, ROOT


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

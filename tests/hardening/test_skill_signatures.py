"""A skill's signature covers its tenant: two tenants' skills of the same name, version and files
are signed apart, and each signature verifies for its own tenant only (issue 68: a signature
remembered without the tenant would be served to the other)."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from registry.signing import SignatureRefused, verify
from registry.skills.provenance import Signer, document

FILES = [("SKILL.md", "ab" * 32, 10)]


def test_two_tenants_same_skill_are_signed_apart() -> None:
    key = Ed25519PrivateKey.generate()
    signer = Signer(key)
    acme, other = document("acme", "review", 1, FILES), document("other", "review", 1, FILES)
    first, second = signer.signature(acme), signer.signature(other)
    assert first != second
    verify({"document": acme, "signature": first}, key.public_key())
    verify({"document": other, "signature": second}, key.public_key())
    with pytest.raises(SignatureRefused):
        verify({"document": other, "signature": first}, key.public_key())
    assert signer.signature(acme) == first  # remembered, for its own document

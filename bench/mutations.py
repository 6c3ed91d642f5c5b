"""A mutation check of the security-critical rules: each entry below changes one line the way a
careless edit would (a tenant dropped from a cache key, a check skipped, a comparison loosened), runs
the tests that guard that rule, and reports whether they failed (the mutation was killed) or passed
(it survived: the suite would let that bug land). The tree is restored after each, whatever happens.

    .venv/bin/python -m bench.mutations [--only NAME] [--report docs/mutations.md]

Not part of CI's time (a few minutes: each mutation runs its tests in a fresh process); the last
run's table is in docs/mutations.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    rule: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation(
        "role-order",
        "a role has what the roles below it have, and no more",
        "registry/principal.py",
        "return ROLE_RANK[self.role] >= ROLE_RANK[role]",
        "return ROLE_RANK[self.role] + 1 >= ROLE_RANK[role]",
        ("tests/api/test_tenants_api.py",),
    ),
    Mutation(
        "credential-cache-tenant",
        "a checked credential is kept per tenant",
        "registry/mcp/caching.py",
        "return tenant_id.int, hashlib.sha256(credential.encode()).digest()",
        "return 0, hashlib.sha256(credential.encode()).digest()",
        ("tests/test_isolation_matrix.py",),
    ),
    Mutation(
        "named-tenant-connection-wide",
        "the named tenant is set for the transaction only",
        "registry/db/repository.py",
        'func.set_config("registry.tenant_id", cast(Tenant.id, Text), True)',
        'func.set_config("registry.tenant_id", cast(Tenant.id, Text), False)',
        ("tests/db/test_hygiene.py",),
    ),
    Mutation(
        "tenant-connection-wide",
        "the tenant is set for the transaction only",
        "registry/db/repository.py",
        "\"SELECT set_config('role', :role, true), set_config('registry.tenant_id', :tenant, true), \"\n"
        "    + _GENERIC_PLANS",
        "\"SELECT set_config('role', :role, true), set_config('registry.tenant_id', :tenant, false), \"\n"
        "    + _GENERIC_PLANS",
        ("tests/db/test_hygiene.py",),
    ),
    Mutation(
        "protected-label-role",
        "a protected label moves only for a publisher",
        "registry/labels.py",
        'if label in tenant.protected_labels and not caller.has("publisher"):',
        "if False:",
        (
            "tests/api/test_prompts_api.py::test_labels_protection_history_and_latest",
            "tests/domain/test_skills.py::test_protected_labels_and_names",
        ),
    ),
    Mutation(
        "revoked-key",
        "a revoked key is refused",
        "registry/tenants/service.py",
        'if key.revoked_at is not None:\n        raise KeyRefused("this API key has been revoked")',
        'if False:\n        raise KeyRefused("this API key has been revoked")',
        ("tests/api/test_tenants_api.py", "tests/mcp/test_directory.py"),
    ),
    Mutation(
        "expired-key",
        "a key past its expiry is refused",
        "registry/tenants/service.py",
        "if key.expires_at is not None and key.expires_at <= now:",
        "if key.expires_at is not None and key.expires_at <= now - timedelta(days=3650):",
        ("tests/api/test_tenants_api.py", "tests/mcp/test_directory.py"),
    ),
    Mutation(
        "token-mac",
        "an opaque token (cursor, request state) opens only with its MAC",
        "registry/tokens.py",
        "if not hmac.compare_digest(given, self._tag(purpose, context, body)):",
        "if False:",
        ("tests/test_tokens.py",),
    ),
    Mutation(
        "webhook-secret-overlap",
        "a rotated-out webhook secret signs only inside its overlap",
        "registry/webhooks/delivery.py",
        'if row["previous_secret"] and row["previous_until"] and row["previous_until"] > now:',
        'if row["previous_secret"]:',
        ("tests/test_webhooks.py::test_a_rotated_out_secret_stops_signing_when_its_overlap_ends",),
    ),
    Mutation(
        "oauth-issuer-speaks-for-itself",
        "an introspection answer naming another issuer is refused",
        "registry/tenants/oauth.py",
        'if answer.get("iss", entry.issuer) != entry.issuer:',
        "if False:",
        ("tests/oauth/test_oauth.py::test_an_issuer_speaks_for_its_own_tokens_only",),
    ),
    Mutation(
        "oauth-audience",
        "a token minted for another resource is refused",
        "registry/tenants/oauth.py",
        "if value in (mcp, rest):",
        "if value in (mcp, rest) or value.startswith('http'):",
        ("tests/oauth/test_oauth.py::test_tokens_that_are_refused",),
    ),
    Mutation(
        "oauth-algorithms",
        "only asymmetric algorithms of the allow-list verify a token",
        "registry/tenants/oauth.py",
        "if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:",
        "if not isinstance(algorithm, str):",
        ("tests/oauth/test_oauth.py::test_tokens_that_are_refused",),
    ),
    Mutation(
        "anonymous-published-only",
        "anonymous readers read published labels only",
        "registry/tenants/access.py",
        "if not principal.anonymous or tenant.public_drafts:",
        "if True:",
        ("tests/mcp/test_hostile.py::test_anonymous_readers_see_published_labels_only",),
    ),
    Mutation(
        "contract-breaks",
        "a move that breaks a protected label's callers is refused",
        "registry/prompts/contracts.py",
        "return [c for c in changes if c.breaking]",
        "return []",
        ("tests/api/test_contracts.py",),
    ),
    Mutation(
        "cache-invalidation",
        "a tenant's cached answers go when the tenant changes",
        "registry/mcp/caching.py",
        "for cache in self.tenant_scoped():\n            cache.invalidate(tenant_id)",
        "for cache in self.tenant_scoped()[:0]:\n            cache.invalidate(tenant_id)",
        ("tests/mcp/test_answers.py", "tests/mcp/test_directory.py"),
    ),
    Mutation(
        "snapshot-signature",
        "a snapshot whose signature does not verify is refused",
        "registry/signing.py",
        'key.verify(signature, canonical(signed["document"]))',
        "pass",
        ("tests/test_client.py::test_cold_start_from_a_signed_snapshot_then_catch_up",),
    ),
    Mutation(
        "render-bound",
        "one render's text is bounded",
        "registry/prompts/rendering.py",
        "    _check_output(compiled, values, max_rendered_chars)\n",
        "",
        ("tests/api/test_partials.py::test_what_one_render_produces_is_bounded",),
    ),
    Mutation(
        "skill-file-digest",
        "a downloaded skill file whose bytes are not the manifest's fails verification",
        "registry/skills/provenance.py",
        'elif f"sha256:{hashlib.sha256(data).hexdigest()}" != expected[path]["digest"]:',
        "elif False:",
        ("tests/test_verify_skill.py",),
    ),
    Mutation(
        "skill-name-in-folder",
        "a skill's SKILL.md names the skill it is written for",
        "registry/skills/folder.py",
        'if parsed.get("name") != name:',
        "if False:",
        ("tests/domain/test_skills.py",),
    ),
    Mutation(
        "receipt-result",
        "a receipt verifies only beside the whole result it covers",
        "registry/receipts.py",
        'if digest(covered(answer)) != document.get("result"):',
        "if False:",
        (
            "tests/test_verify_skill.py::test_receipts_verify_and_a_changed_byte_does_not",
            "tests/hardening/test_receipts.py::test_every_tampering_is_refused",
        ),
    ),
    Mutation(
        "schema-references-local",
        "a tenant's JSON Schema refers only inside itself",
        "registry/jsonschemas.py",
        'if not isinstance(target, str) or not target.startswith("#"):',
        "if False:",
        ("tests/hardening/test_json_schemas.py",),
    ),
    Mutation(
        "approvals-count-people",
        "an author's other key never approves the author's request",
        "registry/change_requests/service.py",
        "    if me == people[request.author]:",
        "    if False:",
        ("tests/hardening/test_people.py",),
    ),
    Mutation(
        "enum-exact",
        "an argument's enum is matched as written, case and spaces included",
        "registry/templates/arguments.py",
        "    if spec.enum is not None and value not in spec.enum:",
        "    if spec.enum is not None and value.strip().lower() not in [e.lower() for e in spec.enum]:",
        ("tests/api/test_change_request_rules.py::test_a_tools_enum_is_matched_exactly",),
    ),
    Mutation(
        "receipt-canonical-order",
        "a receipt's canonical form sorts object members, as RFC 8785 does",
        "registry/signing.py",
        "    return orjson.dumps(prepared, option=orjson.OPT_SORT_KEYS)",
        "    return orjson.dumps(prepared)",
        ("tests/hardening/test_receipts.py",),
    ),
    Mutation(
        "yaml-depth",
        "a YAML document (a skill's front matter, a prompt file) is bounded in depth",
        "registry/inputs.py",
        "            if depth > max_depth:",
        "            if False:",
        ("tests/hardening/test_skill_folders.py",),
    ),
    Mutation(
        "skill-paths-portable",
        "a skill's file path is one every host's file system holds as written",
        "registry/skills/folder.py",
        "        why = _not_portable(segment)",
        "        why = None",
        ("tests/hardening/test_skill_folders.py",),
    ),
    Mutation(
        "tools-off-by-default",
        "a tenant that did not turn tools on serves none",
        "registry/mcp/tool_calls.py",
        "    return tenant.mcp_tools",
        "    return True",
        ("tests/mcp/test_tools.py::test_tools_off_is_as_before",),
    ),
    Mutation(
        "free-form-numbers",
        "a free-form value holds only numbers an answer can carry",
        "registry/inputs.py",
        "if numbers and isinstance(item, int | float) and (why := number_refused(item)):",
        "if False:",
        (
            "tests/api/test_hostile.py::"
            "test_numbers_a_value_could_not_be_sent_back_as_are_refused_not_500",
        ),
    ),
    Mutation(
        "yaml-aliases",
        "YAML anchors and aliases are refused",
        "registry/inputs.py",
        'if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:',
        "if False:",
        ("tests/test_prompt_files.py", "tests/console/test_documents.py"),
    ),
    Mutation(
        "replay-tenant",
        "an answer sent again from the request's bytes needs the tenant as the worker holds it",
        "registry/mcp/replay.py",
        "directory.tenant(replay.tenant.slug) is not replay.tenant",
        "False",
        ("tests/mcp/test_replay.py",),
    ),
    Mutation(
        "replay-caller",
        "an answer sent again from the request's bytes needs the caller as the worker holds it",
        "registry/mcp/replay.py",
        "directory.principal_at(replay.credential) is not replay.principal",
        "False",
        ("tests/mcp/test_replay.py",),
    ),
    Mutation(
        "replay-answer",
        "an answer sent again from the request's bytes needs the answer the cache still holds",
        "registry/mcp/replay.py",
        "caches.answers.get(replay.tenant.id, replay.answer_key) is not replay.answer",
        "False",
        ("tests/mcp/test_replay.py",),
    ),
    Mutation(
        "kept-page-cursor",
        "a page asked with a cursor is kept only while that cursor opens",
        "registry/mcp/core.py",
        "until=call.valid_until",
        'until=float("inf")',
        ("tests/mcp/test_replay.py",),
    ),
    Mutation(
        "replay-cursor-age",
        "a list's page is sent again from the request's bytes only while its cursor is young",
        "registry/mcp/replay.py",
        "or not replay.answer.fresh()",
        "or False",
        ("tests/mcp/test_replay.py",),
    ),
)


def run(mutation: Mutation, timeout: float) -> tuple[str, float]:
    path = ROOT / mutation.path
    original = path.read_text()
    if original.count(mutation.old) != 1:
        return "not applied (the line moved: update the entry)", 0.0
    started = time.monotonic()
    try:
        path.write_text(original.replace(mutation.old, mutation.new))
        try:
            done = subprocess.run(  # noqa: S603 - this interpreter, pytest, the entry's tests
                [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider",
                 *mutation.tests],
                cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
            )  # fmt: skip
            outcome = "killed" if done.returncode != 0 else "SURVIVED"
        except subprocess.TimeoutExpired:
            outcome = "killed (the tests hung)"
    finally:
        path.write_text(original)
    return outcome, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", help="run only this mutation (repeatable)")
    parser.add_argument("--report", type=Path, help="write the table to this Markdown file")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    rows = []
    for mutation in chosen:
        outcome, seconds = run(mutation, args.timeout)
        print(f"{mutation.name:32} {outcome:10} {seconds:6.1f} s", flush=True)
        rows.append((mutation, outcome))
    survivors = [m.name for m, outcome in rows if outcome == "SURVIVED"]
    if args.report:
        lines = [
            "# Mutation check of the security-critical rules",
            "",
            "Each row changes one line of the registry as a careless edit would and runs the tests",
            "that guard the rule; `killed` means they failed, as they must. Produced by",
            "`.venv/bin/python -m bench.mutations --report docs/mutations.md` (the list of",
            "mutations and their tests is `bench/mutations.py`).",
            "",
            "| mutation | rule | tests | outcome |",
            "|---|---|---|---|",
            *(
                f"| `{m.name}` | {m.rule} | {', '.join(f'`{t}`' for t in m.tests)} | {outcome} |"
                for m, outcome in rows
            ),
            "",
            f"Survivors: {', '.join(survivors) if survivors else 'none'}.",
            "",
        ]
        args.report.write_text("\n".join(lines))
    return 1 if survivors else 0


if __name__ == "__main__":
    sys.exit(main())

"""Load a large, realistic dataset fast, with binary COPY (never row-by-row API calls).

    python -m bench.seed [--tenants 1000] [--prompts 1000] [--big 100000] [--seed 1]

By default: 1,000 tenants of 1,000 prompts each, every prompt with 1-5 immutable versions, 0-4 typed
arguments (required ones, enums, patterns, lengths), `latest` and `production` labels (a fifth also
`staging`), a few image blobs; one tenant `bench-big` with 100,000 prompts; and `bench-peer`, the
10,000 prompts the peer servers of bench/peers.py serve too, as prompts and as tools (bench/run
writes its skills through the admin API). The database is REGISTRY_DATABASE_URL (or the embedded
server); the connecting role must bypass row-level security
(the schema owner: the embedded server's superuser, or registry_owner of deploy/roles.sql).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from bench.peers import PEER_PROMPTS, PEER_TENANT, peer_prompt
from registry.db.connect import asyncpg_arguments
from registry.prompts.listing import entry_of_version
from registry.prompts.preparing import canonical_hash

BIG_TENANT = "bench-big"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8  # a small, real-looking image
TOPICS = [
    "billing",
    "refunds",
    "shipping",
    "onboarding",
    "security",
    "pricing",
    "support",
    "release",
]
TONES = ["formal", "casual", "friendly", "terse"]


@dataclass
class Rows:
    """Rows per table, in dependency order, ready for COPY."""

    tenants: list[tuple[Any, ...]] = field(default_factory=list)
    blobs: list[tuple[Any, ...]] = field(default_factory=list)
    prompts: list[tuple[Any, ...]] = field(default_factory=list)
    versions: list[tuple[Any, ...]] = field(default_factory=list)
    arguments: list[tuple[Any, ...]] = field(default_factory=list)
    messages: list[tuple[Any, ...]] = field(default_factory=list)
    labels: list[tuple[Any, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return sum(len(v) for v in vars(self).values())


def _arguments(rng: random.Random) -> list[dict[str, Any]]:
    chosen = rng.sample(["topic", "tone", "ticket", "audience"], rng.randint(0, 4))
    made = []
    for name in chosen:
        argument: dict[str, Any] = {
            "name": name,
            "title": name.title(),
            "description": f"the {name}",
            "required": False,
            "default": None,
            "enum": None,
            "pattern": None,
            "max_length": None,
            "suggestions": None,
        }
        if name == "topic":
            argument.update(required=True, suggestions=TOPICS)
        elif name == "tone":
            argument.update(enum=TONES, default="formal")
        elif name == "ticket":
            argument.update(required=rng.random() < 0.5, pattern="[A-Z]+-[0-9]+", max_length=16)
        else:
            argument.update(max_length=200)
        made.append(argument)
    return made


def _messages(
    rng: random.Random, name: str, version: int, arguments: list[dict[str, Any]], blob: str | None
) -> list[dict[str, Any]]:
    names = [a["name"] for a in arguments]
    body = " ".join(f"{{{{{n}}}}}" for n in names) or "the usual"
    text = (
        f"You are the {name} assistant (v{version}). Help with: {body}.\n"
        + "{{#ticket}}Ticket: {{ticket}}\n{{/ticket}}" * ("ticket" in names)
        + "Answer clearly and cite sources."
    )
    messages = [{"role": "user", "content": {"type": "text", "text": text}}]
    if rng.random() < 0.3:
        messages.append({"role": "assistant", "content": {"type": "text", "text": "Understood."}})
    if blob is not None:
        messages.append(
            {"role": "user", "content": {"type": "image", "mimeType": "image/png", "blob": blob}}
        )
    return messages


def tenant_rows(rows: Rows, rng: random.Random, slug: str, prompts: int) -> None:
    tenant_id = uuid.uuid4()
    # Public-read, as the peers have no credentials either; keyed access is measured on its own.
    rows.tenants.append((tenant_id, slug, f"Benchmark {slug}", True, False))
    sha = hashlib.sha256(PNG + slug.encode()).digest()  # a blob of its own per tenant
    rows.blobs.append((tenant_id, sha, "image/png", len(PNG) + len(slug), PNG + slug.encode()))
    for index in range(prompts):
        prompt_id = uuid.uuid4()
        name = f"prompt-{index:06d}"
        count = rng.randint(1, 5)
        rows.prompts.append((tenant_id, prompt_id, name, [rng.choice(TOPICS)], count, False))
        for version in range(1, count + 1):
            arguments = _arguments(rng)
            blob = sha.hex() if rng.random() < 0.01 else None
            messages = _messages(rng, name, version, arguments, blob)
            meta = {
                "title": f"{name} v{version}",
                "description": f"Prompt {name}, version {version}",
                "icons": None,
                "commit_message": f"version {version}",
            }
            digest = canonical_hash(meta, arguments, messages)
            rows.versions.append(
                (
                    tenant_id,
                    prompt_id,
                    version,
                    meta["title"],
                    meta["description"],
                    meta["commit_message"],
                    "bench",
                    digest,
                    entry_of_version(name, meta, arguments),
                )
            )
            for position, a in enumerate(arguments):
                rows.arguments.append(
                    (
                        tenant_id,
                        prompt_id,
                        version,
                        position,
                        a["name"],
                        a["title"],
                        a["description"],
                        a["required"],
                        a["default"],
                        a["enum"],
                        a["pattern"],
                        a["max_length"],
                        a["suggestions"],
                    )
                )
            for position, m in enumerate(messages):
                blob_ref = bytes.fromhex(m["content"]["blob"]) if m["content"].get("blob") else None
                rows.messages.append(
                    (
                        tenant_id,
                        prompt_id,
                        version,
                        position,
                        m["role"],
                        json.dumps(m["content"]),
                        blob_ref,
                    )
                )
        rows.labels.append((tenant_id, prompt_id, "latest", name, count, "bench"))
        rows.labels.append(
            (tenant_id, prompt_id, "production", name, rng.randint(1, count), "bench")
        )
        if rng.random() < 0.2:
            rows.labels.append((tenant_id, prompt_id, "staging", name, count, "bench"))


def peer_rows(rows: Rows, peers: int) -> None:
    """The tenant the peers are compared on: the same prompts they serve (the first ``peers`` of
    their 10,000), offered as tools too (its MCP tools on, every prompt marked)."""
    tenant_id = uuid.uuid4()
    rows.tenants.append((tenant_id, PEER_TENANT, "Benchmark peers", True, True))
    for index in range(peers):
        prompt = peer_prompt(index)
        prompt_id = uuid.uuid4()
        arguments = [
            {
                "name": a["name"],
                "title": None,
                "description": a["description"],
                "required": a.get("required", False),
                "default": a.get("default"),
                "enum": a.get("enum"),
                "pattern": None,
                "max_length": None,
                "suggestions": None,
            }
            for a in prompt["arguments"]
        ]
        messages = [{"role": "user", "content": {"type": "text", "text": prompt["text"]}}]
        meta = {
            "title": None,
            "description": prompt["description"],
            "icons": None,
            "commit_message": None,
        }
        rows.prompts.append((tenant_id, prompt_id, prompt["name"], [], 1, True))
        rows.versions.append(
            (
                tenant_id,
                prompt_id,
                1,
                None,
                prompt["description"],
                None,
                "bench",
                canonical_hash(meta, arguments, messages),
                entry_of_version(prompt["name"], meta, arguments),
            )
        )
        for position, a in enumerate(arguments):
            rows.arguments.append(
                (
                    tenant_id,
                    prompt_id,
                    1,
                    position,
                    a["name"],
                    None,
                    a["description"],
                    a["required"],
                    a["default"],
                    a["enum"],
                    None,
                    None,
                    None,
                )
            )
        rows.messages.append(
            (tenant_id, prompt_id, 1, 0, "user", json.dumps(messages[0]["content"]), None)
        )
        for label in ("latest", "production"):
            rows.labels.append((tenant_id, prompt_id, label, prompt["name"], 1, "bench"))


COPIES = [
    ("tenants", ["id", "slug", "title", "public_read", "mcp_tools"], "tenants"),
    ("blobs", ["tenant_id", "sha256", "mime_type", "size", "data"], "blobs"),
    ("prompts", ["tenant_id", "id", "name", "tags", "latest_version", "as_tool"], "prompts"),
    (
        "prompt_versions",
        [
            "tenant_id",
            "prompt_id",
            "version",
            "title",
            "description",
            "commit_message",
            "author",
            "content_hash",
            "list_entry",
        ],
        "versions",
    ),
    (
        "prompt_arguments",
        [
            "tenant_id",
            "prompt_id",
            "version",
            "position",
            "name",
            "title",
            "description",
            "required",
            "default",
            "enum",
            "pattern",
            "max_length",
            "suggestions",
        ],
        "arguments",
    ),
    (
        "prompt_messages",
        ["tenant_id", "prompt_id", "version", "position", "role", "content", "blob_sha256"],
        "messages",
    ),
    (
        "labels",
        ["tenant_id", "prompt_id", "label", "prompt_name", "version", "updated_by"],
        "labels",
    ),
]


async def copy_rows(connection: asyncpg.Connection, rows: Rows) -> None:
    async with connection.transaction():
        for table, columns, attribute in COPIES:
            records = getattr(rows, attribute)
            if records:
                await connection.copy_records_to_table(table, records=records, columns=columns)


def batches(
    tenants: int, prompts: int, big: int, seed: int, peers: int, per_batch: int = 50
) -> Iterator[Rows]:
    """Tenants in batches (bounded memory: a batch is committed before the next is made)."""
    rng = random.Random(seed)  # noqa: S311 - benchmark data, not security
    rows = Rows()
    for index in range(tenants):
        tenant_rows(rows, rng, f"bench-{index:04d}", prompts)
        if (index + 1) % per_batch == 0:
            yield rows
            rows = Rows()
    if big:
        tenant_rows(rows, rng, BIG_TENANT, big)
    peer_rows(rows, peers)
    if len(rows):
        yield rows


async def seed(
    url: str,
    *,
    tenants: int,
    prompts: int,
    big: int,
    seed: int,
    peers: int = PEER_PROMPTS,
    out: Any = sys.stderr,
) -> int:
    connection = await asyncpg.connect(**asyncpg_arguments(url))
    started, total = time.monotonic(), 0
    try:
        await connection.execute("SET jit = off")
        for rows in batches(tenants, prompts, big, seed, peers):
            await copy_rows(connection, rows)
            total += len(rows)
            print(
                f"seeded {total:,} rows in {time.monotonic() - started:.0f} s", file=out, flush=True
            )
        await connection.execute("ANALYZE")
    finally:
        await connection.close()
    return total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench/seed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--prompts", type=int, default=1000, help="prompts per tenant")
    parser.add_argument(
        "--big", type=int, default=100_000, help=f"prompts of the tenant {BIG_TENANT}"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="random seed (the same seed, the same data)"
    )
    parser.add_argument(
        "--peer-prompts",
        type=int,
        default=PEER_PROMPTS,
        help=f"prompts of the peers' tenant {PEER_TENANT} (bench/run --peer-prompts: as many or fewer)",
    )
    args = parser.parse_args(argv)
    if not 0 <= args.peer_prompts <= PEER_PROMPTS:
        parser.error(f"--peer-prompts: 0 to {PEER_PROMPTS}")

    from registry.db.attach import attached_database

    with attached_database() as url:
        total = asyncio.run(
            seed(
                url,
                tenants=args.tenants,
                prompts=args.prompts,
                big=args.big,
                seed=args.seed,
                peers=args.peer_prompts,
            )
        )
    print(f"done: {total:,} rows", file=sys.stderr)


if __name__ == "__main__":
    main()

"""A client for applications that use prompts at run time, made for their hot path.

    from registry.client import PromptClient

    with PromptClient("https://prompts.example", "acme", api_key, label="production",
                      snapshot="prompts.snapshot", snapshot_public_key="snapshot.pub") as prompts:
        answer = prompts.render("summarise", {"ticket": "OPS-7"})

``get`` and ``render`` answer from memory: the client holds every prompt the label serves (the same
records MCP ``prompts/get`` compiles) and renders locally with the server's own renderer and argument
checks, so a call costs no round trip. It follows the tenant's change stream: a change is fetched as
it commits (no polling, no time-to-live), so a publish reaches a running client as fast as the stream
tells it. While the registry is unreachable the client keeps answering from what it holds,
reconnects with growing, jittered delays (``backoff``: the first and the longest, 0.25 s and 5 s by
default, so it is back within about 5 s of the registry), and catches up from the last change it
applied; a cold
start with the registry down loads a snapshot file written by ``registry snapshot``, whose Ed25519
signature and tenant/label it checks first.

``AsyncPromptClient`` is the same for asyncio code (``await client.start()``, ``await client.close()``);
``PromptClient`` runs one in a thread of its own, which ``close`` stops and joins.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

from registry import signing
from registry.naming import APPLIED_EVENT, serves_change
from registry.prompts import rendering
from registry.prompts.rendering import CompiledVersion
from registry.prompts.schemas import RenderedPrompt
from registry.prompts.snapshots import FORMAT
from registry.templates.arguments import ArgumentSpec, InvalidArgument

__all__ = [
    "AsyncPromptClient",
    "ClientError",
    "InvalidArgument",
    "Prompt",
    "PromptClient",
    "PromptNotFound",
    "RegistryUnavailable",
    "SnapshotRefused",
]

MAX_LINE = 1 << 20  # one line of the change stream, at most
MAX_VALUE_LENGTH = 65_536


class ClientError(Exception):
    """Base of the client's own errors (a bad argument is ``InvalidArgument``, as on the server)."""


class PromptNotFound(ClientError, LookupError):
    """The label serves no prompt of that name (as far as the client knows)."""


class RegistryUnavailable(ClientError):
    """The client holds nothing yet: the registry could not be reached and no snapshot was given."""


class SnapshotRefused(ClientError):
    """A snapshot file that is not this tenant's and label's, or whose signature does not verify."""


@dataclass(frozen=True)
class Prompt:
    """A prompt as the client holds it."""

    name: str
    version: int
    description: str | None
    config: dict[str, Any] | None
    arguments: tuple[ArgumentSpec, ...]
    # The signed receipt of the record, when a live rollout decided which version this caller
    # gets: what ``report`` sends back with an outcome.
    receipt: dict[str, Any] | None = None


@dataclass(frozen=True)
class _Entry:
    prompt: Prompt
    compiled: CompiledVersion


class AsyncPromptClient:
    def __init__(
        self,
        url: str,
        tenant: str,
        api_key: str,
        *,
        label: str = "production",
        snapshot: str | Path | None = None,
        snapshot_public_key: str | Path | bytes | None = None,
        timeout: float = 5.0,
        idle_timeout: float = 90.0,
        backoff: tuple[float, float] = (0.25, 5.0),
        max_value_length: int = MAX_VALUE_LENGTH,
    ) -> None:
        if snapshot is not None and snapshot_public_key is None:
            raise ValueError("a snapshot needs snapshot_public_key to verify it")
        self.tenant = tenant
        self.label = label
        self.snapshot = Path(snapshot) if snapshot is not None else None
        self.public_key = snapshot_public_key
        self.timeout = timeout
        self.idle_timeout = idle_timeout
        self.backoff = backoff
        self.max_value_length = max_value_length
        self._base = f"{url.rstrip('/')}/api/v1/tenants/{tenant}"
        self._http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=timeout,
            follow_redirects=False,
        )
        self._entries: dict[str, _Entry] = {}
        self._blobs: dict[bytes, str] = {}
        self._loaded = False
        self.seq = 0  # the last change applied
        self.source: str | None = None  # "registry" or "snapshot": where the held prompts came from
        self.connected = False  # following the change stream right now
        self._changed = asyncio.Condition()
        self._follower: asyncio.Task[None] | None = None
        self._closed = False

    # --- the hot path: memory only ------------------------------------------------------------

    def get(self, name: str) -> Prompt:
        return self._entry(name).prompt

    def render(self, name: str, arguments: dict[str, Any] | None = None) -> RenderedPrompt:
        """The prompt rendered with ``arguments`` exactly as MCP prompts/get renders it;
        InvalidArgument naming the argument when one is missing or breaks its declaration."""
        return rendering.render_compiled(
            self._entry(name).compiled,
            arguments,
            self._blobs,
            max_value_length=self.max_value_length,
        )

    def names(self) -> list[str]:
        return sorted(self._entries)

    async def report(self, name: str, outcome: str, score: float | None = None) -> dict[str, Any]:
        """What the answer made with prompt ``name`` was worth ("good" or "bad", and a score from
        0 to 1), reported to the rollout that chose its version (POST /feedback with the record's
        signed receipt). ClientError, saying why, when no rollout decided it or the report does
        not count (a record counts once, a caller at most five times a step)."""
        receipt = self.get(name).receipt
        if receipt is None:
            raise ClientError(f"prompt {name!r} is not in a rollout: there is nothing to report to")
        body: dict[str, Any] = {"receipt": receipt, "outcome": outcome}
        if score is not None:
            body["score"] = score
        response = await self._http.post(f"{self._base}/feedback", json=body)
        if response.status_code != 201:
            detail = response.json().get("detail") if response.content else None
            raise ClientError(f"/feedback: HTTP {response.status_code}: {detail}")
        return dict(response.json())

    def _entry(self, name: str) -> _Entry:
        if not self._loaded:
            raise RegistryUnavailable(
                "no prompts loaded: the registry was unreachable and no snapshot was given"
            )
        found = self._entries.get(name)
        if found is None:
            raise PromptNotFound(f"{self.tenant}@{self.label} serves no prompt {name!r}")
        return found

    # --- life cycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Load what the label serves (from the registry, else from the snapshot), then follow
        the change stream in the background."""
        try:
            await self._reload()
            self.source = "registry"
        except (httpx.HTTPError, ClientError) as unreachable:
            if self.snapshot is None:
                await self._http.aclose()
                raise RegistryUnavailable(f"cannot load prompts: {unreachable}") from None
            self._load_snapshot()
        self._follower = asyncio.create_task(self._follow(), name="prompt-client-follower")

    async def close(self) -> None:
        self._closed = True
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        await self._http.aclose()

    async def __aenter__(self) -> AsyncPromptClient:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds, woken by each change applied: how a caller waits for
        a publish without polling (bound it with ``asyncio.timeout``)."""
        async with self._changed:
            await self._changed.wait_for(condition)

    # --- loading ----------------------------------------------------------------------------------

    def _compile(
        self, records: list[dict[str, Any]], blobs: dict[str, dict[str, str]]
    ) -> dict[str, _Entry]:
        """The records compiled (their blobs kept first, so no entry refers to a missing one)."""
        for sha, blob in blobs.items():
            self._blobs[bytes.fromhex(sha)] = blob["data"]
        entries = {}
        for record in records:
            _, number, compiled = rendering.compile_found(record)
            prompt = Prompt(
                record["name"],
                number,
                compiled.description,
                compiled.config,
                compiled.specs,
                record.get("receipt"),
            )
            entries[record["name"]] = _Entry(prompt, compiled)
        return entries

    async def _reload(self) -> None:
        """Everything the label serves, page by page, replacing what is held."""
        records: list[dict[str, Any]] = []
        blobs: dict[str, dict[str, str]] = {}
        after: str | None = None
        seq: int | None = None
        while True:
            params = {"label": self.label, **({"after": after} if after else {})}
            page = await self._json("/served", params)
            seq = page["seq"] if seq is None else seq  # changes after the first page are replayed
            records.extend(page["prompts"])
            blobs.update(page["blobs"])
            after = page["next"]
            if after is None:
                break
        self._entries = self._compile(records, blobs)  # swapped whole: readers see one or the other
        self.seq = seq or 0
        self._loaded = True

    def _load_snapshot(self) -> None:
        assert self.snapshot is not None
        assert self.public_key is not None
        try:
            signed = orjson.loads(self.snapshot.read_bytes())
            key_pem = (
                self.public_key
                if isinstance(self.public_key, bytes)
                else Path(self.public_key).read_bytes()
            )
            document = signing.verify(signed, signing.public_key(key_pem))
        except (OSError, orjson.JSONDecodeError, signing.SignatureRefused) as error:
            raise SnapshotRefused(f"snapshot {self.snapshot}: {error}") from None
        if document.get("format") != FORMAT:
            raise SnapshotRefused(f"snapshot {self.snapshot}: not a {FORMAT} document")
        if (document.get("tenant"), document.get("label")) != (self.tenant, self.label):
            raise SnapshotRefused(
                f"snapshot {self.snapshot} holds {document.get('tenant')}@{document.get('label')}, "
                f"not {self.tenant}@{self.label}"
            )
        self._entries = self._compile(document["prompts"], document["blobs"])
        self.seq = int(document["seq"])
        self._loaded = True
        self.source = "snapshot"

    async def _json(self, path: str, params: dict[str, str]) -> Any:
        response = await self._http.get(f"{self._base}{path}", params=params)
        if response.status_code != 200:
            raise ClientError(f"{path}: HTTP {response.status_code} {response.text[:200]}")
        return response.json()

    # --- following the change stream ---------------------------------------------------------

    async def _follow(self) -> None:
        delay = self.backoff[0]
        while not self._closed:
            try:
                async for event, seq, data in self._events():
                    delay = self.backoff[0]
                    if event == "change":
                        await self._apply(data)
                        self.seq = seq
                    elif event == "gap":
                        await self._reload()
                        self.seq = seq
                    elif event in ("closed", "denied"):
                        break
                    await self._tell()
            except (httpx.HTTPError, ClientError, ValueError, KeyError):
                pass  # unreachable, or cut off: try again below
            self.connected = False
            await self._tell()
            if self._closed:
                return
            await asyncio.sleep(delay * random.uniform(0.5, 1.5))  # noqa: S311 - jitter, not a secret
            delay = min(delay * 2, self.backoff[1])

    async def _events(self) -> AsyncIterator[tuple[str, int, dict[str, Any]]]:
        timeout = httpx.Timeout(self.timeout, read=self.idle_timeout)
        async with self._http.stream(
            "GET",
            f"{self._base}/changes",
            params={"label": self.label},
            headers={"Last-Event-ID": str(self.seq), "Accept": "text/event-stream"},
            timeout=timeout,
        ) as response:
            if response.status_code != 200:
                raise ClientError(f"change stream: HTTP {response.status_code}")
            self.connected = True
            await self._tell()
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if len(line) > MAX_LINE:
                    raise ClientError("change stream: a line longer than the client accepts")
                if line == "":
                    if "event" in fields and "id" in fields:
                        yield fields["event"], int(fields["id"]), orjson.loads(fields["data"])
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    fields[name] = value

    async def _tell(self) -> None:
        """Wake whoever waits in ``wait_until``: a change was applied, or the connection changed."""
        async with self._changed:
            self._changed.notify_all()

    async def _apply(self, change: dict[str, Any]) -> None:
        kind = str(change.get("kind", ""))
        if kind.startswith("skill.") or not serves_change(kind):
            return  # a skill's change, or a change request reviewed: nothing served changed
        if kind == APPLIED_EVENT:  # a release: the prompts it moved under this client's label
            moves = (change.get("change_request") or {}).get("moves") or []
            for move in moves:
                if "prompt" in move and move.get("label") == self.label:
                    await self._fetch(str(move["prompt"]))
            return
        name = change.get("prompt")
        if name is None:  # the whole tenant, or a prompt deleted since: read everything again
            await self._reload()
            return
        await self._fetch(str(name))

    async def _fetch(self, name: str) -> None:
        """What the label serves of one prompt, read again (gone: forgotten)."""
        response = await self._http.get(f"{self._base}/served/{name}", params={"label": self.label})
        if response.status_code == 404:
            self._entries.pop(name, None)
            return
        if response.status_code != 200:
            raise ClientError(f"/served/{name}: HTTP {response.status_code}")
        answer = response.json()
        self._entries.update(self._compile([answer["prompt"]], answer["blobs"]))


class PromptClient:
    """``AsyncPromptClient`` for code without an event loop: it runs in a thread of its own, which
    ``close`` (or leaving the ``with`` block) stops and joins. ``get`` and ``render`` read memory."""

    def __init__(self, url: str, tenant: str, api_key: str, **options: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="prompt-client", daemon=True
        )
        self._thread.start()
        timeout = float(options.get("timeout", 5.0))
        self._timeout = timeout

        async def make() -> AsyncPromptClient:
            client = AsyncPromptClient(url, tenant, api_key, **options)
            await client.start()
            return client

        try:
            self._client = asyncio.run_coroutine_threadsafe(make(), self._loop).result(timeout * 4)
        except BaseException:
            self._stop()
            raise

    def get(self, name: str) -> Prompt:
        return self._client.get(name)

    def render(self, name: str, arguments: dict[str, Any] | None = None) -> RenderedPrompt:
        return self._client.render(name, arguments)

    def names(self) -> list[str]:
        return self._client.names()

    def report(self, name: str, outcome: str, score: float | None = None) -> dict[str, Any]:
        """``AsyncPromptClient.report``: one line, from the prompt the client holds."""
        done = self._client.report(name, outcome, score)
        return asyncio.run_coroutine_threadsafe(done, self._loop).result(self._timeout * 2)

    @property
    def seq(self) -> int:
        return self._client.seq

    @property
    def connected(self) -> bool:
        return self._client.connected

    @property
    def source(self) -> str | None:
        return self._client.source

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> None:
        """``condition()`` holds, woken by each change applied; TimeoutError past ``timeout``."""

        async def bounded() -> None:
            async with asyncio.timeout(timeout):
                await self._client.wait_until(condition)

        asyncio.run_coroutine_threadsafe(bounded(), self._loop).result(timeout + 1)

    def close(self) -> None:
        if self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result(10)
            finally:
                self._stop()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def __enter__(self) -> PromptClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

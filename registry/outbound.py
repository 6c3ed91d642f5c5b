"""Outbound HTTP to addresses that tenants choose (webhook deliveries, OAuth issuers' metadata and
keys), made safe to point at the internet: only http(s) URLs
without credentials; the host resolved first and refused when any address is private, loopback,
link-local, multicast, reserved or unspecified (unless the operator allows it), then the request sent
to the address that was checked (so a name that resolves differently a moment later cannot reach the
inside); a timeout on the whole exchange, no redirects followed, no proxy or netrc from the
environment, and only the headers given (never the registry's own credentials)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

MAX_BODY_LOGGED = 1024  # bytes of an answer kept in the delivery log


class Refused(ValueError):
    """A URL or address the registry does not call; the message says why."""


class PrivateAddress(Refused):
    """A private, loopback, link-local or otherwise non-public address, refused unless the operator
    allows such addresses (each caller names its own setting)."""


@dataclass(frozen=True)
class Outcome:
    status_code: int | None
    error: str | None
    latency_ms: int
    body: str | None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def check_url(url: str) -> tuple[str, str, int]:
    """(scheme, host, port) of an acceptable webhook URL; Refused naming what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise Refused(f"not a valid URL: {error}") from None
    if parts.scheme not in ("http", "https"):
        raise Refused(f"the URL must be http or https, not {parts.scheme or 'none'}")
    if parts.username is not None or parts.password is not None:
        raise Refused("the URL must not carry credentials")
    if not parts.hostname:
        raise Refused("the URL has no host")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries inside it (mapped, 6to4, Teredo's server and
    client, NAT64, the deprecated compatible form): each is judged as if dialled itself."""
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in network for network in _NAT64) or (
        address in _COMPATIBLE and int(address) > 1
    ):
        found.append(low32)
    return found


def _why_private(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address):
        for inner in _embedded_ipv4(address):
            reason = _why_private(inner)
            if reason is not None:
                return reason
        if address.ipv4_mapped is not None:
            return None  # judged above as the IPv4 address it is
    for reason, test in (
        ("a loopback", address.is_loopback),
        ("a link-local", address.is_link_local),
        ("a private", address.is_private),
        ("a multicast", address.is_multicast),
        ("a reserved", address.is_reserved),
        ("an unspecified", address.is_unspecified),
        ("a non-public", not address.is_global),
    ):
        if test:
            return reason
    return None


def check_literal(host: str, *, allow_private: bool) -> None:
    """Refuse a URL whose host is a literal private address (checked when it is registered)."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return  # a name: checked when it is resolved, at each delivery
    reason = _why_private(address)
    if reason is not None and not allow_private:
        raise PrivateAddress(
            f"the host is {reason} address; the registry calls public addresses only"
        )


async def resolve(host: str, port: int, *, allow_private: bool) -> str:
    """The address to connect to: every address the name has is checked, the first is used."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except socket.gaierror as error:
        raise Refused(f"cannot resolve {host}: {error.strerror}") from None
    addresses = [str(info[4][0]) for info in infos]
    if not addresses:
        raise Refused(f"{host} has no address")
    for text in addresses:
        reason = _why_private(ipaddress.ip_address(text.split("%", 1)[0]))
        if reason is not None and not allow_private:
            # The address itself is not named: a refusal must not tell a caller what an internal
            # name resolves to.
            raise PrivateAddress(
                f"{host} resolves to {reason} address; the registry calls public addresses only"
            )
    return addresses[0]


async def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    seconds: float,
    allow_private: bool,
    allowed_by: str = "",
) -> Outcome:
    """POST ``body`` to ``url``, safely; never raises for what the receiver or the network does.
    ``allowed_by`` names the setting that allows private addresses, told when one is refused."""
    started = time.monotonic()

    def done(status: int | None, error: str | None, text: str | None = None) -> Outcome:
        return Outcome(status, error, int((time.monotonic() - started) * 1000), text)

    try:
        scheme, host, port = check_url(url)
        address = await resolve(host, port, allow_private=allow_private)
    except PrivateAddress as refused:
        return done(None, f"{refused}{allowed_hint(allowed_by)}")
    except Refused as refused:
        return done(None, str(refused))
    parts = urlsplit(url)
    netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    target = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    sent = {**headers, "Host": parts.netloc}
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    try:
        async with (
            asyncio.timeout(seconds),
            httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=seconds) as client,
            client.stream(
                "POST", target, content=body, headers=sent, extensions=extensions
            ) as answer,
        ):
            kept = bytearray()
            async for chunk in answer.aiter_bytes():
                kept += chunk[: MAX_BODY_LOGGED - len(kept)]
                if len(kept) >= MAX_BODY_LOGGED:
                    break
            return done(answer.status_code, None, kept.decode("utf-8", "replace"))
    except TimeoutError:
        return done(None, f"no answer within {seconds:g} seconds")
    except httpx.HTTPError as error:
        return done(None, f"{type(error).__name__}: {error}"[:500])


def allowed_hint(setting: str) -> str:
    """What a refusal of a private address adds: the setting that would allow it."""
    return f" (unless {setting}=true where the registry runs)" if setting else ""


async def get_json(
    url: str, *, seconds: float, allow_private: bool, max_bytes: int = 1 << 20
) -> Any:
    """GET a JSON document from ``url`` with the same rules as ``post``; Refused (naming why) when
    it cannot be had: refused address, no answer, not 200, too large, not JSON."""
    return await fetch_json(
        "GET", url, seconds=seconds, allow_private=allow_private, max_bytes=max_bytes
    )


async def fetch_json(
    method: str,
    url: str,
    *,
    seconds: float,
    allow_private: bool,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    max_bytes: int = 1 << 20,
) -> Any:
    """``method`` on ``url`` (with a form body, for OAuth endpoints), answered 200 with JSON;
    Refused naming why otherwise. Only the given headers are sent."""
    scheme, host, port = check_url(url)
    address = await resolve(host, port, allow_private=allow_private)
    parts = urlsplit(url)
    netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    target = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    extensions = {"sni_hostname": host} if scheme == "https" else {}
    sent = {**(headers or {}), "Host": parts.netloc, "Accept": "application/json"}
    try:
        async with (
            asyncio.timeout(seconds),
            httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=seconds) as client,
            client.stream(method, target, headers=sent, data=form, extensions=extensions) as answer,
        ):
            if answer.status_code != 200:
                raise Refused(f"{url} answered HTTP {answer.status_code}")
            body = bytearray()
            async for chunk in answer.aiter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise Refused(f"{url} sent more than {max_bytes} bytes")
    except TimeoutError:
        raise Refused(f"{url} did not answer within {seconds:g} seconds") from None
    except httpx.HTTPError as error:
        raise Refused(f"cannot reach {url}: {type(error).__name__}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise Refused(f"{url} did not send JSON") from None

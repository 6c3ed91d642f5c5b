"""OAuth 2.1 end to end: a live registry, a real OpenID Provider (oidc-provider) and the official
MCP SDK's OAuth client. Tokens the provider would never issue are minted with its own key."""

from __future__ import annotations

import asyncio
import json
import os
import re
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from registry.tenants.oauth import TokenVerifier
from tests.conftest import (
    OPERATOR_TOKEN,
    SIMPLE,
    LiveServer,
    PgServer,
    _create_database,
    _drop_database,
    free_port,
    start_server,
    stop_server,
)
from tests.oauth.hostile import HostileIssuer
from tests.oauth.idp import INTROSPECTOR, Provider, new_key, redirect_query, sign_in, token_for

pytestmark = pytest.mark.slow
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
ACCEPT = "application/json, text/event-stream"
RULES = [
    {"claim": "groups", "equals": "prompt-publishers", "role": "publisher"},
    {"claim": "email", "email_domain": "acme.test", "role": "reader"},
]


DATABASES: dict[str, str] = {}  # a live server's database URL, for the CLI's operator commands


def _database_url(server: LiveServer) -> str:
    return DATABASES[server.url]


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    idp = Provider(tmp_path_factory.mktemp("idp"))
    idp.start()
    yield idp
    idp.stop()


@pytest.fixture(scope="module")
async def server(
    pg_server: PgServer, template_db: str, provider: Provider
) -> AsyncIterator[LiveServer]:
    """A registry whose canonical URI is its own address, with tenants: acme (trusts the provider,
    keys too), other (trusts it as well), keys (API keys only), opaque (introspects)."""
    name = await _create_database(pg_server, template_db)
    port = free_port()
    live = start_server(
        {
            "REGISTRY_DATABASE_URL": pg_server.plain_url(name),
            "REGISTRY_OPERATOR_TOKEN": OPERATOR_TOKEN,
            "REGISTRY_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "REGISTRY_OAUTH_ALLOW_PRIVATE_ISSUERS": "true",  # the provider is on loopback
            "REGISTRY_OAUTH_KEYS_REFRESH_SECONDS": "0",
        },
        port=port,
    )
    try:
        for slug in ("acme", "other", "keys", "opaque"):
            live.tenant(slug, roles=("admin",) if slug == "keys" else (), prompts=[SIMPLE])
        _trust(live, provider)
        DATABASES[live.url] = pg_server.plain_url(name)
        yield live
    finally:
        stop_server(live)
        await _drop_database(pg_server, name)


def _trust(live: LiveServer, provider: Provider) -> None:
    for slug, extra in (
        ("acme", {}),
        ("other", {}),
        ("opaque", {"introspection_client_id": INTROSPECTOR[0],
                    "introspection_secret": INTROSPECTOR[1]}),
    ):  # fmt: skip
        trusted = httpx.put(
            f"{live.url}/api/v1/tenants/{slug}/issuers",
            json={"issuers": [{"issuer": provider.issuer, "rules": RULES, **extra}]},
            headers=OPERATOR,
        )
        assert trusted.status_code == 200, trusted.text


def mcp(server: LiveServer, slug: str, token: str | None, method: str = "prompts/list") -> Any:
    """One stateless-era MCP request (2025-06-18 needs no session for a refusal to show)."""
    headers = {"Accept": ACCEPT, "MCP-Protocol-Version": "2025-06-18"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}  # fmt: skip
    return httpx.post(f"{server.url}/mcp/{slug}", json=body, headers=headers, timeout=30)


def resource(server: LiveServer, slug: str) -> str:
    return f"{server.url}/mcp/{slug}"


# --- metadata and challenges ----------------------------------------------------------------------


def test_protected_resource_metadata(server: LiveServer, provider: Provider) -> None:
    known = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/mcp/acme")
    assert known.status_code == 200
    assert known.headers["access-control-allow-origin"] == "*"
    body = known.json()
    assert body["resource"] == resource(server, "acme")
    assert body["authorization_servers"] == [provider.issuer]
    assert body["scopes_supported"] == ["prompts:read", "prompts:write"]
    assert body["bearer_methods_supported"] == ["header"]
    assert body["dev.prompt-registry/authentication"] == ["oauth", "api_key"]
    # A label's path belongs to the tenant's resource.
    label = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/mcp/acme/staging")
    assert label.json()["resource"] == resource(server, "acme")
    rest = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/api/v1/tenants/acme")
    assert rest.json()["resource"] == f"{server.url}/api/v1/tenants/acme"
    # A tenant that trusts no issuer says so; one that does not exist reads the same way, but
    # takes nothing.
    keys = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/mcp/keys").json()
    assert keys["authorization_servers"] == []
    assert keys["dev.prompt-registry/authentication"] == ["api_key"]
    assert "API keys only" in keys["resource_name"]
    ghost = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/mcp/ghost").json()
    assert ghost["authorization_servers"] == []
    # The registry is no authorization server, and says so where clients look for one.
    for method, path in (("GET", "/.well-known/oauth-authorization-server"),
                         ("POST", "/register"), ("POST", "/token")):  # fmt: skip
        answer = httpx.request(method, f"{server.url}{path}")
        assert answer.status_code == 404
        assert "API keys" in answer.json()["detail"]


def test_challenges(server: LiveServer) -> None:
    missing = mcp(server, "acme", None)
    assert missing.status_code == 401
    challenge = missing.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert (
        f'resource_metadata="{server.url}/.well-known/oauth-protected-resource/mcp/acme"'
        in challenge
    )
    assert 'scope="prompts:read"' in challenge
    rest = httpx.get(f"{server.url}/api/v1/tenants/acme/prompts")
    assert rest.status_code == 401
    assert (
        "/.well-known/oauth-protected-resource/api/v1/tenants/acme"
        in rest.headers["www-authenticate"]
    )


# --- the SDK's OAuth client -------------------------------------------------------------------


class _Memory:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_oauth(url: str, account: str, storage: _Memory) -> OAuthClientProvider:
    """The SDK's OAuth client; its "browser" is a person signing in at the provider's pages."""
    landed: dict[str, str] = {}

    async def redirect(authorization_url: str) -> None:
        async with httpx.AsyncClient(timeout=30) as browser:
            landed.update(redirect_query(await sign_in(browser, authorization_url, account)))

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(
            code=landed["code"], state=landed.get("state"), iss=landed.get("iss")
        )

    metadata = OAuthClientMetadata(
        client_name="registry tests",
        redirect_uris=["http://127.0.0.1:9/callback"],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    return OAuthClientProvider(url, metadata, storage, redirect, callback)


async def test_sdk_oauth_client_lists_and_gets_prompts_with_no_key(server: LiveServer) -> None:
    url = resource(server, "acme")
    storage = _Memory()
    async with (
        httpx2.AsyncClient(auth=sdk_oauth(url, "alice", storage), timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_prompts()
        assert [p.name for p in listed.prompts] == ["greet"]
        got = await session.get_prompt("greet", {"who": "Ada"})
        assert got.messages[0].content.text == "Hello Ada!"  # type: ignore[union-attr]
    assert storage.tokens is not None
    assert storage.tokens.scope == "prompts:read"  # what the challenge asked for


async def test_a_publishers_token_writes_and_the_audit_names_it(
    server: LiveServer, provider: Provider
) -> None:
    token = (await token_for(provider, f"{server.url}/api/v1/tenants/acme", "alice"))[
        "access_token"
    ]
    async with httpx.AsyncClient(base_url=f"{server.url}/api/v1/tenants/acme") as http:
        written = await http.post(
            "/prompts", json={**SIMPLE, "name": "by-token"}, headers=_bearer(token)
        )
        assert written.status_code == 201, written.text
        audit = (await http.get("/audit", headers=OPERATOR)).json()
    actors = {e["actor"] for e in audit["items"] if e["target"].endswith("by-token")}
    assert actors == {f"token:alice from {provider.issuer}"}


# --- refusals ---------------------------------------------------------------------------------


def _refused(answer: httpx.Response, status: int, words: str, error: str) -> None:
    assert answer.status_code == status, answer.text
    challenge = answer.headers["www-authenticate"]
    assert f'error="{error}"' in challenge, challenge
    assert words in answer.text, answer.text


def test_tokens_that_are_refused(server: LiveServer, provider: Provider) -> None:
    mine = resource(server, "acme")
    assert mcp(server, "acme", provider.mint(mine)).status_code == 200  # the control
    cases = [
        (provider.mint("https://elsewhere.example/mcp"), "not for this registry's tenant"),
        (provider.mint(resource(server, "other")), "not for this registry's tenant"),
        (provider.mint(mine, lifetime=-600), "expired"),
        (provider.mint(mine, not_before=2**31), "not valid yet"),
        (provider.mint(mine, issuer="http://127.0.0.1:1/elsewhere"), "does not trust the issuer"),
        (provider.mint(mine, algorithm="none"), "'none' are not accepted"),
        (provider.mint(mine, key=new_key()), "has no signing key"),
        (provider.mint(mine, key={**new_key(), "kid": provider.keys[0]["kid"]}), "does not verify"),
    ]
    for token, words in cases:
        _refused(mcp(server, "acme", token), 401, words, "invalid_token")
    # HMAC, whatever the secret: never accepted for an asymmetric issuer.
    import jwt

    hmac = jwt.encode(
        {"iss": provider.issuer, "aud": mine, "exp": 2**31, "sub": "alice"},
        "a-shared-secret-of-thirty-two-bytes!",
        algorithm="HS256",
        headers={"kid": provider.keys[0]["kid"]},
    )
    _refused(mcp(server, "acme", hmac), 401, "'HS256' are not accepted", "invalid_token")


def test_roles_come_from_the_tenants_rules(server: LiveServer, provider: Provider) -> None:
    rest = f"{server.url}/api/v1/tenants/acme"
    new = {**SIMPLE, "name": "refused"}
    # Mallory's claims map to no role: refused like a foreign key.
    nobody = httpx.get(f"{rest}/prompts", headers=_bearer(provider.mint(rest, subject="mallory")))
    assert nobody.status_code == 403
    assert "maps to no role" in nobody.json()["detail"]
    # Bob is a reader by his e-mail domain: he reads, he cannot write (no scope would help).
    bob = _bearer(provider.mint(rest, subject="bob"))
    assert httpx.get(f"{rest}/prompts", headers=bob).status_code == 200
    write = httpx.post(f"{rest}/prompts", json=new, headers=bob)
    assert write.status_code == 403
    assert "insufficient_scope" not in write.headers.get("www-authenticate", "")
    # Alice is a publisher, but her token's scope narrows her to reading: a step-up helps.
    narrowed = _bearer(provider.mint(rest, subject="alice", scope="prompts:read"))
    step_up = httpx.post(f"{rest}/prompts", json=new, headers=narrowed)
    _refused(step_up, 403, "needs the editor role", "insufficient_scope")
    assert 'scope="prompts:write"' in step_up.headers["www-authenticate"]
    # An unverified address earns nothing by its domain.
    unverified = provider.mint(rest, subject="carol", email="carol@acme.test", email_verified=False)
    assert httpx.get(f"{rest}/prompts", headers=_bearer(unverified)).status_code == 403


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_opaque_tokens_are_introspected(server: LiveServer, provider: Provider) -> None:
    token = (await token_for(provider, resource(server, "opaque"), "bob", "prompts:read"))[
        "access_token"
    ]
    assert token.count(".") != 2  # opaque indeed
    assert mcp(server, "opaque", token).status_code == 200
    # The same token on a tenant that cannot introspect is taken for an API key.
    refused = mcp(server, "acme", token)
    assert refused.status_code == 403
    assert "invalid API key" in refused.text
    _refused(mcp(server, "opaque", "not-a-token-anyone-issued"), 401, "not active", "invalid_token")


async def test_key_rotation_is_followed_without_a_restart(
    server: LiveServer, provider: Provider
) -> None:
    mine = resource(server, "acme")
    assert mcp(server, "acme", provider.mint(mine)).status_code == 200
    provider.rotate()
    assert mcp(server, "acme", provider.mint(mine)).status_code == 200  # signed by the new key
    issued = await token_for(provider, mine, "alice", "prompts:read")
    assert mcp(server, "acme", issued["access_token"]).status_code == 200


async def test_unknown_kids_fetch_keys_at_a_bounded_rate(provider: Provider) -> None:
    """Tokens with made-up kids cannot make a worker fetch the issuer's keys in a loop."""
    from registry.db.models import Tenant, TenantIssuer

    verifier = TokenVerifier(
        "http://registry.test", skew_seconds=60, allow_private=True, refresh_seconds=3600
    )
    tenant = Tenant(slug="acme")
    trusted = [TenantIssuer(issuer=provider.issuer, rules=RULES)]
    good = provider.mint("http://registry.test/mcp/acme")
    assert (await verifier.principal(good, tenant, trusted)).role == "publisher"
    for _ in range(5):
        stray = provider.mint("http://registry.test/mcp/acme", key=new_key())
        with pytest.raises(Exception, match="has no signing key"):
            await verifier.principal(stray, tenant, trusted)
    assert verifier.fetches == 1


# --- API keys beside tokens, and how their refusals read --------------------------------------


def test_api_keys_can_be_turned_off_by_an_operator(server: LiveServer) -> None:
    base = f"{server.url}/api/v1/tenants/other"
    key = httpx.post(f"{base}/keys", json={"role": "admin"}, headers=OPERATOR).json()["secret"]
    assert httpx.get(f"{base}/prompts", headers=_bearer(key)).status_code == 200
    by_admin = httpx.patch(base, json={"api_keys": False}, headers=_bearer(key))
    assert by_admin.status_code == 403
    assert httpx.patch(base, json={"api_keys": False}, headers=OPERATOR).status_code == 200
    off = httpx.get(f"{base}/prompts", headers=_bearer(key))
    assert off.status_code == 403
    assert "API keys are off" in off.json()["detail"]
    meta = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/mcp/other").json()
    assert meta["dev.prompt-registry/authentication"] == ["oauth"]
    assert httpx.patch(base, json={"api_keys": True}, headers=OPERATOR).status_code == 200


def test_issuer_configuration_is_checked_and_keeps_its_secret(server: LiveServer) -> None:
    base = f"{server.url}/api/v1/tenants/opaque/issuers"
    shown = httpx.get(base, headers=OPERATOR)
    assert shown.status_code == 200
    assert INTROSPECTOR[1] not in shown.text
    assert shown.json()[0]["introspection_client_id"] == INTROSPECTOR[0]
    for bad, words in (
        ({"issuers": [{"issuer": "ftp://x", "rules": RULES}]}, "issuer"),
        ({"issuers": [{"issuer": "https://x", "rules": []}]}, "rules"),
        ({"issuers": [{"issuer": "https://x", "rules": [{"claim": "g", "role": "reader"}]}]},
         "exactly one of equals or email_domain"),
        ({"issuers": [{"issuer": "https://x", "rules": RULES, "introspection_client_id": "c"}]},
         "introspection_secret"),
        ({"issuers": [{"issuer": "https://x", "rules": RULES}] * 2}, "listed twice"),
    ):  # fmt: skip
        answer = httpx.put(base, json=bad, headers=OPERATOR)
        assert answer.status_code == 422, answer.text
        assert words in answer.text


async def test_oauth_aware_clients_show_why_a_key_was_refused(server: LiveServer) -> None:
    """The SDK's OAuth client, given a revoked API key or none, ends with the server's reason
    rather than a failed client registration."""
    async with httpx.AsyncClient(base_url=f"{server.url}/api/v1/tenants/keys") as http:
        made = (await http.post("/keys", json={"role": "reader"}, headers=OPERATOR)).json()
        assert (await http.delete(f"/keys/{made['id']}", headers=OPERATOR)).status_code == 204
    url = resource(server, "keys")
    for headers, words in (
        ({"Authorization": f"Bearer {made['secret']}"}, "revoked"),
        ({}, "takes API keys only"),
    ):
        with pytest.raises(BaseException) as caught:  # noqa: PT011 - the SDK wraps it in groups
            async with (
                httpx2.AsyncClient(
                    headers=headers, auth=sdk_oauth(url, "alice", _Memory()), timeout=30
                ) as sdk_http,
                streamable_http_client(url, http_client=sdk_http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
        assert words in _all_text(caught.value), _all_text(caught.value)


def _all_text(error: BaseException) -> str:
    parts = [f"{type(error).__name__}: {error}"]
    for inner in getattr(error, "exceptions", ()):
        parts.append(_all_text(inner))
    if error.__cause__ is not None:
        parts.append(_all_text(error.__cause__))
    response = getattr(error, "response", None)
    if response is not None:
        parts.append(getattr(response, "text", ""))
    return "\n".join(parts)


# --- the CLI ----------------------------------------------------------------------------------


def test_registry_login_then_pull_and_refresh(
    server: LiveServer, provider: Provider, tmp_path: Path
) -> None:
    """`registry login` runs the device flow against the tenant's issuer; pull then uses the kept
    token with no key, and refreshes it once it is due."""
    kept = tmp_path / "credentials.json"
    env = {**os.environ, "REGISTRY_CREDENTIALS_FILE": str(kept), "REGISTRY_URL": server.url}
    env.pop("REGISTRY_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "registry", "login", "--tenant", "acme"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        told = process.stderr.readline()  # blocks until the CLI shows where to go
        found = re.search(r"Open (\S+) and confirm the code (\S+)", told)
        assert found is not None, told
        asyncio.run(_confirm(found.group(1), "alice"))
        assert process.wait(timeout=120) == 0, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    stored = json.loads(kept.read_text())[f"{server.url}|acme"]
    assert stored["issuer"] == provider.issuer
    assert stored["refresh_token"]

    def registry(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "registry", *args], env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    pulled = registry("pull", str(tmp_path / "prompts"), "--tenant", "acme")
    assert pulled.returncode == 0, pulled.stderr
    assert (tmp_path / "prompts" / "greet.yaml").is_file()
    # Due for refresh: the next command refreshes first, and keeps the new token.
    everything = json.loads(kept.read_text())
    everything[f"{server.url}|acme"]["expires_at"] = 0
    kept.write_text(json.dumps(everything))
    again = registry("pull", str(tmp_path / "again"), "--tenant", "acme")
    assert again.returncode == 0, again.stderr
    renewed = json.loads(kept.read_text())[f"{server.url}|acme"]
    assert renewed["access_token"] != stored["access_token"]
    assert renewed["expires_at"] > 0
    # No login for a tenant, no key: one line that says what to do.
    missing = registry("pull", str(tmp_path / "x"), "--tenant", "other")
    assert missing.returncode == 1
    assert "registry login --tenant other" in missing.stderr
    # A tenant that trusts no issuer cannot be logged into.
    refused = registry("login", "--tenant", "keys")
    assert refused.returncode == 1
    assert "trusts no OAuth issuer" in refused.stderr


async def _confirm(url: str, account: str) -> None:
    async with httpx.AsyncClient(timeout=30) as browser:
        await sign_in(browser, url, account)


def test_issuer_commands(server: LiveServer) -> None:
    """`registry issuer add/list/remove` and `registry tenant api-keys` on the database."""
    url = _database_url(server)
    env = {**os.environ, "REGISTRY_DATABASE_URL": url}

    def registry(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "registry", *args], env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    added = registry(
        "issuer", "add", "--tenant", "keys", "https://login.example.com/",
        "--rule", "groups=prompt-publishers:publisher", "--rule", "email@example.com:reader",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    listed = registry("issuer", "list", "--tenant", "keys")
    assert "groups=prompt-publishers:publisher; email@example.com:reader" in listed.stdout
    bad = registry("issuer", "add", "--tenant", "keys", "https://x/", "--rule", "nonsense")
    assert bad.returncode == 1
    assert "CLAIM=VALUE:ROLE" in bad.stderr
    assert (
        registry("issuer", "remove", "--tenant", "keys", "https://login.example.com/").returncode
        == 0
    )
    assert "login.example.com" not in registry("issuer", "list", "--tenant", "keys").stdout
    off = registry("tenant", "api-keys", "keys", "off")
    assert off.returncode == 0, off.stderr
    meta = httpx.get(f"{server.url}/.well-known/oauth-protected-resource/mcp/keys").json()
    assert meta["dev.prompt-registry/authentication"] == []
    assert registry("tenant", "api-keys", "keys", "on").returncode == 0


def test_a_change_of_rules_reaches_tokens_a_worker_remembers(
    server: LiveServer, provider: Provider
) -> None:
    """Token callers are remembered like keys; a change of the tenant's issuers drops them on
    every worker when its notification arrives."""
    import time

    created = httpx.post(f"{server.url}/api/v1/tenants", json={"slug": "rules"}, headers=OPERATOR)
    assert created.status_code == 201, created.text
    base = f"{server.url}/api/v1/tenants/rules/issuers"
    trusted = {"issuers": [{"issuer": provider.issuer, "rules": RULES}]}
    assert httpx.put(base, json=trusted, headers=OPERATOR).status_code == 200
    bob = provider.mint(resource(server, "rules"), subject="bob")  # a reader by his e-mail
    for _ in range(3):  # the first checks the token, the next ones are remembered
        assert mcp(server, "rules", bob).status_code == 200
    narrower = {"issuers": [{"issuer": provider.issuer, "rules": RULES[:1]}]}  # groups only
    assert httpx.put(base, json=narrower, headers=OPERATOR).status_code == 200
    deadline = time.monotonic() + 10
    while mcp(server, "rules", bob).status_code != 403:
        assert time.monotonic() < deadline, "the rules' change never reached the remembered token"
        time.sleep(0.05)


# --- issuers that lie, and issuers that fail ---------------------------------------------------


@pytest.fixture
def hostile() -> Iterator[HostileIssuer]:
    issuer = HostileIssuer()
    issuer.start()
    yield issuer
    issuer.stop()


def _trust_hostile(server: LiveServer, slug: str, hostile: HostileIssuer) -> None:
    trusted = httpx.put(
        f"{server.url}/api/v1/tenants/{slug}/issuers",
        json={"issuers": [{"issuer": hostile.issuer, "rules": RULES,
                           "introspection_client_id": "c", "introspection_secret": "s"}]},
        headers=OPERATOR,
    )  # fmt: skip
    assert trusted.status_code == 200, trusted.text


def test_an_issuer_speaks_for_its_own_tokens_only(
    server: LiveServer, provider: Provider, hostile: HostileIssuer
) -> None:
    """Tenant evil trusts an issuer of its own admin's, whose introspection vouches for a string in
    the name of the victim's issuer and for the victim's audience (both public). The answer is
    refused on evil, and the string stays nothing on the victim, however warm the worker is."""
    server.tenant("evil", roles=(), prompts=[SIMPLE])
    _trust_hostile(server, "evil", hostile)
    rest = f"{server.url}/api/v1/tenants"
    forged = "a-string-the-victims-issuer-never-issued"
    hostile.introspection = {
        "active": True, "iss": provider.issuer, "aud": f"{rest}/opaque", "sub": "alice",
        "groups": ["prompt-publishers"], "scope": "prompts:read prompts:write",
        "exp": int(time.time()) + 300,
    }  # fmt: skip
    evil = httpx.get(f"{rest}/evil/prompts", headers=_bearer(forged))
    _refused(evil, 401, "names another issuer", "invalid_token")
    assert hostile.asked, "the hostile issuer was never asked: the test proves nothing"
    for _ in range(3):
        victim = httpx.get(f"{rest}/opaque/prompts", headers=_bearer(forged))
        _refused(victim, 401, "not active", "invalid_token")
    # An issuer's word on its own tokens still counts, and is checked like any claim.
    hostile.introspection = {**hostile.introspection, "iss": hostile.issuer, "aud": f"{rest}/evil"}
    assert httpx.get(f"{rest}/evil/prompts", headers=_bearer("own-1")).status_code == 200
    hostile.introspection["exp"] = "never"
    _refused(
        httpx.get(f"{rest}/evil/prompts", headers=_bearer("own-2")), 401, "numeric exp",
        "invalid_token",
    )  # fmt: skip


def _rsa_public_jwk(kid: str) -> dict[str, Any]:
    from cryptography.hazmat.primitives.asymmetric import rsa
    from jwt.algorithms import RSAAlgorithm

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {**json.loads(RSAAlgorithm.to_jwk(private.public_key())), "kid": kid, "use": "sig"}


def _public(key: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in key.items() if name != "d"}


def _unsigned_with_header(header: dict[str, Any], claims: dict[str, Any]) -> str:
    import base64

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part(header)}.{part(claims)}.c2lnbmF0dXJl"


async def test_malformed_keys_and_headers_are_refused_with_a_reason(
    hostile: HostileIssuer,
) -> None:
    from registry.db.models import Tenant, TenantIssuer
    from registry.tenants.oauth import InvalidToken

    audience = "http://registry.test/mcp/acme"
    signing = new_key()
    hostile.keys = [
        _rsa_public_jwk("rsa"), {**_public(new_key()), "kid": ["a", "list"]}, _public(signing),
    ]  # fmt: skip
    verifier = TokenVerifier("http://registry.test", skew_seconds=60, allow_private=True)
    tenant = Tenant(slug="acme")
    trusted = [TenantIssuer(issuer=hostile.issuer, rules=RULES)]
    issuer = Provider(Path("."), keys=[signing])  # only to mint with the key, never started
    good = issuer.mint(audience, issuer=hostile.issuer)
    assert (await verifier.principal(good, tenant, trusted)).role == "publisher"
    claims = {"iss": hostile.issuer, "aud": audience, "exp": 2**31, "groups": ["prompt-publishers"]}
    cases: list[tuple[dict[str, Any], dict[str, Any], str]] = [
        ({"alg": "ES256", "kid": "rsa"}, claims, "is an RSA key"),
        ({"alg": "ES256", "kid": ["a", "list"]}, claims, "readable JWT|kid must be a string"),
        ({"alg": "RS256", "kid": "rsa"}, {**claims, "exp": "never"}, "does not verify"),
    ]
    for header, body, words in cases:
        with pytest.raises(InvalidToken, match=words):
            await verifier.principal(_unsigned_with_header(header, body), tenant, trusted)
    string_exp = issuer.mint(audience, issuer=hostile.issuer, exp="9999999999")
    with pytest.raises(InvalidToken):
        await verifier.principal(string_exp, tenant, trusted)


async def test_first_tokens_wait_for_one_fetch_and_a_failed_fetch_is_retried_soon(
    provider: Provider, hostile: HostileIssuer
) -> None:
    from registry.db.models import Tenant, TenantIssuer
    from registry.tenants.oauth import InvalidToken

    audience = "http://registry.test/mcp/acme"
    tenant = Tenant(slug="acme")
    verifier = TokenVerifier(
        "http://registry.test", skew_seconds=60, allow_private=True, refresh_seconds=3600
    )
    trusted = [TenantIssuer(issuer=provider.issuer, rules=RULES)]
    tokens = [provider.mint(audience) for _ in range(10)]
    principals = await asyncio.gather(*(verifier.principal(t, tenant, trusted) for t in tokens))
    assert [p.role for p in principals] == ["publisher"] * 10
    assert verifier.fetches == 1
    # An issuer that failed once is asked again soon, not after the refresh interval.
    signing = new_key()
    hostile.keys, hostile.broken = [_public(signing)], True
    quick = TokenVerifier(
        "http://registry.test", skew_seconds=60, allow_private=True, refresh_seconds=3600,
        retry_seconds=0,
    )  # fmt: skip
    on_hostile = [TenantIssuer(issuer=hostile.issuer, rules=RULES)]
    token = Provider(Path("."), keys=[signing]).mint(audience, issuer=hostile.issuer)
    with pytest.raises(InvalidToken, match="cannot read the issuer"):
        await quick.principal(token, tenant, on_hostile)
    hostile.broken = False
    assert (await quick.principal(token, tenant, on_hostile)).role == "publisher"

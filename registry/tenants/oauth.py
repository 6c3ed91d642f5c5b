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

import base64
import hashlib
import re
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
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


def kind_of(credential: str) -> Literal["api_key", "jwt", "opaque"]:
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
    """What a worker knows of one issuer: its discovery document and signing keys."""

    issuer: str
    metadata: dict[str, Any] = field(default_factory=dict)
    keys: dict[str | None, jwt.PyJWK] = field(default_factory=dict)
    fetched_at: float | None = None


@dataclass(frozen=True)
class _Introspected:
    claims: dict[str, Any] | None  # None: inactive
    issuer: str | None
    until: float


class TokenVerifier:
    """One per worker: the issuers' keys and introspection answers it has, kept across requests."""

    def __init__(
        self,
        public_url: str | None,
        *,
        skew_seconds: float,
        allow_private: bool,
        refresh_seconds: float = 30.0,
    ) -> None:
        self.public_url = public_url
        self.skew = skew_seconds
        self.allow_private = allow_private
        self.refresh_seconds = refresh_seconds
        self._issuers: dict[str, _Issuer] = {}
        self._introspected: OrderedDict[str, _Introspected] = OrderedDict()
        self.fetches = 0  # discovery rounds made (each a document and a key set)

    def accepts(self, credential: str, trusted: Sequence[TenantIssuer]) -> bool:
        """Whether ``credential`` is for this verifier: a JWT, or an opaque token that an issuer
        the tenant trusts can introspect. Anything else is taken for an API key."""
        kind = kind_of(credential)
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
        if kind_of(token) == "jwt":
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
        expires = claims.get("exp")
        return Principal(
            role=role,
            tenant_id=tenant.id,
            subject=f"{claims.get('sub') or claims.get('client_id') or '?'} from {issuer}",
            expires_at=datetime.fromtimestamp(float(expires), UTC)
            if isinstance(expires, int | float)
            else None,
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
        if algorithm not in ALGORITHMS:
            raise InvalidToken(f"tokens signed with {algorithm!r} are not accepted")
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or issuer not in {i.issuer for i in trusted}:
            raise InvalidToken(f"tenant {tenant.slug!r} does not trust the issuer {issuer!r}")
        key = await self._key(issuer, header.get("kid"))
        try:
            claims: dict[str, Any] = jwt.decode(
                token, key.key, algorithms=[algorithm], issuer=issuer, leeway=self.skew,
                options={"require": ["exp", "iss", "aud"], "verify_aud": False},
            )  # fmt: skip
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet") from None
        except jwt.PyJWTError as error:
            raise InvalidToken(f"the token does not verify: {error}") from None
        return issuer, claims

    async def _key(self, issuer: str, kid: Any) -> jwt.PyJWK:
        known = await self._issuer(issuer, need=lambda i: kid in i.keys)
        found = known.keys.get(kid)
        if found is None:
            raise InvalidToken(f"the issuer {issuer} has no signing key {kid!r}")
        return found

    async def _issuer(self, issuer: str, need: Any) -> _Issuer:
        """The issuer as known, fetched again when ``need`` does not hold of it and the last fetch
        is older than the refresh bound (so unknown ``kid``s cannot make us fetch in a loop)."""
        known = self._issuers.setdefault(issuer, _Issuer(issuer))
        if need(known):
            return known
        now = time.monotonic()
        if known.fetched_at is None or now - known.fetched_at >= self.refresh_seconds:
            known.fetched_at = now  # one fetch per interval, whatever comes of it
            try:
                known.metadata, known.keys = await self._fetch(issuer)
            except outbound.Refused as refused:
                raise InvalidToken(f"cannot read the issuer {issuer}: {refused}") from None
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
            for entry in jwks.get("keys", []) if isinstance(jwks, dict) else []:
                if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                    continue
                if entry.get("kty") == "oct":
                    continue  # a shared secret is never an asymmetric issuer's key
                try:
                    found[entry.get("kid")] = jwt.PyJWK(entry)
                except jwt.PyJWTError:
                    continue  # a key of a type this registry does not use
        return metadata, found

    # --- opaque tokens (RFC 7662) -------------------------------------------------------------

    async def _introspect(
        self, token: str, tenant: Tenant, trusted: Sequence[TenantIssuer]
    ) -> tuple[str, dict[str, Any]]:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        kept = self._introspected.get(digest)
        if kept is None or kept.until <= now:
            kept = await self._ask(token, trusted, now)
            self._introspected[digest] = kept
            self._introspected.move_to_end(digest)
            while len(self._introspected) > INTROSPECTED_KEPT:
                self._introspected.popitem(last=False)
        if kept.claims is None or kept.issuer is None:
            raise InvalidToken("the token is not active (its issuer's introspection says so)")
        if kept.issuer not in {i.issuer for i in trusted}:
            raise InvalidToken(f"tenant {tenant.slug!r} does not trust the issuer {kept.issuer!r}")
        claims = kept.claims
        wall = time.time()
        if isinstance(claims.get("exp"), int | float) and claims["exp"] + self.skew < wall:
            raise InvalidToken("the token has expired")
        if isinstance(claims.get("nbf"), int | float) and claims["nbf"] - self.skew > wall:
            raise InvalidToken("the token is not valid yet")
        return kept.issuer, claims

    async def _ask(self, token: str, trusted: Sequence[TenantIssuer], now: float) -> _Introspected:
        reasons = []
        for entry in trusted:
            if not entry.introspection_client_id or not entry.introspection_secret:
                continue
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
                    "POST", endpoint, seconds=FETCH_SECONDS, allow_private=self.allow_private,
                    form={"token": token, "token_type_hint": "access_token"},
                    headers={"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()},
                )  # fmt: skip
            except (outbound.Refused, RegistryError) as refused:
                reasons.append(f"{entry.issuer}: {refused}")
                continue
            if not isinstance(answer, dict) or answer.get("active") is not True:
                continue
            named = answer.get("iss", entry.issuer)
            issuer = named if isinstance(named, str) else None
            lasts = INTROSPECTION_SECONDS
            if isinstance(answer.get("exp"), int | float):
                lasts = max(0.0, min(lasts, float(answer["exp"]) - time.time()))
            return _Introspected(answer, issuer, now + lasts)
        if reasons:  # nobody said no, but some could not be asked: not kept, not accepted
            raise InvalidToken("the token could not be introspected: " + "; ".join(reasons))
        return _Introspected(None, None, now + INACTIVE_SECONDS)


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

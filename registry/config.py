"""Settings: read once at start-up from REGISTRY_* environment variables.

This module imports nothing from the rest of the package, so every layer may use it.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

ENV_PREFIX = "REGISTRY_"
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class SettingsError(Exception):
    """A setting is invalid; the message names the environment variable."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="ignore", frozen=True, validate_default=True
    )

    # Where the data lives. Unset database_url means: run the embedded PostgreSQL in data_dir.
    database_url: SecretStr | None = None
    # Where each worker LISTENs for changes, when the main URL goes through a transaction pooler
    # (PgBouncer in transaction mode drops LISTEN): point this at PostgreSQL directly.
    listen_url: SecretStr | None = None
    # Whether the database URL goes through a transaction pooler (PgBouncer in transaction mode, or
    # any pooler that keeps no named prepared statements): "transaction" makes every pooled
    # connection pooler-safe (no named statement outlives its transaction, no session state);
    # "none" keeps the driver's statement caches; "auto" assumes a pooler when a listen URL other
    # than the database URL is set, which is how a pooled deployment is configured.
    database_pooler: Literal["auto", "transaction", "none"] = "auto"
    # Streaming replicas that serve reads (comma-separated URLs); writes and LISTEN stay on the
    # primary. A replica further behind the primary than the lag bound is skipped until it catches up.
    read_database_urls: Annotated[list[SecretStr], NoDecode] = Field(default_factory=list)
    replica_max_lag_seconds: float = Field(default=10, ge=0, le=3600)
    data_dir: Path = Path(".registry")
    db_pool_size: int = Field(default=10, ge=1, le=200)
    db_max_overflow: int = Field(default=10, ge=0, le=200)
    # The most connections one worker opens on the primary (its ORM pool, its hot-path read pool
    # and its LISTEN connection). `registry serve` sets it from the server's max_connections and the
    # worker count unless the pool sizes above are given; unset, they decide.
    db_worker_connections: int | None = Field(default=None, ge=3, le=1000)

    # How `registry serve` listens.
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    # Unset: one per core this process may run on, as many as the server's connections allow
    # (`registry serve` decides: engine.default_workers).
    workers: int | None = Field(default=None, ge=1, le=64)

    log_level: LogLevel = "INFO"
    log_json: bool = False

    # Bearer token for the operator routes (tenant management over REST). Unset: those routes are off.
    operator_token: SecretStr | None = None
    # /metrics answers anyone when set; otherwise only the operator token.
    metrics_public: bool = False
    # Whether a worker freezes what its start-up and each full collection leave (registry/collector.py:
    # short collector pauses with warm caches). Off for the app embedded in a process of another
    # program's, whose objects it would freeze too (the in-process tests).
    gc_freeze: bool = True

    # The Ed25519 private key (PEM) that signs prompt snapshots (`registry snapshot`).
    snapshot_key_file: Path | None = None

    # MCP prompts/list page size: the default for tenants without their own, and the hard cap.
    page_size: int = Field(default=100, ge=1, le=1000)
    page_size_max: int = Field(default=1000, ge=1, le=10000)
    # 2026-07-28 caching hint: how long clients may keep a prompt list (tenants may set their own).
    list_ttl_ms: int = Field(default=60_000, ge=0)

    # Limits on what a client may send.
    max_request_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    max_argument_length: int = Field(default=65536, ge=1)
    # The most text one render may produce (a value inserted many times through partials could
    # otherwise turn a small request into a huge answer): -32602 / 422 past it.
    max_rendered_chars: int = Field(default=2_000_000, ge=1000)
    # The most bytes one answer that serves a rendering (prompts/get, a prompt's tool) may take as
    # JSON: a tool answer holds the rendering twice, and escaping can multiply text by six.
    max_answer_bytes: int = Field(default=8 * 1024 * 1024, ge=4096)
    # The longest one import may take (413 past it, nothing written): one request and its
    # transaction are not held for minutes.
    import_max_seconds: float = Field(default=30, gt=0, le=3600)
    max_blob_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    # A request body must arrive whole within this many seconds (408 otherwise).
    body_timeout_seconds: float = Field(default=30, gt=0, le=3600)
    # A request's head (its request line and headers) must arrive within this many seconds
    # (`registry serve` closes the connection otherwise).
    head_timeout_seconds: float = Field(default=10, gt=0, le=600)

    # The registry's public address, shown to MCP clients as serverInfo.websiteUrl when set.
    public_url: str | None = None
    # The longest an open SSE stream stays silent (a keep-alive comment after 3/4 of it to all of it).
    sse_keepalive_seconds: float = Field(default=15, gt=0, le=300)

    # OAuth (needs public_url, the canonical URI tokens are minted for): tokens' exp and nbf hold
    # within this many seconds of skew; the issuers' discovery documents, keys and introspection
    # endpoints may be reached at private addresses only when allowed.
    oauth_clock_skew_seconds: float = Field(default=60, ge=0, le=600)
    oauth_allow_private_issuers: bool = False
    # An issuer's keys are fetched again for an unknown kid at most this often.
    oauth_keys_refresh_seconds: float = Field(default=30, ge=0, le=86400)
    # The web console's client at tenants' issuers (authorization code with PKCE, public client;
    # its redirect URI is REGISTRY_PUBLIC_URL/ui/callback).
    console_client_id: str = Field(default="prompt-registry-console", min_length=1, max_length=200)

    # The serve ledger (registry.usage): every served answer counted in the worker's memory and
    # written every ``usage_flush_seconds`` (and at shutdown) in one statement; a worker killed
    # between flushes loses at most that interval's counts.
    usage_ledger: bool = True
    usage_flush_seconds: float = Field(default=5, gt=0, le=300)
    # The most distinct counters one worker holds between flushes: past it, it flushes early.
    usage_max_keys: int = Field(default=50_000, ge=100, le=5_000_000)
    # How long the per-minute and per-hour counts are kept (the per-day ones: each tenant's
    # usage_retention_days).
    usage_minute_days: int = Field(default=2, ge=1, le=31)
    usage_hour_days: int = Field(default=35, ge=1, le=3650)
    # Opt-in export of the same counts as OpenTelemetry metrics over OTLP/HTTP (protobuf), e.g.
    # http://collector:4318/v1/metrics; sent each flush. Unset: nothing leaves the server.
    usage_otlp_endpoint: str | None = None

    # How often each worker looks for rollouts whose step is due (registry.rollouts.scheduler).
    rollout_poll_seconds: float = Field(default=5, gt=0, le=3600)

    # The longest a commit may wait for the database to acknowledge it (a synchronous standby that
    # is gone makes every commit wait): past it the request is answered 503 with Retry-After, and
    # /readyz says not ready until a write is acknowledged again.
    commit_wait_seconds: float = Field(default=10, gt=0, le=600)

    # Webhooks: deliveries to private, loopback or link-local addresses are refused unless allowed;
    # each delivery must be answered within the timeout; a failed one is tried again after
    # retry_seconds times 1, 6, 24, 120, ... (about 40 hours in all); an endpoint failing for
    # disable_after_hours is disabled; workers look for due retries every poll_seconds.
    webhook_allow_private: bool = False
    webhook_timeout_seconds: float = Field(default=10, gt=0, le=120)
    webhook_retry_seconds: float = Field(default=5, gt=0, le=3600)
    webhook_disable_after_hours: float = Field(default=72, gt=0)
    webhook_poll_seconds: float = Field(default=5, gt=0, le=3600)

    # MCP sessions (session-era protocol revisions) expire after this much idle time.
    session_idle_seconds: int = Field(default=3600, ge=10)
    # Live sessions one key (or one anonymous client address) and one tenant may hold; the least
    # recently used go first.
    sessions_per_caller: int = Field(default=100, ge=1)
    sessions_per_tenant: int = Field(default=10_000, ge=1)
    # Open SSE streams (GET streams and subscriptions/listen) per worker process: per key (or
    # anonymous address), and per tenant. Past them a new stream is refused (429).
    streams_per_caller: int = Field(default=200, ge=1)
    streams_per_tenant: int = Field(default=1000, ge=1)
    # Connections one worker serves at once (503 past it); unset: 80% of its open-file limit, so
    # that the database, the listener and the logs always have descriptors left.
    max_connections: int | None = Field(default=None, ge=10)
    # Origins allowed to call the MCP endpoint from a browser; requests without Origin are allowed.
    allowed_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["http://localhost", "http://127.0.0.1", "http://[::1]"]
    )

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip().rstrip("/") for part in value.split(",") if part.strip()]
        return value

    @field_validator("read_database_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list):
            return [_postgres_url(part) for part in value]
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("database_url", "listen_url", mode="before")
    @classmethod
    def _check_url(cls, value: object) -> object:
        return _postgres_url(value)

    @model_validator(mode="after")
    def _listener_follows_failover(self) -> Settings:
        """A database URL naming several hosts finds a promoted primary by itself; a listen URL
        naming one would keep dialling the old primary after a failover (and /readyz would stay
        503), so it is refused."""
        if self.database_url is None or self.listen_url is None:
            return self
        several = _hosts(self.database_url.get_secret_value()) > 1
        if several and _hosts(self.listen_url.get_secret_value()) == 1:
            raise ValueError(
                "REGISTRY_LISTEN_URL names one host while REGISTRY_DATABASE_URL names several: "
                "after a failover the listener would stay on the old primary; give it the same "
                "hosts, with target_session_attrs=read-write"
            )
        return self

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    def database_dsn(self) -> str | None:
        """The database URL in SQLAlchemy's asyncpg form, or None for the embedded server."""
        if self.database_url is None:
            return None
        return to_asyncpg_url(self.database_url.get_secret_value())

    def read_dsns(self) -> list[str]:
        return [to_asyncpg_url(url.get_secret_value()) for url in self.read_database_urls]

    def listen_dsn(self) -> str | None:
        return to_asyncpg_url(self.listen_url.get_secret_value()) if self.listen_url else None

    @property
    def through_pooler(self) -> bool:
        """Whether pooled connections must be safe for a transaction pooler (see database_pooler)."""
        if self.database_pooler != "auto":
            return self.database_pooler == "transaction"
        listen = self.listen_dsn()
        return listen is not None and listen != self.database_dsn()


def _postgres_url(value: object) -> object:
    if value is None or value == "":
        return None
    text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
    scheme = text.split("://", 1)[0] if "://" in text else ""
    if scheme not in {"postgresql", "postgres", "postgresql+asyncpg"}:
        raise ValueError("must be a postgresql:// URL")
    return text


def _hosts(url: str) -> int:
    """How many servers a URL names: ``host=`` parameters, or comma-separated hosts in its
    address (``postgresql://a:5432,b:5432/db``)."""
    after = url.split("://", 1)[1]
    address = after.split("/", 1)[0].rpartition("@")[2]
    query = after.partition("?")[2]
    named = sum(1 for part in query.split("&") if part.startswith("host="))
    return max(named, len([h for h in address.split(",") if h]))


def to_asyncpg_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    if scheme in {"postgresql", "postgres"}:
        scheme = "postgresql+asyncpg"
    return f"{scheme}://{rest}"


def describe_validation_error(error: ValidationError) -> str:
    """One line naming the first bad variable, e.g. `REGISTRY_PORT: Input should be ...`."""
    first = error.errors()[0]
    message = first["msg"].removeprefix("Value error, ")
    if not first["loc"]:  # a rule across settings: its message names them
        return f"invalid settings: {message}"
    return f"invalid setting {ENV_PREFIX}{str(first['loc'][0]).upper()}: {message}"


def load_settings(**overrides: object) -> Settings:
    """Build the settings, turning a validation error into a SettingsError naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        raise SettingsError(describe_validation_error(error)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return load_settings()

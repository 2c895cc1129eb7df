"""Settings, built once at the entry point and passed down.

    settings = Settings.from_env()          # reads the environment (and $GATEWAY_CONFIG) once
    settings = Settings.from_env(config=Path("gateway.toml"))   # environment over the file
    settings = Settings(policy_dir=Path("policies"), database_url="sqlite:///audit.db")

An unusable value, from the environment or a keyword argument, raises ConfigurationError.

Nothing else in the library reads the environment. The API key, checkpoint key, record key
and user-id salt are ``SecretStr`` so that they never appear in a repr, a log line or an error
message. The database URL is a plain ``str`` for the code that opens the database, but every
rendering of the settings (``repr``, ``str``, ``model_dump``, ``model_dump_json``) shows it
with its password as ``***``, as does ``settings.database_url_masked``::

    Settings(database_url="postgresql+psycopg://app:s3cret@db/audit").database_url_masked
    # 'postgresql+psycopg://app:***@db/audit'

A dump is for showing, not for building settings again (its URL has no password): copy
settings with ``settings.model_copy(update={...})``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from gateway._config_file import CONFIG_ENV as CONFIG_ENV  # for the CLI: `serve` passes --config on
from gateway._config_file import FieldSpec, read_sources
from gateway.errors import ConfigurationError

DEFAULT_DATABASE_URL = "sqlite:///gateway-audit.db"
DEFAULT_POLICY_DIR = Path("policies")
MASK = "***"
# libpq (and so psycopg) also takes the password as a query parameter: ?password=...
_QUERY_PASSWORD = re.compile(r"([?&][^=&#]*(?:password|passwd|pwd)[^=&#]*=)[^&#]*", re.I)


class Durability(StrEnum):
    # fsync survives a power cut (SQLite synchronous=FULL, PostgreSQL synchronous_commit=on)
    FSYNC = "fsync"
    OS = "os"  # survives a process crash: SQLite synchronous=NORMAL


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    policy_dir: Path = DEFAULT_POLICY_DIR
    database_url: str = DEFAULT_DATABASE_URL
    durability: Durability = Durability.FSYNC
    # The audit log's format (docs/scaling.md): 1, one chain linked under a lock by every
    # writer; 2 (PostgreSQL only), seqs from a SEQUENCE and links made by `gateway audit
    # integrate`. A log in format 2 stays in it; a gateway or `audit integrate` with 2
    # begins it, and a gateway opened before follows it (audit.store._log_format).
    audit_format: Literal[1, 2] = 1
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    # Claude on AWS Bedrock and Google Vertex AI (docs/transports.md): where the transport is
    # reached; credentials come from each cloud's standard chain (boto3, google-auth), never
    # from here. A base URL replaces the region's endpoint (a VPC endpoint, a test fake).
    bedrock_region: str | None = None
    bedrock_profile: str | None = None
    bedrock_base_url: str | None = None
    vertex_project: str | None = None
    vertex_region: str | None = None
    vertex_base_url: str | None = None
    checkpoint_key: SecretStr | None = None
    # The record key signs every audit event this gateway writes (Ed25519; 32 bytes as hex or
    # base64): ``record_key`` itself, or a file holding it. Neither set and a SQLite database:
    # ``gateway-record.key`` next to the database file, created (mode 0600) on first write.
    # PostgreSQL needs one of the two. docs/security.md says where a bank keeps it.
    record_key: SecretStr | None = None
    record_key_file: Path | None = None
    # The cache key (32 bytes as hex) under which request hashes are keyed (HMAC-SHA256), held
    # like the record key, never in the database: ``cache_key`` itself, or a file. Neither:
    # ``gateway-cache.key`` beside the record key file, else beside a SQLite database,
    # created (mode 0600) on first write (gateway.keys.cache_key).
    cache_key: SecretStr | None = None
    cache_key_file: Path | None = None
    # Earlier cache keys (one a line, hex; # comments), kept so that subject tags recorded
    # under them are still found after the cache key is replaced (gateway.keys.cache_key_ring).
    previous_cache_keys_file: Path | None = None
    # Public keys (hex or base64) whose record signatures verify and the read path accept,
    # besides this gateway's own: other instances', a previous key's.
    trusted_keys: tuple[str, ...] = ()
    trusted_keys_file: Path | None = None  # one public key a line; # comments
    # Format 2: the integrator's public keys (`gateway audit integrate --key`'s). Accepted
    # for its checkpoints and void events only, never as a record key (a key listed here is
    # dropped from the trusted record keys): its holder must not be able to sign an answer.
    integrator_public_keys: tuple[str, ...] = ()
    # Verify: format-2 events pending integration longer than this are a STALLED finding.
    integration_stalled_after_s: float = Field(default=600.0, gt=0)
    # `gateway policy approve`: the approver's Ed25519 key (32 bytes as hex or base64) that
    # signs a task's fingerprint. With ``require_approvals`` = N a task loads only when its
    # exact fingerprint has N approvals by distinct approvers (gateway.evidence).
    approver_key: SecretStr | None = None
    require_approvals: int = Field(default=0, ge=0)
    # Approver key pinning: approver name -> Ed25519 public key (hex or base64), given here
    # or in a TOML/JSON file (``name = "<64 hex>"``). With either set, an approval counts only
    # when signed by its approver's pinned key; unset, any key that signs counts
    # (gateway.evidence.trusted_approvers reads both).
    trusted_approvers: dict[str, str] | None = None
    trusted_approvers_file: Path | None = None
    # With approvals required and no approver pinned, the gateway refuses to start (one
    # person holding two keys would pass four eyes); this, named unsafe, lets it start with
    # a warning each time.
    unsafe_unpinned_approvers: bool = False
    # The caller recorded for a request that names none. Requests that leave the machine
    # must name a caller (the audit trail and the information barrier need one) unless this
    # is set; a service with one identity sets it once instead of on every call.
    default_caller: str | None = None
    # The per-deployment secret under which a caller's name becomes the opaque, stable
    # ``metadata.user_id`` a policy may forward (HMAC-SHA256; [caller] forward_user_id).
    user_id_salt: SecretStr | None = None
    catalog_override: Path | None = None
    request_timeout_s: float = Field(default=600.0, gt=0)
    max_attempts: int = Field(default=4, ge=1)
    retry_after_cap_s: float = Field(default=60.0, ge=0)
    retry_backoff_base_s: float = Field(default=0.5, ge=0)
    # `gateway serve`: the largest request body accepted (413 beyond), the time a request may
    # take before the server answers 504, how long a shutdown waits for requests in flight,
    # and how often each worker re-reads caller keys (so a revocation applies within it).
    server_max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    server_request_timeout_s: float = Field(default=600.0, gt=0)
    server_shutdown_grace_s: float = Field(default=30.0, ge=0)
    server_key_refresh_s: float = Field(default=10.0, gt=0)
    # `gateway serve`, against slow and idle connections (gateway/server/_protocol.py): the
    # time a request's line and headers, then its whole body, may take to arrive (408 and
    # closed beyond), and how many connections a worker holds, in all and from one client
    # address (503 and closed beyond; 0 per peer: no per-peer cap, for a proxy in front).
    server_header_timeout_s: float = Field(default=15.0, gt=0)
    server_body_timeout_s: float = Field(default=60.0, gt=0)
    server_max_connections: int = Field(default=1024, ge=1)
    server_max_connections_per_peer: int = Field(default=128, ge=0)
    # `gateway serve`: send ``x-gateway-seq`` (the answer's audit seq). Off by default: the
    # seq counts every caller's events, so its steps tell one caller what others did.
    server_seq_header: bool = False
    # `gateway serve`: one OpenTelemetry span per Messages request (GenAI semantic
    # conventions, never content); needs the ``otel`` extra. Exporters are OpenTelemetry's
    # own OTEL_* variables (docs/server.md).
    server_otel: bool = False
    # `gateway serve` over TLS: the server's certificate chain and its private key (PEM
    # files). Both or neither; unset, it serves plain HTTP (behind a TLS-terminating proxy).
    server_tls_cert: Path | None = None
    server_tls_key: Path | None = None
    # Mutual TLS: the CA file (PEM) client certificates must chain to; set, a client without
    # a valid certificate is refused in the handshake (beside its caller key). With
    # ``server_tls_client_caller`` the certificate's common name must also be the caller
    # key's caller: a key copied off one service is no use to a host with another's cert.
    server_tls_client_ca: Path | None = None
    server_tls_client_caller: bool = False
    # `gateway serve`: the bearer token a Prometheus scrape of /metrics sends. Unset, there
    # is no /metrics. Not a caller key: callers never see other callers' traffic.
    server_metrics_token: SecretStr | None = None

    @property
    def database_url_masked(self) -> str:
        """The database URL as it may be printed or logged: any password is ``***``."""
        return mask_database_url(self.database_url)

    @field_serializer("database_url")
    def _dump_database_url(self, value: str) -> str:
        return mask_database_url(value)

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # repr() and str() of a pydantic model are built from these pairs.
        for name, value in super().__repr_args__():
            yield name, (mask_database_url(value) if name == "database_url" else value)

    @field_validator("audit_format", mode="before")
    @classmethod
    def _format_number(cls, value: object) -> object:
        if isinstance(value, str) and value.strip() in ("1", "2"):  # GATEWAY_AUDIT_FORMAT
            return int(value)
        return value

    @model_validator(mode="after")
    def _tls_needs_both(self) -> Settings:
        if (self.server_tls_cert is None) != (self.server_tls_key is None):
            raise ValueError(
                "TLS needs both GATEWAY_SERVER_TLS_CERT and GATEWAY_SERVER_TLS_KEY "
                "(--tls-cert and --tls-key), or neither"
            )
        if self.server_tls_client_ca is not None and self.server_tls_cert is None:
            raise ValueError(
                "client certificates (GATEWAY_SERVER_TLS_CLIENT_CA, --tls-client-ca) need TLS: "
                "set GATEWAY_SERVER_TLS_CERT and GATEWAY_SERVER_TLS_KEY too"
            )
        if self.server_tls_client_caller and self.server_tls_client_ca is None:
            raise ValueError(
                "GATEWAY_SERVER_TLS_CLIENT_CALLER (--tls-client-caller) needs client "
                "certificates: set GATEWAY_SERVER_TLS_CLIENT_CA too"
            )
        return self

    @model_validator(mode="after")
    def _format_needs_postgres(self) -> Settings:
        if self.audit_format == 2 and not self.database_url.startswith("postgresql"):
            raise ValueError(
                "GATEWAY_AUDIT_FORMAT=2 needs a PostgreSQL GATEWAY_DATABASE_URL (format 2 "
                "takes seqs from a PostgreSQL SEQUENCE); unset it for SQLite"
            )
        return self

    @field_validator("trusted_approvers", mode="before")
    @classmethod
    def _name_key_pairs(cls, value: object) -> object:
        if isinstance(value, str):  # GATEWAY_TRUSTED_APPROVERS: name=key, comma-separated
            pairs = [part.strip().partition("=") for part in value.split(",") if part.strip()]
            if any(not sep or not name.strip() for name, sep, _ in pairs):
                raise ValueError("expected name=public-key pairs, comma-separated")
            return {name.strip(): key.strip() for name, _, key in pairs}
        return value

    @field_validator("trusted_keys", "integrator_public_keys", mode="before")
    @classmethod
    def _comma_separated(cls, value: object) -> object:
        if isinstance(value, str):  # GATEWAY_TRUSTED_KEYS: comma-separated
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    def __init__(self, **values: object) -> None:
        # Keyword settings (Settings(...), Gateway(durability=...)) are checked like the
        # environment's: an unusable value is a ConfigurationError, never pydantic's own.
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise _unusable(exc) from None

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        config: Path | None = None,
        **overrides: object,
    ) -> Settings:
        """The settings of the config file (``config``, else ``$GATEWAY_CONFIG``, else none),
        the environment over it, and ``overrides`` over both."""
        return explain_settings(environ, config=config, **overrides).settings


class Explained(NamedTuple):
    settings: Settings
    # Where each setting came from: "default", "config PATH", "env VAR", "argument".
    origins: Mapping[str, str]
    config: Path | None


def explain_settings(
    environ: Mapping[str, str] | None = None,
    *,
    config: Path | None = None,
    **overrides: object,
) -> Explained:
    """The effective settings and where each value came from (`gateway config show`)."""
    found = read_sources(FIELDS, environ=os.environ if environ is None else environ, config=config)
    values = dict(found.values)
    origins = dict(found.origins)
    for name, value in overrides.items():
        if value is not None:
            values[name] = value
            origins[name] = "argument"
    settings = Settings(**values)
    every = {name: origins.get(name, "default") for name in Settings.model_fields}
    return Explained(settings, MappingProxyType(every), found.config)


# Every setting with its environment variable; what the config file and the environment may
# set. A secret marked file_ok may also be a file's content (NAME_file, VAR_FILE).
FIELDS: Mapping[str, FieldSpec] = MappingProxyType(
    {
        "policy_dir": FieldSpec("GATEWAY_POLICY_DIR", path=True),
        "database_url": FieldSpec("GATEWAY_DATABASE_URL", file_ok=True, sqlite_url=True),
        "durability": FieldSpec("GATEWAY_DURABILITY"),
        "audit_format": FieldSpec("GATEWAY_AUDIT_FORMAT"),
        "checkpoint_key": FieldSpec("GATEWAY_CHECKPOINT_KEY", file_ok=True),
        # record_key_file is a setting of its own (the signer reads the file itself).
        "record_key": FieldSpec("GATEWAY_RECORD_KEY"),
        "record_key_file": FieldSpec("GATEWAY_RECORD_KEY_FILE", path=True),
        "cache_key": FieldSpec("GATEWAY_CACHE_KEY"),  # cache_key_file: a setting of its own
        "cache_key_file": FieldSpec("GATEWAY_CACHE_KEY_FILE", path=True),
        "previous_cache_keys_file": FieldSpec("GATEWAY_PREVIOUS_CACHE_KEYS_FILE", path=True),
        "trusted_keys": FieldSpec("GATEWAY_TRUSTED_KEYS"),
        "trusted_keys_file": FieldSpec("GATEWAY_TRUSTED_KEYS_FILE", path=True),
        "integrator_public_keys": FieldSpec("GATEWAY_INTEGRATOR_PUBLIC_KEYS"),
        "integration_stalled_after_s": FieldSpec("GATEWAY_INTEGRATION_STALLED_AFTER_S"),
        "approver_key": FieldSpec("GATEWAY_APPROVER_KEY", file_ok=True),
        "require_approvals": FieldSpec("GATEWAY_REQUIRE_APPROVALS"),
        "trusted_approvers": FieldSpec("GATEWAY_TRUSTED_APPROVERS"),
        "trusted_approvers_file": FieldSpec("GATEWAY_TRUSTED_APPROVERS_FILE", path=True),
        "unsafe_unpinned_approvers": FieldSpec("GATEWAY_UNSAFE_UNPINNED_APPROVERS"),
        "default_caller": FieldSpec("GATEWAY_DEFAULT_CALLER"),
        "user_id_salt": FieldSpec("GATEWAY_USER_ID_SALT", file_ok=True),
        "catalog_override": FieldSpec("GATEWAY_CATALOG_OVERRIDE", path=True),
        "anthropic_api_key": FieldSpec("ANTHROPIC_API_KEY", file_ok=True),
        "anthropic_base_url": FieldSpec("ANTHROPIC_BASE_URL"),
        "bedrock_region": FieldSpec("GATEWAY_BEDROCK_REGION"),
        "bedrock_profile": FieldSpec("GATEWAY_BEDROCK_PROFILE"),
        "bedrock_base_url": FieldSpec("GATEWAY_BEDROCK_BASE_URL"),
        "vertex_project": FieldSpec("GATEWAY_VERTEX_PROJECT"),
        "vertex_region": FieldSpec("GATEWAY_VERTEX_REGION"),
        "vertex_base_url": FieldSpec("GATEWAY_VERTEX_BASE_URL"),
        "request_timeout_s": FieldSpec("GATEWAY_REQUEST_TIMEOUT_S"),
        "max_attempts": FieldSpec("GATEWAY_MAX_ATTEMPTS"),
        "retry_after_cap_s": FieldSpec("GATEWAY_RETRY_AFTER_CAP_S"),
        "retry_backoff_base_s": FieldSpec("GATEWAY_RETRY_BACKOFF_BASE_S"),
        "server_max_body_bytes": FieldSpec("GATEWAY_SERVER_MAX_BODY_BYTES"),
        "server_request_timeout_s": FieldSpec("GATEWAY_SERVER_REQUEST_TIMEOUT_S"),
        "server_shutdown_grace_s": FieldSpec("GATEWAY_SERVER_SHUTDOWN_GRACE_S"),
        "server_key_refresh_s": FieldSpec("GATEWAY_SERVER_KEY_REFRESH_S"),
        "server_header_timeout_s": FieldSpec("GATEWAY_SERVER_HEADER_TIMEOUT_S"),
        "server_body_timeout_s": FieldSpec("GATEWAY_SERVER_BODY_TIMEOUT_S"),
        "server_max_connections": FieldSpec("GATEWAY_SERVER_MAX_CONNECTIONS"),
        "server_max_connections_per_peer": FieldSpec("GATEWAY_SERVER_MAX_CONNECTIONS_PER_PEER"),
        "server_seq_header": FieldSpec("GATEWAY_SERVER_SEQ_HEADER"),
        "server_otel": FieldSpec("GATEWAY_OTEL"),
        "server_tls_cert": FieldSpec("GATEWAY_SERVER_TLS_CERT", path=True),
        "server_tls_key": FieldSpec("GATEWAY_SERVER_TLS_KEY", path=True),
        "server_tls_client_ca": FieldSpec("GATEWAY_SERVER_TLS_CLIENT_CA", path=True),
        "server_tls_client_caller": FieldSpec("GATEWAY_SERVER_TLS_CLIENT_CALLER"),
        "server_metrics_token": FieldSpec("GATEWAY_SERVER_METRICS_TOKEN", file_ok=True),
    }
)


def mask_database_url(url: str) -> str:
    """``url`` with its password, in the user part or the query, shown as ``***``.

    Parsed as the audit store parses it (SQLAlchemy's URL). A string that does not parse, or
    has more than one ``@`` (a password with an unquoted ``@`` would show its tail), loses
    everything between the scheme and its last ``@`` instead, the user name too.
    """
    shown = _rendered(url) if url.count("@") <= 1 else None
    if shown is None:
        head, at, host = url.rpartition("@")
        scheme, sep, _credentials = head.rpartition("://")
        shown = f"{scheme}{sep}{MASK}@{host}" if at else url
    return _QUERY_PASSWORD.sub(rf"\g<1>{MASK}", shown)


def _rendered(url: str) -> str | None:
    # SQLAlchemy loads here, when a URL is shown: a command that shows none starts without it.
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    # Without a password the URL is shown as written (a SQLite path keeps its spelling).
    return url if parsed.password is None else parsed.render_as_string(hide_password=True)


def _unusable(exc: ValidationError) -> ConfigurationError:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    return ConfigurationError(
        f"setting {where!r} is not usable: {message}."
        if where
        else f"the settings are not usable: {message}.",
        hint="Check the setting in the config file, its GATEWAY_* environment variable or "
        "the keyword argument (`gateway config show` says which one set it).",
    )

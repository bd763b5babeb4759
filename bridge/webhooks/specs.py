"""The `webhooks:` section of the bridge config, validated into immutable specs.

Parsing uses pydantic models that forbid unknown keys; every problem becomes
`ConfigError(key, problem)` with the key path as an operator would write it
(`webhooks[1].timeout`). What leaves this module are frozen `WebhookSpec`
values, so nothing downstream touches pydantic or raw YAML.

URL forms:
- `unix:///run/policy.sock/v1/policies/qos`: HTTP over a Unix socket. The socket
  path runs up to and including the first path component ending in `.sock`;
  the rest is the HTTP path. Without a `.sock` component the whole path is the
  socket and the HTTP path is `/`.
- `https://host:port/path` or `http://host:port/path`. Plain http is refused
  for anything but a loopback host unless `allow_insecure_http: true`.

The files a webhook reads (`bearer_token_file`, `tls.*`) must pass the node's file rule
(bridge.file_trust, docs/security.md#files); `webhook_file_problems` lists every one
that does not, parsing refuses the first (unless told not to look, for `validate-config`,
which lists them all). A `unix://` policy must be served by root, the bridge's own uid or one
of `peer_uids` (checked on every connection: bridge.webhooks.client).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError

from bridge import file_trust
from bridge.contract.catalogue import EVENT_NAMES
from bridge.errors import ConfigError
from bridge.webhooks.kinds import DEFAULT_ALLOW, check_allow
from bridge.webhooks.selector import Operator, Requirement, Selector

DEFAULT_EVENTS = ("CreateContainer", "UpdateContainer", "StopContainer", "Synchronize")
DEFAULT_TIMEOUT_S = 1.0
MAX_TIMEOUT_S = 60.0  # the core delivers late Synchronize updates for at most 60 s
DEFAULT_FAILURE_THRESHOLD = 5
MAX_FAILURE_THRESHOLD = 1000
DEFAULT_COOL_DOWN_S = 10.0
_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")
_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m)?\s*$")
_UNITS_S = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


# -- immutable results ----------------------------------------------------------------


class WebhookFailurePolicy(Enum):
    IGNORE = "Ignore"
    FAIL = "Fail"


class Mode(Enum):
    ENFORCE = "enforce"
    SHADOW = "shadow"


@dataclass(frozen=True, slots=True)
class Endpoint:
    url: str  # as configured, for logs
    socket_path: str | None  # HTTP over this Unix socket, or None for TCP
    base_url: str  # scheme://host[:port] the HTTP client talks to
    path: str  # HTTP path (with query) to POST to


@dataclass(frozen=True, slots=True)
class TlsSpec:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False


@dataclass(frozen=True, slots=True)
class BreakerSpec:
    failure_threshold: int = DEFAULT_FAILURE_THRESHOLD
    cool_down_s: float = DEFAULT_COOL_DOWN_S


@dataclass(frozen=True, slots=True)
class WebhookSpec:
    name: str
    endpoint: Endpoint
    events: frozenset[str]
    timeout_s: float = DEFAULT_TIMEOUT_S
    sync_timeout_s: float = DEFAULT_TIMEOUT_S
    failure_policy: WebhookFailurePolicy = WebhookFailurePolicy.IGNORE
    mode: Mode = Mode.ENFORCE
    selector: Selector = field(default_factory=Selector)
    allow: frozenset[str] = DEFAULT_ALLOW
    tls: TlsSpec | None = None
    bearer_token_file: str | None = None
    breaker: BreakerSpec = field(default_factory=BreakerSpec)
    # uids besides root and our own that may serve a unix:// policy (SO_PEERCRED)
    peer_uids: frozenset[int] = frozenset()

    @property
    def peer_owners(self) -> frozenset[int]:
        """Who may own the policy's socket (and its directories) and serve it."""
        return file_trust.default_owners(self.peer_uids)


# -- parsing ----------------------------------------------------------------------------


def parse_duration(value: Any) -> float:
    """`500ms`, `2s`, `1.5s`, `1m`, or a plain number of seconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 500ms or 2s")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION_RE.match(value)):
        seconds = float(m.group(1)) * _UNITS_S[m.group(2)]
    else:
        raise ValueError(f"expected a duration like 500ms or 2s, got {value!r}")
    if not 0 < seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"must be more than 0 and at most {MAX_TIMEOUT_S:.0f}s")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Expression(_Strict):
    key: str = Field(min_length=1)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class _LabelSelector(_Strict):
    matchLabels: dict[str, str] = {}  # Kubernetes spelling
    matchExpressions: list[_Expression] = []


class _Tls(_Strict):
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure_skip_verify: bool = False


class _Breaker(_Strict):
    failure_threshold: int = Field(default=DEFAULT_FAILURE_THRESHOLD, ge=1,
                                   le=MAX_FAILURE_THRESHOLD)
    cool_down: Duration = DEFAULT_COOL_DOWN_S


# A Literal of the catalogue's event names, so a typo is refused naming the allowed ones; the
# type checker sees a plain str.
if TYPE_CHECKING:
    EventLiteral = str
else:
    EventLiteral = Literal[EVENT_NAMES]


class _Webhook(_Strict):
    name: str
    url: str
    events: list[EventLiteral] = list(DEFAULT_EVENTS)
    timeout: Duration = DEFAULT_TIMEOUT_S
    sync_timeout: Duration | None = None
    failure_policy: Literal["Ignore", "Fail"] = "Ignore"
    mode: Literal["enforce", "shadow"] = "enforce"
    namespaces: list[str] | None = None
    exclude_namespaces: list[str] = []
    pod_label_selector: _LabelSelector | None = None
    annotations: dict[str, str | list[str] | None] = {}
    runtime_handlers: list[str] | None = None
    allow: list[str] = sorted(DEFAULT_ALLOW)
    tls: _Tls | None = None
    bearer_token_file: str | None = None
    allow_insecure_http: bool = False
    circuit_breaker: _Breaker = Field(default_factory=_Breaker)
    peer_uids: list[Annotated[int, Field(ge=0, lt=2**32 - 1)]] = []


_WEBHOOKS = TypeAdapter(list[_Webhook])


def parse_webhooks(raw: Any, key: str = "webhooks", *,
                   check_files: bool = True) -> tuple[WebhookSpec, ...]:
    """Validate the `webhooks:` list; raises ConfigError naming the first bad key (with
    `check_files`, the first file that fails the file rule too)."""
    if raw is None:
        return ()
    try:
        models = _WEBHOOKS.validate_python(raw)
    except ValidationError as exc:
        raise ConfigError.first_of(exc.errors(), key) from None
    specs: list[WebhookSpec] = []
    seen: set[str] = set()
    for i, model in enumerate(models):
        where = f"{key}[{i}]"
        spec = _to_spec(model, where)
        if check_files and (problems := webhook_file_problems(spec, where)):
            raise problems[0]
        if spec.name in seen:
            raise ConfigError(f"{where}.name", f"duplicate webhook name {spec.name!r}")
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def webhook_from_url(url: str) -> WebhookSpec:
    """The `--policy-url` shortcut: one webhook named `policy` with every default."""
    try:
        return parse_webhooks([{"name": "policy", "url": url}])[0]
    except ConfigError as exc:
        raise ConfigError("--policy-url", exc.problem) from None


def _to_spec(m: _Webhook, where: str) -> WebhookSpec:
    if not _NAME_RE.match(m.name):
        raise ConfigError(f"{where}.name", f"{m.name!r} must be 1-63 characters of a-z, 0-9, "
                          "'.', '_', '-', starting and ending with a letter or digit")
    if not m.events:
        raise ConfigError(f"{where}.events", "must list at least one event")
    if len(set(m.events)) != len(m.events):
        raise ConfigError(f"{where}.events", "lists an event twice")
    allow = check_allow(m.allow, f"{where}.allow")
    if m.pod_label_selector is not None:
        for i, expr in enumerate(m.pod_label_selector.matchExpressions):
            needs_values = expr.operator in ("In", "NotIn")
            if needs_values != bool(expr.values):
                raise ConfigError(
                    f"{where}.pod_label_selector.matchExpressions[{i}].values",
                    f"{expr.operator} {'needs' if needs_values else 'takes no'} values")
    if m.peer_uids and not m.url.startswith("unix:"):
        raise ConfigError(f"{where}.peer_uids", "applies only to unix:// URLs")
    endpoint = _endpoint(m, where)
    tls = _tls(m, endpoint, where)
    return WebhookSpec(
        name=m.name,
        endpoint=endpoint,
        events=frozenset(m.events),
        timeout_s=m.timeout,
        sync_timeout_s=m.sync_timeout if m.sync_timeout is not None else m.timeout,
        failure_policy=WebhookFailurePolicy(m.failure_policy),
        mode=Mode(m.mode),
        selector=_selector(m),
        allow=allow,
        tls=tls,
        bearer_token_file=m.bearer_token_file,
        breaker=BreakerSpec(m.circuit_breaker.failure_threshold, m.circuit_breaker.cool_down),
        peer_uids=frozenset(m.peer_uids),
    )


def webhook_files(spec: WebhookSpec, where: str) -> list[tuple[str, str]]:
    """(key, path) of every file `spec` reads: the token and the TLS files."""
    files = []
    if spec.bearer_token_file is not None:
        files.append((f"{where}.bearer_token_file", spec.bearer_token_file))
    if spec.tls is not None:
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(spec.tls, name)
            if path is not None:
                files.append((f"{where}.tls.{name}", path))
    return files


def webhook_file_problems(spec: WebhookSpec, where: str) -> list[ConfigError]:
    """Every file of `spec` that fails the file rule, as ConfigError(key, "PATH: problem")."""
    problems = []
    for key, path in webhook_files(spec, where):
        try:
            file_trust.check_file(path)
        except file_trust.UntrustedPath as exc:
            named = exc.problem if exc.path == path else f"{exc.path}: {exc.problem}"
            problems.append(ConfigError(key, f"{path}: {named}"))
    return problems


def _endpoint(m: _Webhook, where: str) -> Endpoint:
    key = f"{where}.url"
    parts = urlsplit(m.url)
    if parts.scheme == "unix":
        if parts.netloc:
            raise ConfigError(key, "expected unix:///absolute/path.sock[/http/path] "
                              "(three slashes: no host)")
        components = [c for c in parts.path.split("/") if c]
        if not parts.path.startswith("/") or not components:
            raise ConfigError(key, "expected unix:///absolute/path.sock[/http/path]")
        cut = next((i + 1 for i, c in enumerate(components) if c.endswith(".sock")),
                   len(components))
        socket_path = "/" + "/".join(components[:cut])
        http_path = "/" + "/".join(components[cut:])
        if parts.query:
            http_path += "?" + parts.query
        return Endpoint(m.url, socket_path, "http://localhost", http_path)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise ConfigError(key, "missing host")
        try:
            _ = parts.port
        except ValueError as exc:
            raise ConfigError(key, str(exc)) from None
        if parts.scheme == "http" and not m.allow_insecure_http and not _loopback(parts.hostname):
            raise ConfigError(key, f"plain http to non-loopback host {parts.hostname!r}; use "
                              "https, or set allow_insecure_http: true")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return Endpoint(m.url, None, f"{parts.scheme}://{parts.netloc}", path)
    raise ConfigError(key, "expected unix:///path.sock/..., http://... or https://...")


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _tls(m: _Webhook, endpoint: Endpoint, where: str) -> TlsSpec | None:
    if m.tls is None:
        return None
    key = f"{where}.tls"
    if not endpoint.base_url.startswith("https://"):
        raise ConfigError(key, "applies only to https:// URLs")
    if (m.tls.cert_file is None) != (m.tls.key_file is None):
        raise ConfigError(key, "cert_file and key_file go together")
    return TlsSpec(m.tls.ca_file, m.tls.cert_file, m.tls.key_file, m.tls.insecure_skip_verify)


def _selector(m: _Webhook) -> Selector:
    labels: list[Requirement] = []
    if m.pod_label_selector is not None:
        labels += [Requirement(k, Operator.IN, frozenset({v}))
                   for k, v in sorted(m.pod_label_selector.matchLabels.items())]
        labels += [Requirement(e.key, Operator(e.operator), frozenset(e.values))
                   for e in m.pod_label_selector.matchExpressions]
    annotations = tuple(
        (k, None if v is None else frozenset([v] if isinstance(v, str) else v))
        for k, v in sorted(m.annotations.items()))
    return Selector(
        namespaces=frozenset(m.namespaces) if m.namespaces is not None else None,
        exclude_namespaces=frozenset(m.exclude_namespaces),
        labels=tuple(labels),
        annotations=annotations,
        runtime_handlers=(frozenset(m.runtime_handlers) if m.runtime_handlers is not None
                          else None),
    )

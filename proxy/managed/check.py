"""Validating managed upstreams before latchgate starts: binary, model file, ports.

Everything that can be known before a llama-server starts is checked here, so that a missing
binary, a missing or broken model or a port in use is one line and exit status 2, not a
traceback or a server that fails on the first request. It also settles what the settings left
open: the binary's path, and the window of a model whose `ctx` was not given.
"""

from __future__ import annotations

import socket

from proxy.managed.binary import BinaryError, find_binary
from proxy.managed.command import HOST
from proxy.managed.gguf import GgufError, read_info
from proxy.settings import ConfigError, ManagedConfig, Settings

# A model's trained window can be 128k or more: its KV cache for every slot would not fit in
# most machines' memory, so the default window is capped (`ctx` sets any other).
DEFAULT_CTX_CAP = 32768
FALLBACK_CTX = 8192  # a model whose file does not say its window


def check_managed(settings: Settings) -> None:
    """Raise ConfigError for the first managed upstream that cannot start; fill in binaries
    and windows."""
    managed = settings.managed
    if not managed:
        return
    if settings.workers > 1:
        raise ConfigError(
            "managed llama-servers are run by one latchgate process: use --workers 1 (the "
            "model server is the bottleneck; raise its --parallel instead)"
        )
    ports: dict[int, str] = {settings.port: "latchgate itself"} if settings.port else {}
    for upstream in managed:
        config = upstream.managed
        assert config is not None  # `settings.managed` holds only these
        try:
            _check_one(config, settings.llama_server)
        except (BinaryError, GgufError) as exc:
            raise ConfigError(f"{upstream.name}: {exc}") from None
        if config.port:
            _check_port(upstream.name, config.port, ports)


def _check_one(config: ManagedConfig, default_binary: str | None) -> None:
    config.llama_server = str(find_binary(config.llama_server or default_binary))
    info = read_info(config.model)
    if config.ctx is None:
        trained = info.context_length or FALLBACK_CTX
        config.ctx = min(trained, DEFAULT_CTX_CAP)


def _check_port(name: str, port: int, taken: dict[int, str]) -> None:
    if port in taken:
        raise ConfigError(f"{name}: port {port} is also given to {taken[port]}; give each its own")
    taken[port] = name
    if not port_free(port):
        raise ConfigError(
            f"{name}: port {port} on {HOST} is in use; stop what listens there, or leave the "
            "port out and latchgate picks a free one"
        )


def port_free(port: int) -> bool:
    """Whether `port` can be bound on the loopback address now."""
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port free on the loopback address now (the kernel's choice)."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])

"""Window discovery: each source, their precedence, and the caching rules, with a fake fetch."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from proxy.agent.windows import (
    WindowDiscovery,
    find_entry,
    trained_window_from_models_entry,
    window_from_lmstudio,
    window_from_models_entry,
    window_from_ollama_show,
    window_from_props,
)

Answer = tuple[int, object | None] | BaseException


class FakeServer:
    """Answers (method, path) from a table; counts every call; can hold answers on a gate."""

    def __init__(self, routes: dict[tuple[str, str], Answer]) -> None:
        self.routes = routes
        self.calls: Counter[tuple[str, str]] = Counter()
        self.bodies: list[object | None] = []
        self.gate: asyncio.Event | None = None

    async def __call__(self, method: str, path: str, body: object | None) -> tuple[int, object]:
        self.calls[(method, path)] += 1
        self.bodies.append(body)
        if self.gate is not None:
            await self.gate.wait()
        answer = self.routes.get((method, path), (404, {"error": {"message": "File Not Found"}}))
        if isinstance(answer, BaseException):
            raise answer
        return answer

    @property
    def total(self) -> int:
        return sum(self.calls.values())


MODELS = ("GET", "/v1/models")
PROPS = ("GET", "/props")
LMSTUDIO = ("GET", "/api/v0/models")
SHOW = ("POST", "/api/show")

# llama.cpp -c 4096 --parallel 2 (research (g)): per-slot 2048 in meta, trained 32768.
LLAMA_LISTING = {
    "object": "list",
    "data": [
        {
            "id": "qwen",
            "object": "model",
            "meta": {"n_ctx": 16384, "n_ctx_train": 32768, "n_params": 494032768},
        }
    ],
    "models": [{"name": "qwen", "model": "qwen"}],
}
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 16384, "n_predict": -1}, "total_slots": 2}
VLLM_LISTING = {"data": [{"id": "meta/llama", "max_model_len": 32768}]}
PLAIN_LISTING = {"data": [{"id": "m", "object": "model", "owned_by": "me"}]}
TRAINED_ONLY = {"data": [{"id": "m", "meta": {"n_ctx_train": 131072}}]}
LMSTUDIO_LISTING = {
    "data": [
        {
            "id": "m",
            "state": "loaded",
            "max_context_length": 131072,
            "loaded_context_length": 12288,
        },
        {"id": "other", "state": "not-loaded", "max_context_length": 32768},
    ]
}
OLLAMA_SHOW = {
    "parameters": 'num_ctx                        24576\nstop                    "<|im_end|>"',
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}
OLLAMA_SHOW_DEFAULT = {
    "parameters": 'stop "<|im_end|>"',
    "model_info": {"qwen2.context_length": 32768},
}


# -- the pure readers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"id": "a", "context_length": 128000}, 128000),
        ({"id": "a", "max_context_window": 64000}, 64000),
        ({"id": "a", "max_model_len": 32768}, 32768),
        ({"id": "a", "context_window": 16000}, 16000),
        ({"id": "a", "n_ctx": 8192}, 8192),
        ({"id": "a", "context_length": 0, "max_model_len": 4096}, 4096),
        ({"id": "a", "context_length": None, "context_window": 9000.0}, 9000),
        ({"id": "a", "context_length": True, "n_ctx": "8192"}, None),
        ({"id": "a", "max_model_len": 1000, "context_length": 2000}, 2000),
        ({"id": "a", "meta": {"n_ctx": 2048, "n_ctx_train": 32768}}, 2048),
        ({"id": "a", "meta": {"n_ctx_train": 32768}}, None),
        ({"id": "a"}, None),
    ],
)
def test_window_from_models_entry(entry: dict[str, object], expected: int | None) -> None:
    assert window_from_models_entry(entry) == expected


def test_trained_window() -> None:
    assert trained_window_from_models_entry({"meta": {"n_ctx_train": 32768}}) == 32768
    assert trained_window_from_models_entry({"n_ctx_train": 4096}) == 4096
    assert trained_window_from_models_entry({"meta": "x"}) is None


def test_find_entry_by_id_or_ollama_model_name() -> None:
    assert find_entry(VLLM_LISTING, "meta/llama") == VLLM_LISTING["data"][0]
    assert find_entry({"models": [{"model": "q:7b", "x": 1}]}, "q:7b") == {"model": "q:7b", "x": 1}
    assert find_entry(VLLM_LISTING, "other") is None
    assert find_entry([1, 2], "m") is None
    assert find_entry({"data": "nope"}, "m") is None


def test_window_from_props_is_the_per_slot_figure() -> None:
    assert (
        window_from_props({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 2})
        == 2048
    )
    assert window_from_props({"n_ctx": 4096}) is None
    assert window_from_props(None) is None


def test_window_from_lmstudio_needs_a_loaded_model() -> None:
    assert window_from_lmstudio(LMSTUDIO_LISTING, "m") == 12288
    assert window_from_lmstudio(LMSTUDIO_LISTING, "other") is None
    assert window_from_lmstudio(LMSTUDIO_LISTING, "absent") is None


def test_window_from_ollama_show() -> None:
    assert window_from_ollama_show(OLLAMA_SHOW) == 24576
    assert window_from_ollama_show(OLLAMA_SHOW_DEFAULT) == 32768
    assert window_from_ollama_show({"parameters": "num_ctx_extra 5"}) is None
    assert window_from_ollama_show({"model_info": {"general.context_length": 0}}) is None
    assert window_from_ollama_show("text") is None


# -- precedence ---------------------------------------------------------------------------------


async def test_configured_window_wins_without_any_request() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    discovery = WindowDiscovery(server, "vllm", {"meta/llama": 9000, "qwen*": 20000})
    assert await discovery.window("meta/llama") == 9000
    assert await discovery.window("qwen2.5-7b") == 20000
    assert server.total == 0


async def test_served_window_from_the_listing() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    discovery = WindowDiscovery(server, "vllm")
    assert await discovery.window("meta/llama") == 32768
    assert server.calls == Counter({MODELS: 1})


async def test_llama_listing_meta_n_ctx_beats_props_and_trained() -> None:
    server = FakeServer(
        {MODELS: (200, LLAMA_LISTING), PROPS: (200, {"default_generation_settings": {"n_ctx": 1}})}
    )
    discovery = WindowDiscovery(server, "llama.cpp")
    assert await discovery.window("qwen") == 16384
    assert server.calls == Counter({MODELS: 1})


async def test_llama_props_when_the_listing_has_no_window() -> None:
    server = FakeServer({MODELS: (200, TRAINED_ONLY), PROPS: (200, LLAMA_PROPS)})
    discovery = WindowDiscovery(server, "llama.cpp")
    assert await discovery.window("m") == 16384
    # props is per slot and global to the server: a model the listing does not name gets it too
    assert await discovery.window("alias") == 16384


async def test_lmstudio_loaded_context_length() -> None:
    server = FakeServer({MODELS: (200, PLAIN_LISTING), LMSTUDIO: (200, LMSTUDIO_LISTING)})
    discovery = WindowDiscovery(server, "lmstudio")
    assert await discovery.window("m") == 12288
    assert PROPS not in server.calls


async def test_ollama_show_is_posted_with_the_model() -> None:
    server = FakeServer({MODELS: (200, {"object": "list", "data": []}), SHOW: (200, OLLAMA_SHOW)})
    discovery = WindowDiscovery(server, "ollama")
    assert await discovery.window("qwen2.5:0.5b") == 24576
    assert server.bodies == [None, {"model": "qwen2.5:0.5b"}]


async def test_trained_window_is_the_last_resort() -> None:
    server = FakeServer({MODELS: (200, TRAINED_ONLY), SHOW: (200, {"parameters": ""})})
    discovery = WindowDiscovery(server, "generic")
    assert await discovery.window("m") == 131072
    assert server.calls == Counter({MODELS: 1, PROPS: 1, LMSTUDIO: 1, SHOW: 1})


async def test_generic_tries_every_source_in_order() -> None:
    server = FakeServer(
        {MODELS: (200, PLAIN_LISTING), LMSTUDIO: (200, LMSTUDIO_LISTING), SHOW: (200, OLLAMA_SHOW)}
    )
    discovery = WindowDiscovery(server, "generic")
    assert await discovery.window("m") == 12288  # LM Studio before Ollama
    assert list(server.calls) == [MODELS, PROPS, LMSTUDIO]


async def test_openai_kind_reads_only_the_listing() -> None:
    server = FakeServer({MODELS: (200, PLAIN_LISTING)})
    discovery = WindowDiscovery(server, "openai")
    assert await discovery.window("m") is None
    assert server.calls == Counter({MODELS: 1})


async def test_models_path_is_configurable() -> None:
    server = FakeServer({("GET", "/openai/v1/models"): (200, VLLM_LISTING)})
    discovery = WindowDiscovery(server, "vllm", models_path="/openai/v1/models")
    assert await discovery.window("meta/llama") == 32768


# -- caching ------------------------------------------------------------------------------------


async def test_a_found_window_is_cached() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    discovery = WindowDiscovery(server, "vllm")
    for _ in range(3):
        assert await discovery.window("meta/llama") == 32768
    assert server.total == 1
    assert discovery.known() == {"meta/llama": 32768}


async def test_a_missing_route_is_never_asked_again() -> None:
    server = FakeServer(
        {MODELS: (200, PLAIN_LISTING), PROPS: (404, None), LMSTUDIO: (405, None), SHOW: (501, None)}
    )
    clock = [0.0]
    discovery = WindowDiscovery(server, "generic", unknown_ttl=10.0, clock=lambda: clock[0])
    assert await discovery.window("m") is None
    assert await discovery.window("m") is None  # "unknown" remembered for 10 s: nothing asked
    assert server.total == 4
    clock[0] = 11.0
    assert await discovery.window("m") is None
    assert await discovery.window("other") is None
    assert server.calls == Counter({MODELS: 3, PROPS: 1, LMSTUDIO: 1, SHOW: 1})


async def test_a_connection_failure_is_asked_again_next_time() -> None:
    server = FakeServer({MODELS: ConnectionRefusedError(111, "refused")})
    discovery = WindowDiscovery(server, "vllm")
    assert await discovery.window("meta/llama") is None
    server.routes[MODELS] = (200, VLLM_LISTING)
    assert await discovery.window("meta/llama") == 32768
    assert server.calls[MODELS] == 2


async def test_a_timeout_or_5xx_is_not_remembered_either() -> None:
    server = FakeServer(
        {MODELS: TimeoutError(), PROPS: (503, {"error": {"message": "Loading model"}})}
    )
    discovery = WindowDiscovery(server, "llama.cpp")
    assert await discovery.window("qwen") is None
    server.routes[MODELS] = (500, None)
    assert await discovery.window("qwen") is None
    server.routes[MODELS] = (200, LLAMA_LISTING)
    assert await discovery.window("qwen") == 16384
    assert server.calls == Counter({MODELS: 3, PROPS: 2})


async def test_a_window_found_after_a_failed_better_source_is_used_but_not_kept() -> None:
    server = FakeServer({MODELS: (502, None), PROPS: (200, LLAMA_PROPS)})
    discovery = WindowDiscovery(server, "llama.cpp")
    assert await discovery.window("qwen") == 16384
    server.routes[MODELS] = (200, {"data": [{"id": "qwen", "meta": {"n_ctx": 8192}}]})
    assert await discovery.window("qwen") == 8192
    assert await discovery.window("qwen") == 8192
    assert server.calls == Counter({MODELS: 2, PROPS: 1})


async def test_ollama_404_for_an_unknown_model_does_not_retire_the_route() -> None:
    not_found = (404, {"error": "model 'nope' not found"})
    server = FakeServer({MODELS: (200, {"data": []}), SHOW: not_found})
    discovery = WindowDiscovery(server, "generic")
    assert await discovery.window("nope") is None
    server.routes[SHOW] = (200, OLLAMA_SHOW)
    assert await discovery.window("qwen") == 24576
    assert server.calls[SHOW] == 2


async def test_concurrent_lookups_share_one_probe() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    server.gate = asyncio.Event()
    discovery = WindowDiscovery(server, "vllm")
    lookups = [asyncio.ensure_future(discovery.window("meta/llama")) for _ in range(5)]
    await asyncio.sleep(0)
    server.gate.set()
    assert await asyncio.gather(*lookups) == [32768] * 5
    assert server.total == 1


async def test_a_cancelled_caller_does_not_cancel_the_shared_probe() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    server.gate = asyncio.Event()
    discovery = WindowDiscovery(server, "vllm")
    first = asyncio.ensure_future(discovery.window("meta/llama"))
    second = asyncio.ensure_future(discovery.window("meta/llama"))
    await asyncio.sleep(0)
    first.cancel()
    server.gate.set()
    assert await second == 32768
    assert server.total == 1


async def test_learn_and_forget() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    discovery = WindowDiscovery(server, "vllm", {"fixed": 10000})
    discovery.learn("qwen", 2048)  # from llama.cpp's exceed_context_size_error n_ctx
    discovery.learn("fixed", 99)  # config wins
    assert await discovery.window("qwen") == 2048
    assert await discovery.window("fixed") == 10000
    assert server.total == 0
    discovery.forget("qwen")
    assert await discovery.window("qwen") is None
    assert server.total == 1


async def test_known_lists_configured_and_discovered_windows() -> None:
    server = FakeServer({MODELS: (200, VLLM_LISTING)})
    discovery = WindowDiscovery(server, "vllm", {"a": 8192, "bad": 0})
    await discovery.window("meta/llama")
    assert discovery.known() == {"a": 8192, "meta/llama": 32768}

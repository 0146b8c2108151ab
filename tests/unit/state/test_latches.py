"""The latch store: endpoint ids, learn/view/generation, reset, expire, held, describe, notices."""

from __future__ import annotations

import hashlib

from proxy.agent.negotiate import refusal_notice
from proxy.state.latches import EndpointLatches, LatchStore, ModelLatches, Refusal, endpoint_id

EID = "e" * 64


def test_endpoint_id_matches_hand_computed_digest() -> None:
    expected = hashlib.sha256(b'["http://x","agent-core"]').hexdigest()
    assert endpoint_id("http://x", None) == expected
    assert endpoint_id("http://x", "") == expected


def test_endpoint_id_with_key_and_non_ascii() -> None:
    assert endpoint_id("http://x/v1", "sk-1") == hashlib.sha256(
        b'["http://x/v1","sk-1"]').hexdigest()
    assert endpoint_id("http://\u00e9t\u00e9", "k\"\\") == hashlib.sha256(
        '["http://\u00e9t\u00e9","k\\"\\\\"]'.encode()).hexdigest()


def test_endpoint_id_distinguishes_keys_and_no_key() -> None:
    ids = {endpoint_id("http://x", k) for k in (None, "a", "b")}
    assert len(ids) == 3
    assert endpoint_id("http://x", None) != endpoint_id("http://x/", None)


def test_view_unknown_is_permissive_and_creates_nothing() -> None:
    store = LatchStore()
    endpoint, model = store.view(EID, "m")
    assert endpoint == EndpointLatches()
    assert model == ModelLatches()
    assert store.describe() == []
    assert store.generation == 0


def test_learn_each_model_latch() -> None:
    for capability in ("reasoning_effort", "legacy_token_limit", "chosen_temperature",
                       "structured_output", "native_tools"):
        store = LatchStore()
        assert store.learn(EID, "m", Refusal(capability), upstream="u") is True
        _, model = store.view(EID, "m")
        assert getattr(model, capability) is False
        assert model.since > 0
        assert store.view(EID, "other")[1] == ModelLatches()


def test_learn_endpoint_latches_are_shared_by_models() -> None:
    store = LatchStore()
    assert store.learn(EID, "m", Refusal("strict_schemas")) is True
    assert store.learn(EID, "m", Refusal("usage_in_stream")) is True
    endpoint, model = store.view(EID, "other")
    assert (endpoint.strict_schemas, endpoint.usage_in_stream) == (False, False)
    assert endpoint.models == {}  # an endpoint latch creates no model entry
    assert model == ModelLatches()


def test_learn_fields_and_efforts_grow() -> None:
    store = LatchStore()
    store.learn(EID, "m", Refusal("refused_field", fields=("top_k",)))
    store.learn(EID, "m", Refusal("refused_field", fields=("min_p", "top_k")))
    store.learn(EID, "m", Refusal("effort_value", refused_effort="none", next_effort="low",
                                  supported_efforts=("low", "medium", "high")))
    store.learn(EID, "m", Refusal("effort_value", refused_effort="low", next_effort="medium",
                                  supported_efforts=("medium", "high", "none")))
    _, model = store.view(EID, "m")
    assert model.refused_fields == {"top_k", "min_p"}
    assert model.refused_efforts == {"none", "low"}
    assert model.supported_efforts == ["medium", "high"]  # narrowed, never widened


def test_learn_effort_with_tools() -> None:
    store = LatchStore()
    assert store.learn(EID, "m", Refusal("effort_value", effort_with_tools="none")) is True
    assert store.view(EID, "m")[1].effort_with_tools == "none"
    assert store.learn(EID, "m", Refusal("effort_value", effort_with_tools="low")) is False


def test_learn_nothing_new_returns_false_and_keeps_generation() -> None:
    store = LatchStore()
    store.learn(EID, "m", Refusal("chosen_temperature"))
    generation = store.generation
    assert store.learn(EID, "m", Refusal("chosen_temperature")) is False
    assert store.generation == generation


def test_learn_that_teaches_nothing_creates_no_entry() -> None:
    store = LatchStore()
    assert store.learn(EID, "m", Refusal("refused_field", fields=())) is False
    assert store.describe() == []


def test_generation_bumps_on_every_change() -> None:
    store = LatchStore()
    store.learn(EID, "m", Refusal("native_tools"))
    store.learn(EID, "m", Refusal("strict_schemas"))
    assert store.generation == 2
    store.reset()
    assert store.generation == 3
    store.reset()
    assert store.generation == 3


def test_reset_all_one_endpoint_one_model() -> None:
    store = LatchStore()
    for eid in ("a", "b"):
        for model in ("m1", "m2"):
            store.learn(eid, model, Refusal("native_tools"))
    assert store.reset("a", "m1") == 1
    assert store.view("a", "m1")[1] == ModelLatches()
    assert store.view("a", "m2")[1].native_tools is False
    assert store.reset(None, "m2") == 2
    assert store.reset("a") == 0  # its last model went, so the endpoint went too
    assert store.reset("b") == 1
    assert store.describe() == []
    store.learn("c", "m", Refusal("native_tools"))
    store.learn("d", "m", Refusal("strict_schemas"))
    assert store.reset() == 2
    assert store.reset() == 0


def test_expire_removes_only_old_latches() -> None:
    store = LatchStore()
    store.learn(EID, "old", Refusal("native_tools"))
    store.learn(EID, "new", Refusal("native_tools"))
    store.learn(EID, "new", Refusal("strict_schemas"))
    endpoint, old = store.view(EID, "old")
    old.since = 1000.0
    endpoint.latched_since = 1000.0
    store.view(EID, "new")[1].since = 5000.0
    generation = store.generation
    assert store.expire(2000, now=5100.0) == 2  # the old model and the endpoint's own latch
    endpoint, _ = store.view(EID, "x")
    assert (endpoint.strict_schemas, list(endpoint.models)) == (True, ["new"])
    assert store.generation == generation + 1
    assert store.expire(2000, now=5100.0) == 0
    assert store.expire(0, now=6000.0) == 1
    assert store.describe() == []


def test_held_counts_per_upstream_and_capability() -> None:
    store = LatchStore()
    store.learn(EID, "m1", Refusal("refused_field", fields=("top_k", "min_p")), upstream="llama")
    store.learn(EID, "m2", Refusal("refused_field", fields=("seed",)), upstream="llama")
    store.learn(EID, "m1", Refusal("effort_value", refused_effort="none", next_effort="low"))
    store.learn(EID, "m1", Refusal("strict_schemas"))
    store.learn("f" * 64, "m", Refusal("native_tools"))
    assert store.held() == {
        ("llama", "refused_field"): 3,
        ("llama", "effort_value"): 1,
        ("llama", "strict_schemas"): 1,
        ("f" * 64, "native_tools"): 1,
    }


def test_describe_is_plain_data() -> None:
    store = LatchStore()
    store.learn(EID, "m", Refusal("refused_field", fields=("top_k",)), upstream="u")
    [entry] = store.describe()
    assert entry["endpoint"] == EID
    assert entry["upstream"] == "u"
    assert entry["refused"] == []
    [model] = entry["models"]
    assert model["model"] == "m"
    assert model["refused_fields"] == ["top_k"]
    assert model["refused"] == ["refused_field"]
    assert (entry["strict_schemas"], model["native_tools"]) == (True, True)


def test_notices_name_model_server_and_change() -> None:
    assert refusal_notice(Refusal("legacy_token_limit"), "o3", "openai") == (
        "Model o3 on openai refused max_tokens, so the reply ceiling is now sent as "
        "max_completion_tokens.")
    assert refusal_notice(Refusal("refused_field", fields=("top_k", "min_p")), "m", "") == (
        "Model m on the upstream refused top_k, min_p, so latchgate no longer sends them.")
    assert refusal_notice(Refusal("effort_value", refused_effort="none", next_effort="low"),
        "k", "kimi") == "Model k on kimi refused reasoning_effort 'none', so 'low' is sent instead."
    assert refusal_notice(Refusal("strict_schemas"), "m", "llama").startswith(
        "llama could not build a grammar")
    for capability in ("usage_in_stream", "reasoning_effort", "chosen_temperature",
                       "structured_output", "native_tools"):
        text = refusal_notice(Refusal(capability), "m", "u")
        assert text.endswith(".") and "\n" not in text and "u" in text


def test_imported_latches_without_times_are_not_expired_at_once() -> None:
    import time

    from proxy.state.latches import LatchStore

    store = LatchStore()
    store.merge_snapshot(
        {
            "version": 1,
            "saved_at": time.time() - 3600,
            "endpoints": {
                "e" * 64: {"strict_schemas": False, "models": {"m": {"legacy_token_limit": False}}}
            },
        }
    )
    assert store.expire(7 * 86400) == 0  # an hour old, not "since 1970"
    assert store.expire(1800) == 2

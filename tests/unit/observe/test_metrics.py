"""The metrics registry: each event kind moves its counter with the right labels, bounded."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from proxy.observe import events as ev
from proxy.observe.events import Event, RequestEvents
from proxy.observe.metrics import DROPPABLE_FIELDS, OTHER, Metrics, field_label

# Kind -> (sample name, labels of the event, expected sample labels). The sample labels include
# upstream "local" and model "qwen3" where the metric carries them.
UM = {"upstream": "local", "model": "qwen3"}
U = {"upstream": "local"}
MAPPED: dict[str, tuple[str, dict[str, str], dict[str, str]]] = {
    ev.REFUSAL: (
        "latchgate_refusals_total", {"capability": "strict_schemas"},
        {**UM, "capability": "strict_schemas"}),
    ev.FIELD_DROPPED: (
        "latchgate_fields_dropped_total", {"field": "min_p"}, {**U, "field": "min_p"}),
    ev.RETRY: ("latchgate_retries_total", {"reason": "status_429"}, {**U, "reason": "status_429"}),
    ev.SILENT: (
        "latchgate_endpoint_silent_total", {"phase": "first_token"},
        {**U, "phase": "first_token"}),
    ev.OVERFLOW: (
        "latchgate_context_overflow_total", {"where": "preflight"}, {**UM, "where": "preflight"}),
    ev.TOOL_RECOVERED: (
        "latchgate_tool_calls_recovered_total", {"format": "hermes"}, {**UM, "format": "hermes"}),
    ev.ARGUMENTS: (
        "latchgate_tool_arguments_repaired_total", {"outcome": "repaired"},
        {**UM, "outcome": "repaired"}),
    ev.TOOL_HEALED: (
        "latchgate_tool_calls_healed_total", {"outcome": "healed"}, {**UM, "outcome": "healed"}),
    ev.TOOL_CHOICE_ENFORCED: (
        "latchgate_tool_choice_enforced_total", {"choice": "required", "outcome": "enforced"},
        {**UM, "choice": "required", "outcome": "enforced"}),
    ev.TOOLS_EMULATED: ("latchgate_tools_emulated_total", {}, UM),
    ev.CONTEXT_RESCUED: (
        "latchgate_context_rescues_total", {"action": "pruned", "outcome": "new"},
        {**UM, "action": "pruned", "outcome": "new"}),
    ev.SCHEMAS_RELAXED: ("latchgate_schemas_relaxed_total", {}, U),
    ev.CLIENT_DISCONNECT: ("latchgate_client_disconnects_total", {}, U),
}
# Kinds that are notices only, deliberately without a metric of their own.
UNMAPPED = {ev.SCHEMA_FIXED, ev.STRUCTURED_IN_WORDS, ev.HOLDBACK_RELEASED, ev.INFO}


def event_kinds() -> set[str]:
    """Every kind constant proxy.events defines (upper-case module-level strings)."""
    return {
        value for name, value in vars(ev).items()
        if name.isupper() and isinstance(value, str)
    }


def request(metrics: Metrics, model: str = "qwen3") -> RequestEvents:
    return RequestEvents("req-1", upstream="local", model=model, listeners=[metrics.on_event])


def sample(m: Metrics, name: str, labels: dict[str, str]) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_every_event_kind_is_classified() -> None:
    kinds = event_kinds()
    assert kinds == set(MAPPED) | UNMAPPED, "a new event kind needs a metric mapping or a reason"
    assert not set(MAPPED) & UNMAPPED


def test_each_mapped_kind_moves_only_its_counter_by_count() -> None:
    for kind, (name, labels, expected) in MAPPED.items():
        m = Metrics()
        req = request(m)
        req.emit(kind, "a notice", **labels)
        assert sample(m, name, expected) == 1.0, kind
        req.add(Event(kind, "", dict(labels), count=3))
        assert sample(m, name, expected) == 4.0, kind
        others = [n for k, (n, _, _) in MAPPED.items() if k != kind]
        body = m.render()[0].decode()
        for other in others:
            assert f"\n{other}{{" not in body, (kind, other)


def test_unmapped_kinds_move_nothing() -> None:
    m = Metrics()
    before = m.render()[0]
    req = request(m)
    for kind in UNMAPPED:
        req.emit(kind, "said")
    assert _latchgate_samples(m.render()[0]) == _latchgate_samples(before) == {}


def _latchgate_samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name.startswith("latchgate_"):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_tool_recovered_counts_calls_not_events() -> None:
    m = Metrics()
    request(m).emit(ev.TOOL_RECOVERED, "recovered 2 calls", count=2, format="qwen3_coder")
    assert sample(m, "latchgate_tool_calls_recovered_total", {**UM, "format": "qwen3_coder"}) == 2


def test_event_without_its_label_counts_as_other() -> None:
    m = Metrics()
    request(m).emit(ev.RETRY, "retrying")
    assert sample(m, "latchgate_retries_total", {**U, "reason": OTHER}) == 1


def test_field_label_limited_to_droppable_set() -> None:
    m = Metrics()
    req = request(m)
    for field in ("top_k", "my_secret_field", "dry_multiplier", "dry_new_thing", "messages"):
        req.emit(ev.FIELD_DROPPED, f"dropped {field}", field=field)
    assert sample(m, "latchgate_fields_dropped_total", {**U, "field": "top_k"}) == 1
    assert sample(m, "latchgate_fields_dropped_total", {**U, "field": "dry_multiplier"}) == 1
    assert sample(m, "latchgate_fields_dropped_total", {**U, "field": "dry_*"}) == 1
    assert sample(m, "latchgate_fields_dropped_total", {**U, "field": OTHER}) == 2
    assert sample(m, "latchgate_fields_dropped_total", {**U, "field": "my_secret_field"}) is None


def test_field_label_cases() -> None:
    assert field_label("chat_template_kwargs") == "chat_template_kwargs"
    assert field_label("mirostat_whatever") == "mirostat*"
    assert field_label("xtc_new") == "xtc_*"
    assert field_label("response_format") == OTHER
    assert {"model", "messages", "stream", "tools", "tool_choice", "n", "stop"}.isdisjoint(
        DROPPABLE_FIELDS)


def test_configured_droppable_names_keep_their_label() -> None:
    m = Metrics(droppable=["grammar"])
    request(m).emit(ev.FIELD_DROPPED, "dropped grammar", field="grammar")
    assert sample(m, "latchgate_fields_dropped_total", {**U, "field": "grammar"}) == 1


def test_model_cap_folds_new_names_into_other() -> None:
    m = Metrics(model_cap=2)
    assert m.model_label("a") == "a"
    assert m.model_label("b") == "b"
    assert m.model_label("c") == OTHER
    assert m.model_label("a") == "a"  # names already seen stay themselves
    for model in ("a", "b", "c", "d"):
        request(m, model).emit(ev.REFUSAL, "latched", capability="usage_in_stream")
    name = "latchgate_refusals_total"
    cap = {"upstream": "local", "capability": "usage_in_stream"}
    assert sample(m, name, {**cap, "model": "a"}) == 1
    assert sample(m, name, {**cap, "model": OTHER}) == 2
    assert sample(m, name, {**cap, "model": "c"}) is None


def test_model_cap_applies_to_every_model_labelled_metric() -> None:
    m = Metrics(model_cap=1)
    m.model_label("first")
    m.request_done(upstream="u", model="x", route="chat", stream=False, status=200,
                   duration=0.1, overhead=0.0001)
    m.first_token(upstream="u", model="x", seconds=0.2)
    m.upstream_attempt(upstream="u", model="x", status="200")
    m.tokens(upstream="u", model="x", prompt=1, completion=1, cached=0)
    body = m.render()[0].decode()
    assert 'model="x"' not in body
    assert 'model="other"' in body


def test_request_done_labels_and_histograms() -> None:
    m = Metrics()
    m.request_done(upstream="local", model="qwen3", route="chat", stream=True, status=200,
                   duration=1.5, overhead=0.0003)
    m.request_done(upstream="local", model="qwen3", route="chat", stream=True, status=502,
                   duration=0.02, overhead=-0.00001)
    labels = {**UM, "route": "chat", "stream": "true"}
    assert sample(m, "latchgate_requests_total", {**labels, "status": "200"}) == 1
    assert sample(m, "latchgate_requests_total", {**labels, "status": "502"}) == 1
    dur = {**UM, "stream": "true"}
    assert sample(m, "latchgate_request_duration_seconds_count", dur) == 2
    assert sample(m, "latchgate_request_duration_seconds_sum", dur) == 1.52
    assert sample(m, "latchgate_request_duration_seconds_bucket", {**dur, "le": "0.025"}) == 1
    assert sample(m, "latchgate_request_duration_seconds_bucket", {**dur, "le": "600.0"}) == 2
    over = {"route": "chat"}
    assert sample(m, "latchgate_overhead_seconds_count", over) == 2
    assert sample(m, "latchgate_overhead_seconds_sum", over) == 0.0003  # negative clamped to 0
    assert sample(m, "latchgate_overhead_seconds_bucket", {**over, "le": "5e-05"}) == 1
    assert sample(m, "latchgate_overhead_seconds_bucket", {**over, "le": "0.0005"}) == 2


def test_first_token_attempts_tokens_inflight() -> None:
    m = Metrics()
    m.first_token(upstream="local", model="qwen3", seconds=0.4)
    assert sample(m, "latchgate_time_to_first_token_seconds_count", UM) == 1
    assert sample(m, "latchgate_time_to_first_token_seconds_bucket", {**UM, "le": "0.5"}) == 1
    m.upstream_attempt(upstream="local", model="qwen3", status="error")
    m.upstream_attempt(upstream="local", model="qwen3", status="error")
    assert sample(m, "latchgate_upstream_requests_total", {**UM, "status": "error"}) == 2
    m.tokens(upstream="local", model="qwen3", prompt=100, completion=20, cached=64)
    m.tokens(upstream="local", model="qwen3", prompt=5, completion=-1, cached=0)
    assert sample(m, "latchgate_tokens_total", {**UM, "kind": "prompt"}) == 105
    assert sample(m, "latchgate_tokens_total", {**UM, "kind": "completion"}) == 20
    assert sample(m, "latchgate_tokens_total", {**UM, "kind": "cached"}) == 64
    m.inflight("local", 1)
    m.inflight("local", 1)
    m.inflight("local", -1)
    assert sample(m, "latchgate_inflight_requests", U) == 1


def test_set_latches_replaces_the_gauge() -> None:
    m = Metrics()
    m.set_latches({("local", "strict_schemas"): 2, ("cloud", "usage_in_stream"): 1})
    assert sample(m, "latchgate_latches", {**U, "capability": "strict_schemas"}) == 2
    m.set_latches({("local", "strict_schemas"): 1})
    assert sample(m, "latchgate_latches", {**U, "capability": "strict_schemas"}) == 1
    assert sample(m, "latchgate_latches",
                  {"upstream": "cloud", "capability": "usage_in_stream"}) is None
    m.set_latches({})
    assert "latchgate_latches{" not in m.render()[0].decode()


def test_set_latches_does_not_mutate_its_input() -> None:
    held = {("local", "native_tools"): 1}
    Metrics().set_latches(held)
    assert held == {("local", "native_tools"): 1}


def test_render_parses_and_names_every_metric() -> None:
    m = Metrics()
    req = request(m)
    for kind, (_, labels, _) in MAPPED.items():
        req.emit(kind, "n", **labels)
    m.request_done(upstream="local", model="qwen3", route="chat", stream=False, status=200,
                   duration=0.3, overhead=0.0002)
    m.first_token(upstream="local", model="qwen3", seconds=0.1)
    m.upstream_attempt(upstream="local", model="qwen3", status="200")
    m.tokens(upstream="local", model="qwen3", prompt=1, completion=2, cached=0)
    m.inflight("local", 1)
    m.set_latches({("local", "strict_schemas"): 1})
    body, content_type = m.render()
    assert content_type.startswith("text/plain")
    families = {f.name: f.type for f in text_string_to_metric_families(body.decode())}
    expected = {
        "latchgate_requests": "counter",
        "latchgate_request_duration_seconds": "histogram",
        "latchgate_time_to_first_token_seconds": "histogram",
        "latchgate_overhead_seconds": "histogram",
        "latchgate_upstream_requests": "counter",
        "latchgate_refusals": "counter",
        "latchgate_latches": "gauge",
        "latchgate_fields_dropped": "counter",
        "latchgate_retries": "counter",
        "latchgate_endpoint_silent": "counter",
        "latchgate_context_overflow": "counter",
        "latchgate_context_rescues": "counter",
        "latchgate_context_tokens_removed": "counter",
        "latchgate_tool_calls_recovered": "counter",
        "latchgate_tool_arguments_repaired": "counter",
        "latchgate_tool_calls_healed": "counter",
        "latchgate_tool_choice_enforced": "counter",
        "latchgate_tools_emulated": "counter",
        "latchgate_schemas_relaxed": "counter",
        "latchgate_tokens": "counter",
        "latchgate_inflight_requests": "gauge",
        "latchgate_client_disconnects": "counter",
        "latchgate_log_write_failures": "counter",
        "latchgate_state_backend_up": "gauge",
        "latchgate_state_backend_errors": "counter",
    }
    # prometheus-client adds a `<name>_created` gauge per counter and histogram; not ours to list.
    ours = {
        k: v for k, v in families.items()
        if k.startswith("latchgate_") and not k.endswith("_created")
    }
    assert ours == expected
    assert "process_cpu_seconds" in families or "python_info" in families


def test_instances_are_independent() -> None:
    a, b = Metrics(), Metrics()
    request(a).emit(ev.SCHEMAS_RELAXED, "relaxed")
    assert sample(a, "latchgate_schemas_relaxed_total", U) == 1
    assert sample(b, "latchgate_schemas_relaxed_total", U) is None


def test_shared_registry_gets_no_runtime_collectors() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    assert m.registry is registry
    names = {f.name for f in text_string_to_metric_families(m.render()[0].decode())}
    assert "python_info" not in names

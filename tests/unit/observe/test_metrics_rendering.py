"""The hot metrics (plain accumulators rendered at scrape time) export exactly what the
prometheus_client objects they replaced exported: names, labels, `le` strings, cumulative bucket
counts, sums and counts. Only the `_created` samples are gone, on purpose.
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.observe import events as ev
from proxy.observe.events import Event, RequestEvents
from proxy.observe.metrics import (
    DURATION_BUCKETS,
    OTHER,
    OVERHEAD_BUCKETS,
    FastCounter,
    FastGauge,
    FastHistogram,
    Metrics,
)

UM = {"upstream": "local", "model": "qwen3"}
DUR = {**UM, "stream": "false"}
DURATION_LES = (
    "0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "20.0",
    "30.0", "60.0", "120.0", "300.0", "600.0", "+Inf",
)
OVERHEAD_LES = (
    "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05",
    "0.1", "0.25", "0.5", "1.0", "+Inf",
)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(body: bytes, prefix: str = "latchgate_") -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            if s.name.startswith(prefix):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def families(body: bytes) -> dict[str, tuple[str, str]]:
    """Family name -> (type, help) for every latchgate family in a rendered body."""
    return {
        f.name: (f.type, f.documentation)
        for f in text_string_to_metric_families(body.decode())
        if f.name.startswith("latchgate_")
    }


def done(m: Metrics, duration: float, *, stream: bool = False, status: int = 200,
         overhead: float = 0.0001, model: str = "qwen3", route: str = "chat") -> None:
    m.request_done(upstream="local", model=model, route=route, stream=stream, status=status,
                   duration=duration, overhead=overhead)


def buckets(m: Metrics, name: str, labels: dict[str, str], les: tuple[str, ...]) -> list[float]:
    get = m.registry.get_sample_value
    return [get(f"{name}_bucket", {**labels, "le": le}) or 0.0 for le in les]


# -- histogram buckets ---------------------------------------------------------------------


def test_value_equal_to_a_bound_is_in_that_bucket() -> None:
    m = Metrics()
    done(m, 0.005)
    done(m, 1.0)
    done(m, 600.0)
    got = buckets(m, "latchgate_request_duration_seconds", DUR, DURATION_LES)
    assert got == [1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3]


def test_value_just_above_a_bound_is_in_the_next_bucket() -> None:
    m = Metrics()
    done(m, 0.0050001)
    assert buckets(m, "latchgate_request_duration_seconds", DUR, DURATION_LES)[:2] == [0, 1]


def test_value_above_the_last_bound_only_in_inf() -> None:
    m = Metrics()
    done(m, 600.5)
    got = buckets(m, "latchgate_request_duration_seconds", DUR, DURATION_LES)
    assert got == [0.0] * 17 + [1.0]
    get = m.registry.get_sample_value
    assert get("latchgate_request_duration_seconds_count", DUR) == 1
    assert get("latchgate_request_duration_seconds_sum", DUR) == 600.5


def test_zero_is_in_every_bucket() -> None:
    m = Metrics()
    done(m, 0.0, overhead=0.0)
    assert buckets(m, "latchgate_request_duration_seconds", DUR, DURATION_LES) == [1.0] * 18
    over = buckets(m, "latchgate_overhead_seconds", {"route": "chat"}, OVERHEAD_LES)
    assert over == [1.0] * 15
    assert m.registry.get_sample_value("latchgate_overhead_seconds_sum", {"route": "chat"}) == 0


def test_negative_overhead_is_clamped_to_zero() -> None:
    m = Metrics()
    done(m, 0.1, overhead=-0.00002)
    get = m.registry.get_sample_value
    assert get("latchgate_overhead_seconds_sum", {"route": "chat"}) == 0.0
    assert get("latchgate_overhead_seconds_bucket", {"route": "chat", "le": "5e-05"}) == 1


def test_cumulative_counts_sum_and_count() -> None:
    m = Metrics()
    for d in (0.003, 0.02, 0.02, 0.7, 7.0, 1000.0):
        done(m, d)
    got = buckets(m, "latchgate_request_duration_seconds", DUR, DURATION_LES)
    assert got == [1, 1, 3, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 6]
    get = m.registry.get_sample_value
    assert get("latchgate_request_duration_seconds_count", DUR) == 6
    assert get("latchgate_request_duration_seconds_sum", DUR) == 0.003 + 0.02 + 0.02 + 0.7 + 7.0 \
        + 1000.0


def test_rendered_histogram_lines_are_exact() -> None:
    m = Metrics()
    m.first_token(upstream="local", model="qwen3", seconds=0.25)
    body = m.render()[0].decode()
    lines = [ln for ln in body.splitlines() if ln.startswith("latchgate_time_to_first_token")]
    # prometheus_client writes label names sorted, `le` among them.
    expected = [
        f'latchgate_time_to_first_token_seconds_bucket{{le="{le}",model="qwen3",upstream="local"}}'
        f" {n}"
        for le, n in zip(DURATION_LES, [0.0] * 5 + [1.0] * 13, strict=True)
    ]
    expected += [
        'latchgate_time_to_first_token_seconds_count{model="qwen3",upstream="local"} 1.0',
        'latchgate_time_to_first_token_seconds_sum{model="qwen3",upstream="local"} 0.25',
    ]
    assert lines == expected


# -- counters and the gauge ----------------------------------------------------------------


def test_requests_total_labels_and_status_strings() -> None:
    m = Metrics()
    done(m, 0.1, stream=True, status=200)
    done(m, 0.1, stream=True, status=200)
    done(m, 0.1, stream=False, status=502)
    done(m, 0.1, stream=False, status=799)  # outside the cached range: still its own string
    got = {k: v for k, v in samples(m.render()[0]).items() if k[0] == "latchgate_requests_total"}
    base = (("model", "qwen3"),)
    assert got == {
        ("latchgate_requests_total", (*base, ("route", "chat"), ("status", "200"),
                                      ("stream", "true"), ("upstream", "local"))): 2.0,
        ("latchgate_requests_total", (*base, ("route", "chat"), ("status", "502"),
                                      ("stream", "false"), ("upstream", "local"))): 1.0,
        ("latchgate_requests_total", (*base, ("route", "chat"), ("status", "799"),
                                      ("stream", "false"), ("upstream", "local"))): 1.0,
    }


def test_upstream_attempts_by_status() -> None:
    m = Metrics()
    for status in ("200", "502", "502", "error"):
        m.upstream_attempt(upstream="local", model="qwen3", status=status)
    get = m.registry.get_sample_value
    assert get("latchgate_upstream_requests_total", {**UM, "status": "200"}) == 1
    assert get("latchgate_upstream_requests_total", {**UM, "status": "502"}) == 2
    assert get("latchgate_upstream_requests_total", {**UM, "status": "error"}) == 1


def test_zero_tokens_create_the_series_and_negatives_are_ignored() -> None:
    m = Metrics()
    m.tokens(upstream="local", model="qwen3", prompt=0, completion=0, cached=0)
    got = {k: v for k, v in samples(m.render()[0]).items() if k[0] == "latchgate_tokens_total"}
    assert got == {
        ("latchgate_tokens_total", (("kind", kind), ("model", "qwen3"), ("upstream", "local"))):
        0.0 for kind in ("prompt", "completion", "cached")
    }
    m.tokens(upstream="local", model="qwen3", prompt=7, completion=-3, cached=-1)
    m.tokens(upstream="local", model="qwen3", prompt=1, completion=2, cached=4)
    get = m.registry.get_sample_value
    assert get("latchgate_tokens_total", {**UM, "kind": "prompt"}) == 8
    assert get("latchgate_tokens_total", {**UM, "kind": "completion"}) == 2
    assert get("latchgate_tokens_total", {**UM, "kind": "cached"}) == 4


def test_inflight_moves_up_and_down_per_upstream() -> None:
    m = Metrics()
    get = m.registry.get_sample_value
    assert get("latchgate_inflight_requests", {"upstream": "a"}) is None
    m.inflight("a", 1)
    m.inflight("a", 1)
    m.inflight("b", 1)
    assert get("latchgate_inflight_requests", {"upstream": "a"}) == 2
    m.inflight("a", -1)
    m.inflight("b", -1)
    assert get("latchgate_inflight_requests", {"upstream": "a"}) == 1
    assert get("latchgate_inflight_requests", {"upstream": "b"}) == 0  # stays, at zero


def test_model_cap_folds_to_other_on_every_hot_metric() -> None:
    m = Metrics(model_cap=1)
    done(m, 0.1, model="first")
    done(m, 0.1, model="second")
    m.first_token(upstream="local", model="third", seconds=0.1)
    m.upstream_attempt(upstream="local", model="fourth", status="200")
    m.tokens(upstream="local", model="fifth", prompt=1, completion=1, cached=1)
    models = {dict(labels).get("model") for _, labels in samples(m.render()[0])}
    assert models == {"first", OTHER, None}  # None: metrics without a model label
    get = m.registry.get_sample_value
    assert get("latchgate_request_duration_seconds_count",
               {"upstream": "local", "model": OTHER, "stream": "false"}) == 1
    assert get("latchgate_time_to_first_token_seconds_count",
               {"upstream": "local", "model": OTHER}) == 1


def test_two_instances_do_not_share_state() -> None:
    a, b = Metrics(), Metrics()
    done(a, 0.1)
    a.first_token(upstream="local", model="qwen3", seconds=0.1)
    a.upstream_attempt(upstream="local", model="qwen3", status="200")
    a.tokens(upstream="local", model="qwen3", prompt=1, completion=1, cached=1)
    a.inflight("local", 1)
    assert samples(b.render()[0]) == {}
    assert a.registry.get_sample_value("latchgate_inflight_requests", {"upstream": "local"}) == 1


def test_nothing_rendered_before_the_first_move_but_families_are_declared() -> None:
    body = Metrics().render()[0]
    assert samples(body) == {}
    assert families(body)["latchgate_request_duration_seconds"] == (
        "histogram", "Client request to last byte.")
    assert families(body)["latchgate_inflight_requests"] == ("gauge", "Requests in flight.")


def test_shared_registry_still_rejects_a_second_instance() -> None:
    registry = CollectorRegistry()
    Metrics(registry)
    try:
        Metrics(registry)
    except ValueError as exc:
        assert "Duplicated timeseries" in str(exc)
    else:
        raise AssertionError("a name collision must be refused")


# -- equivalence with prometheus_client's own objects -----------------------------------------


def _reference() -> tuple[CollectorRegistry, dict[str, Callable[..., None]]]:
    """The hot metrics defined as they were before, on their own registry."""
    r = CollectorRegistry()
    um = ("upstream", "model")
    req = Counter("latchgate_requests_total", "Client requests answered, by final HTTP status.",
                  (*um, "route", "stream", "status"), registry=r)
    dur = Histogram("latchgate_request_duration_seconds", "Client request to last byte.",
                    (*um, "stream"), buckets=DURATION_BUCKETS, registry=r)
    ttft = Histogram("latchgate_time_to_first_token_seconds",
                     "Streams: request to first content, reasoning or tool-call fragment.",
                     um, buckets=DURATION_BUCKETS, registry=r)
    over = Histogram("latchgate_overhead_seconds",
                     "Time spent inside latchgate (total minus time waiting on the upstream).",
                     ("route",), buckets=OVERHEAD_BUCKETS, registry=r)
    att = Counter("latchgate_upstream_requests_total",
                  "Every upstream attempt (resends and retries included), by status.",
                  (*um, "status"), registry=r)
    tok = Counter("latchgate_tokens_total",
                  "Prompt, completion and cached tokens from upstream usage.",
                  (*um, "kind"), registry=r)
    inf = Gauge("latchgate_inflight_requests", "Requests in flight.", ("upstream",), registry=r)

    def request_done(stream: bool, status: int, duration: float, overhead: float) -> None:
        s = "true" if stream else "false"
        req.labels("local", "qwen3", "chat", s, str(status)).inc()
        dur.labels("local", "qwen3", s).observe(duration)
        over.labels("chat").observe(max(overhead, 0.0))

    def tokens(prompt: int, completion: int, cached: int) -> None:
        for kind, n in (("prompt", prompt), ("completion", completion), ("cached", cached)):
            tok.labels("local", "qwen3", kind).inc(max(n, 0))

    return r, {
        "request_done": request_done,
        "first_token": lambda seconds: ttft.labels("local", "qwen3").observe(seconds),
        "attempt": lambda status: att.labels("local", "qwen3", status).inc(),
        "tokens": tokens,
        "inflight": lambda delta: inf.labels("local").inc(delta),
    }


def _without_created(body: bytes) -> str:
    return "\n".join(ln for ln in body.decode().splitlines() if "_created" not in ln)


SECONDS = st.one_of(
    st.sampled_from(DURATION_BUCKETS + OVERHEAD_BUCKETS + (0.0, 1e-9, 1e6)),
    st.floats(min_value=0.0, max_value=1000.0, allow_nan=False),
)
CALL = st.one_of(
    st.tuples(st.just("request_done"), st.booleans(), st.sampled_from((200, 400, 502)),
              SECONDS, st.one_of(SECONDS, st.floats(min_value=-0.001, max_value=0.0))),
    st.tuples(st.just("first_token"), SECONDS),
    st.tuples(st.just("attempt"), st.sampled_from(("200", "502", "error"))),
    st.tuples(st.just("tokens"), st.integers(-5, 10**6), st.integers(-5, 10**6),
              st.integers(-5, 10**6)),
    st.tuples(st.just("inflight"), st.sampled_from((1, -1))),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(CALL, max_size=30))
def test_render_matches_prometheus_client_objects(calls: list[tuple[object, ...]]) -> None:
    m = Metrics(CollectorRegistry())
    registry, ref = _reference()
    fast = {
        "request_done": lambda stream, status, duration, overhead: m.request_done(
            upstream="local", model="qwen3", route="chat", stream=stream, status=status,
            duration=duration, overhead=overhead),
        "first_token": lambda seconds: m.first_token(
            upstream="local", model="qwen3", seconds=seconds),
        "attempt": lambda status: m.upstream_attempt(
            upstream="local", model="qwen3", status=status),
        "tokens": lambda prompt, completion, cached: m.tokens(
            upstream="local", model="qwen3", prompt=prompt, completion=completion, cached=cached),
        "inflight": lambda delta: m.inflight("local", delta),
    }
    for name, *args in calls:
        assert isinstance(name, str)
        fast[name](*args)
        ref[name](*args)
    hot = {f"latchgate_{n}" for n in ("requests", "request_duration_seconds",
                                      "time_to_first_token_seconds", "overhead_seconds",
                                      "upstream_requests", "tokens", "inflight_requests")}
    ours = "\n".join(
        ln for ln in _without_created(m.render()[0]).splitlines()
        if any(ln.removeprefix("# HELP ").removeprefix("# TYPE ").startswith(h) for h in hot)
    )
    assert ours == _without_created(generate_latest(registry))


# -- the accumulators on their own ---------------------------------------------------------


def test_fast_histogram_series_layout() -> None:
    h = FastHistogram("x_seconds", "x", ("a",), (1.0, 2.0))
    assert h.les == ("1.0", "2.0", "+Inf")
    h.observe(("v",), 1.0)
    h.observe(("v",), 1.5)
    h.observe(("v",), 9.0)
    assert h.series == {("v",): [1.0, 1.0, 1.0, 11.5]}  # per-bucket counts, +Inf, then the sum
    (family,) = h.collect()
    assert [(s.name, s.labels, s.value) for s in family.samples] == [
        ("x_seconds_bucket", {"a": "v", "le": "1.0"}, 1.0),
        ("x_seconds_bucket", {"a": "v", "le": "2.0"}, 2.0),
        ("x_seconds_bucket", {"a": "v", "le": "+Inf"}, 3.0),
        ("x_seconds_count", {"a": "v"}, 3.0),
        ("x_seconds_sum", {"a": "v"}, 11.5),
    ]


def test_fast_histogram_accepts_an_explicit_inf_bound() -> None:
    h = FastHistogram("x_seconds", "x", (), (1.0, float("inf")))
    assert h.bounds == (1.0,)
    assert h.les == ("1.0", "+Inf")


def test_fast_counter_and_gauge_describe_without_samples() -> None:
    c = FastCounter("x_total", "x", ("a",))
    g = FastGauge("y", "y", ("a",))
    c.values[("v",)] = 2.0
    g.values[("v",)] = -1.0
    assert [(f.name, f.type, f.samples) for f in c.describe() + g.describe()] == [
        ("x", "counter", []), ("y", "gauge", [])]
    assert [(s.name, s.labels, s.value) for f in (*c.collect(), *g.collect())
            for s in f.samples] == [("x_total", {"a": "v"}, 2.0), ("y", {"a": "v"}, -1.0)]



# -- the counters events move ----------------------------------------------------------------

# Each event kind with a counter: the labels the event carries, and the counter's name and labels.
EVENT_COUNTERS: dict[str, tuple[tuple[str, ...], str, tuple[str, ...]]] = {
    ev.REFUSAL: (("capability",), "latchgate_refusals_total", ("upstream", "model", "capability")),
    ev.FIELD_DROPPED: (("field",), "latchgate_fields_dropped_total", ("upstream", "field")),
    ev.RETRY: (("reason",), "latchgate_retries_total", ("upstream", "reason")),
    ev.SILENT: (("phase",), "latchgate_endpoint_silent_total", ("upstream", "phase")),
    ev.OVERFLOW: (("where",), "latchgate_context_overflow_total", ("upstream", "model", "where")),
    ev.TOOL_RECOVERED: (
        ("format",), "latchgate_tool_calls_recovered_total", ("upstream", "model", "format")),
    ev.ARGUMENTS: (
        ("outcome",), "latchgate_tool_arguments_repaired_total", ("upstream", "model", "outcome")),
    ev.TOOL_HEALED: (
        ("outcome",), "latchgate_tool_calls_healed_total", ("upstream", "model", "outcome")),
    ev.TOOL_CHOICE_ENFORCED: (("choice", "outcome"), "latchgate_tool_choice_enforced_total",
                              ("upstream", "model", "choice", "outcome")),
    ev.TOOLS_EMULATED: ((), "latchgate_tools_emulated_total", ("upstream", "model")),
    ev.SCHEMAS_RELAXED: ((), "latchgate_schemas_relaxed_total", ("upstream",)),
    ev.CLIENT_DISCONNECT: ((), "latchgate_client_disconnects_total", ("upstream",)),
}
EVENT = st.tuples(
    st.sampled_from(sorted(EVENT_COUNTERS)),
    st.sampled_from(("top_k", "min_p", "typical_p")),  # droppable: a field keeps its name
    st.integers(0, 5),
    st.sampled_from(("local", "remote")),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(EVENT, max_size=30))
def test_event_counters_render_as_prometheus_client_counters(
    events: list[tuple[str, str, int, str]],
) -> None:
    """The counters events move are plain accumulators: `/metrics` shows of them what the
    prometheus_client `Counter`s they replaced showed, the same series with the same values."""
    m = Metrics(CollectorRegistry())
    registry = CollectorRegistry()
    reference = {kind: Counter(name, "x", labelnames, registry=registry)
                 for kind, (_, name, labelnames) in EVENT_COUNTERS.items()}
    for kind, value, count, upstream in events:
        carried, _, labelnames = EVENT_COUNTERS[kind]
        req = RequestEvents("r", upstream=upstream, model="qwen3", listeners=[m.on_event])
        req.add(Event(kind, "", dict.fromkeys(carried, value), count))
        given_ = {"upstream": upstream, "model": "qwen3", **dict.fromkeys(carried, value)}
        reference[kind].labels(*(given_[n] for n in labelnames)).inc(count)
    names = {name for _, name, _ in EVENT_COUNTERS.values()}
    ours = {k: v for k, v in samples(m.render()[0]).items() if k[0] in names}
    theirs = {k: v for k, v in samples(generate_latest(registry)).items() if k[0] in names}
    assert ours == theirs
    assert len(theirs) == len({(e[0], e[1], e[3]) for e in events if EVENT_COUNTERS[e[0]][0]}
                              | {(e[0], e[3]) for e in events if not EVENT_COUNTERS[e[0]][0]})

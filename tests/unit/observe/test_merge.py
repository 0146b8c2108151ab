"""Merging the workers' expositions (`proxy.observe.merge`): sums, the few max/min series,
histograms, a stable order, and text that prometheus_client's parser reads back."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from proxy.observe.merge import merge_expositions
from proxy.observe.metrics import Metrics


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _value(text: str, name: str, **labels: str) -> float:
    return _samples(text)[(name, tuple(sorted(labels.items())))]


A = """\
# HELP latchgate_requests_total Client requests answered.
# TYPE latchgate_requests_total counter
latchgate_requests_total{route="chat",status="200"} 3.0
latchgate_requests_total{route="chat",status="400"} 1.0
# HELP latchgate_inflight_requests Requests in flight.
# TYPE latchgate_inflight_requests gauge
latchgate_inflight_requests{upstream="u"} 2.0
# HELP latchgate_latches Latches currently held.
# TYPE latchgate_latches gauge
latchgate_latches{capability="max_tokens",upstream="u"} 1.0
# HELP latchgate_state_backend_up Whether the state backend answers.
# TYPE latchgate_state_backend_up gauge
latchgate_state_backend_up 1.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 200.0
# HELP process_max_fds Maximum number of open file descriptors.
# TYPE process_max_fds gauge
process_max_fds 1024.0
# HELP python_info Python platform information
# TYPE python_info gauge
python_info{implementation="CPython",major="3"} 1.0
"""

B = """\
# HELP latchgate_requests_total Client requests answered.
# TYPE latchgate_requests_total counter
latchgate_requests_total{route="chat",status="200"} 4.0
latchgate_requests_total{route="embeddings",status="200"} 2.0
# HELP latchgate_inflight_requests Requests in flight.
# TYPE latchgate_inflight_requests gauge
latchgate_inflight_requests{upstream="u"} 1.0
# HELP latchgate_latches Latches currently held.
# TYPE latchgate_latches gauge
latchgate_latches{capability="max_tokens",upstream="u"} 1.0
latchgate_latches{capability="strict_schemas",upstream="u"} 1.0
# HELP latchgate_state_backend_up Whether the state backend answers.
# TYPE latchgate_state_backend_up gauge
latchgate_state_backend_up 0.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 100.0
# HELP process_max_fds Maximum number of open file descriptors.
# TYPE process_max_fds gauge
process_max_fds 1024.0
# HELP python_info Python platform information
# TYPE python_info gauge
python_info{implementation="CPython",major="3"} 1.0
"""


def test_counters_and_gauges_are_summed_by_name_and_labels() -> None:
    out = merge_expositions([A, B])
    assert _value(out, "latchgate_requests_total", route="chat", status="200") == 7
    assert _value(out, "latchgate_requests_total", route="chat", status="400") == 1
    assert _value(out, "latchgate_requests_total", route="embeddings", status="200") == 2
    assert _value(out, "latchgate_inflight_requests", upstream="u") == 3


def test_the_series_a_sum_would_falsify_take_max_or_min() -> None:
    out = merge_expositions([A, B])
    # each worker holds the same shared latches: counted once, the most any worker holds
    assert _value(out, "latchgate_latches", capability="max_tokens", upstream="u") == 1
    assert _value(out, "latchgate_latches", capability="strict_schemas", upstream="u") == 1
    assert _value(out, "latchgate_state_backend_up") == 0  # down for one: down
    assert _value(out, "process_start_time_seconds") == 100  # the first to start
    assert _value(out, "process_max_fds") == 1024
    assert _value(out, "python_info", implementation="CPython", major="3") == 1


def test_created_samples_take_the_earliest() -> None:
    def text(created: float) -> str:
        return (
            "# HELP x_total X.\n# TYPE x_total counter\nx_total 1.0\n"
            f"# HELP x_created X.\n# TYPE x_created gauge\nx_created {created}\n"
        )

    out = merge_expositions([text(50.0), text(20.0)])
    assert _value(out, "x_total") == 2 and _value(out, "x_created") == 20


def test_workers_gauge_counts_the_expositions_merged() -> None:
    assert _value(merge_expositions([A, B, A]), "latchgate_workers") == 3
    assert _value(merge_expositions([A]), "latchgate_workers") == 1
    # a worker's own latchgate_workers, were there one, is not summed in
    again = merge_expositions([merge_expositions([A, B]), B])
    assert _value(again, "latchgate_workers") == 2


def _observed(*durations: float) -> str:
    metrics = Metrics()
    for seconds in durations:
        metrics.request_done(
            upstream="u", model="m", route="chat", stream=False, status=200,
            duration=seconds, overhead=0.0001,
        )  # fmt: skip
    return metrics.render()[0].decode()


def test_histograms_sum_buckets_sum_and_count() -> None:
    out = merge_expositions([_observed(0.003, 0.2), _observed(0.2, 7.0)])
    name = "latchgate_request_duration_seconds"
    labels = {"model": "m", "stream": "false", "upstream": "u"}
    assert _value(out, f"{name}_bucket", le="0.005", **labels) == 1
    assert _value(out, f"{name}_bucket", le="0.25", **labels) == 3
    assert _value(out, f"{name}_bucket", le="10.0", **labels) == 4
    assert _value(out, f"{name}_bucket", le="+Inf", **labels) == 4
    assert _value(out, f"{name}_count", **labels) == 4
    assert _value(out, f"{name}_sum", **labels) == pytest.approx(7.403)
    # buckets stay cumulative, in order of their bound, then _count and _sum
    family = next(f for f in text_string_to_metric_families(out) if f.name == name)
    buckets = [s.value for s in family.samples if s.name.endswith("_bucket")]
    assert buckets == sorted(buckets)
    assert [s.name for s in family.samples][-2:] == [f"{name}_count", f"{name}_sum"]


def test_real_expositions_round_trip_through_the_parser() -> None:
    a, b = _observed(0.1), _observed(0.2, 0.3)
    out = merge_expositions([a, b])
    parsed = list(text_string_to_metric_families(out))
    names = [f.name for f in parsed]
    assert len(names) == len(set(names))  # HELP and TYPE once per family
    assert names == [f.name for f in text_string_to_metric_families(a)] + ["latchgate_workers"]
    kinds = {f.name: f.type for f in parsed}
    assert kinds["latchgate_requests"] == "counter"
    assert kinds["latchgate_request_duration_seconds"] == "histogram"
    assert _value(out, "latchgate_requests_total", model="m", route="chat", status="200",
                  stream="false", upstream="u") == 3  # fmt: skip
    # merging the merge with nothing else changes no sample (but the workers gauge)
    again = _samples(merge_expositions([out]))
    assert again.pop(("latchgate_workers", ())) == 1
    assert again == {k: v for k, v in _samples(out).items() if k[0] != "latchgate_workers"}


def test_order_is_first_seen_and_stable() -> None:
    out = merge_expositions([A, B])
    assert out == merge_expositions([A, B])
    families = [f.name for f in text_string_to_metric_families(out)]
    assert families == [
        "latchgate_requests",
        "latchgate_inflight_requests",
        "latchgate_latches",
        "latchgate_state_backend_up",
        "process_start_time_seconds",
        "process_max_fds",
        "python_info",
        "latchgate_workers",
    ]
    requests = next(f for f in text_string_to_metric_families(out) if f.name == families[0])
    assert [(s.labels["route"], s.labels["status"]) for s in requests.samples] == [
        ("chat", "200"),
        ("chat", "400"),
        ("embeddings", "200"),  # seen only in the second, after the first's
    ]


def test_a_family_without_samples_keeps_its_help_and_type() -> None:
    empty = "# HELP y_total Y.\n# TYPE y_total counter\n"
    out = merge_expositions([empty, empty])
    assert "# HELP y_total Y.\n# TYPE y_total counter\n" in out
    assert [f.samples for f in text_string_to_metric_families(out) if f.name == "y"] == [[]]


def test_help_text_and_label_values_are_escaped_again() -> None:
    help_line = "# HELP z A \\\\ backslash and a\\nnewline.\n# TYPE z gauge\n"
    text = help_line + 'z{path="a\\"b\\\\c\\nd"} 1.0\n'
    out = merge_expositions([text, text])
    family = next(f for f in text_string_to_metric_families(out) if f.name == "z")
    assert family.documentation == "A \\ backslash and a\nnewline."
    assert family.samples == [Sample("z", {"path": 'a"b\\c\nd'}, 2.0)]


def test_what_is_not_an_exposition_raises_value_error() -> None:
    with pytest.raises(ValueError):
        merge_expositions([A, "this is {not metrics\n"])

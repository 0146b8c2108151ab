"""The Grafana dashboard and provisioning, checked without Grafana: stable identity, variables,
every OBSERVABILITY panel topic, and every metric (and label) a query uses exists in /metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.observe import events as ev
from proxy.observe.events import RequestEvents
from proxy.observe.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "latchgate.json"
METRIC = re.compile(r"latchgate_[a-z_]+")
SELECTOR = re.compile(r"(latchgate_[a-z_]+)\{([^}]*)\}")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    """Every panel that is not a row, including panels nested in collapsed rows."""
    out = []
    for panel in dashboard()["panels"]:
        nested = panel.get("panels", [])
        if panel["type"] != "row":
            out.append(panel)
        out += nested
    return out


def exprs() -> list[str]:
    return [t["expr"] for p in panels() for t in p["targets"]]


def variables() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard()["templating"]["list"]}


def exported() -> dict[str, set[str]]:
    """Sample name -> label names, from a fresh Metrics after one observation of each kind."""
    m = Metrics()
    req = RequestEvents("r", upstream="local", model="qwen3", listeners=[m.on_event])
    labels = {
        ev.REFUSAL: {"capability": "strict_schemas"}, ev.FIELD_DROPPED: {"field": "top_k"},
        ev.RETRY: {"reason": "connect"}, ev.SILENT: {"phase": "idle"},
        ev.OVERFLOW: {"where": "upstream"}, ev.TOOL_RECOVERED: {"format": "hermes"},
        ev.ARGUMENTS: {"outcome": "truncated"}, ev.TOOL_HEALED: {"outcome": "healed"},
        ev.TOOL_CHOICE_ENFORCED: {"choice": "required", "outcome": "enforced"},
        ev.CONTEXT_RESCUED: {
            "action": "pruned", "outcome": "new", "before": "9000", "after": "6000"},
    }
    for kind in (*labels, ev.SCHEMAS_RELAXED, ev.CLIENT_DISCONNECT, ev.TOOLS_EMULATED):
        req.emit(kind, "n", **labels.get(kind, {}))
    m.request_done(upstream="local", model="qwen3", route="chat", stream=True, status=200,
                   duration=1.0, overhead=0.0001)
    m.first_token(upstream="local", model="qwen3", seconds=0.3)
    m.upstream_attempt(upstream="local", model="qwen3", status="200")
    m.tokens(upstream="local", model="qwen3", prompt=10, completion=5, cached=2)
    m.inflight("local", 1)
    m.set_latches({("local", "strict_schemas"): 1})
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(m.render()[0].decode()):
        for s in family.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


def test_identity_is_stable() -> None:
    d = dashboard()
    assert d["uid"] == "latchgate"
    assert d["title"] == "latchgate"


def test_datasource_is_a_variable_used_by_every_panel_and_target() -> None:
    ds = variables()["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    wanted = {"type": "prometheus", "uid": "${datasource}"}
    for panel in panels():
        assert panel["datasource"] == wanted, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == wanted, panel["title"]


@pytest.mark.parametrize(
    ("name", "query"),
    [
        ("upstream", "label_values(latchgate_requests_total, upstream)"),
        ("model", 'label_values(latchgate_requests_total{upstream=~"$upstream"}, model)'),
    ],
)
def test_upstream_and_model_variables(name: str, query: str) -> None:
    var = variables()[name]
    assert var["type"] == "query"
    assert var["definition"] == query
    assert var["query"]["query"] == query
    assert var["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert (var["includeAll"], var["multi"], var["allValue"]) == (True, True, ".*")


def test_every_metric_in_a_query_exists_in_metrics_output() -> None:
    names = exported()
    used = {name for expr in exprs() for name in METRIC.findall(expr)}
    used |= {n for v in variables().values() for n in METRIC.findall(v.get("definition", ""))}
    assert used, "no latchgate metric found in the dashboard"
    assert sorted(used - set(names)) == []


def test_every_label_a_query_filters_on_exists_on_its_metric() -> None:
    # Filtering on a label the metric lacks (say model on latchgate_retries_total) would make
    # the panel silently empty, so each selector's labels are checked against /metrics.
    names = exported()
    for expr in exprs():
        for metric, matchers in SELECTOR.findall(expr):
            labels = set(re.findall(r"(\w+)\s*[=!]~?", matchers))
            assert labels <= names[metric], (metric, labels - names[metric])
        for grouping in re.findall(r"by \(([^)]*)\)", expr):
            assert all(g.strip() for g in grouping.split(",")), expr


def test_queries_are_balanced() -> None:
    for expr in exprs():
        for opening, closing in ("()", "{}", "[]"):
            assert expr.count(opening) == expr.count(closing), expr


def test_filters_use_the_template_variables() -> None:
    for expr in exprs():
        for _metric, matchers in SELECTOR.findall(expr):
            if "upstream" in matchers:
                assert 'upstream=~"$upstream"' in matchers, expr
            if "model=" in matchers or "model=~" in matchers:
                assert 'model=~"$model"' in matchers, expr


# OBSERVABILITY.md "Panels": each topic and a pattern one of the dashboard's queries must match.
TOPICS = {
    "request rate": r"sum by \(status\) \(rate\(latchgate_requests_total",
    "error ratio": r'status=~"5\.\."\}.*/ sum\(rate\(latchgate_requests_total',
    "latency p50": r"histogram_quantile\(0\.5, .*latchgate_request_duration_seconds_bucket",
    "latency p95": r"histogram_quantile\(0\.95, .*latchgate_request_duration_seconds_bucket",
    "latency p99": r"histogram_quantile\(0\.99, .*latchgate_request_duration_seconds_bucket",
    "time to first token": r"histogram_quantile\(.*latchgate_time_to_first_token_seconds_bucket",
    "overhead": r"histogram_quantile\(.*latchgate_overhead_seconds_bucket",
    "refusal rate by capability": r"by \(capability\) \(rate\(latchgate_refusals_total",
    "latches held": r"latchgate_latches\{",
    "retry rate by reason": r"by \(reason\) \(rate\(latchgate_retries_total",
    "watchdog firings": r"rate\(latchgate_endpoint_silent_total",
    "context overflows": r"by \(where\) \(rate\(latchgate_context_overflow_total",
    "tool calls recovered by format": r"by \(format\) \(rate\(latchgate_tool_calls_recovered_total",
    "argument repairs by outcome":
        r"by \(outcome\) \(rate\(latchgate_tool_arguments_repaired_total",
    "dropped fields": r"by \(field\) \(rate\(latchgate_fields_dropped_total",
    "tool calls healed by outcome": r"by \(outcome\) \(rate\(latchgate_tool_calls_healed_total",
    "tool_choice enforced":
        r"by \(choice, outcome\) \(rate\(latchgate_tool_choice_enforced_total",
    "tools emulated": r"rate\(latchgate_tools_emulated_total",
    "tokens per second": r"rate\(latchgate_tokens_total",
}


@pytest.mark.parametrize("topic", TOPICS)
def test_every_observability_panel_topic_is_present(topic: str) -> None:
    pattern = re.compile(TOPICS[topic])
    assert any(pattern.search(expr) for expr in exprs()), topic


def test_topics_cover_the_spec_panel_list() -> None:
    spec = ROOT / "docs" / "OBSERVABILITY.md"  # in the repo: a clone runs this, never skips
    text = spec.read_text().split("Panels, at least:", 1)[1].split("\n\n", 1)[0].lower()
    for topic in ("error ratio", "time to first token", "overhead", "refusal rate by capability",
                  "latches held", "retry rate by reason", "watchdog firings",
                  "tool calls recovered by format", "argument repairs by outcome",
                  "dropped fields", "tokens per second", "tool calls healed by outcome",
                  "tool_choice enforced", "tools emulated"):
        assert topic in " ".join(text.split()), topic


def test_panel_ids_unique_and_layout_in_bounds() -> None:
    ids = [p["id"] for p in dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
    for panel in panels():
        assert panel["title"] and panel["targets"], panel
        assert [t["refId"] for t in panel["targets"]] == [
            chr(ord("A") + i) for i in range(len(panel["targets"]))]


def test_datasource_provisioning_points_at_compose_prometheus() -> None:
    text = (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    assert "apiVersion: 1" in text
    assert "type: prometheus" in text
    assert "url: http://prometheus:9090" in text


def test_dashboard_provider_loads_the_mounted_dashboards() -> None:
    provider = (GRAFANA / "provisioning" / "dashboards" / "latchgate.yml").read_text()
    compose = (GRAFANA / "docker-compose.yml").read_text()
    path = re.search(r"path: (\S+)", provider)
    assert path is not None
    assert f"./dashboards:{path.group(1)}" in compose
    assert "./provisioning:/etc/grafana/provisioning" in compose


def test_compose_builds_latchgate_and_prometheus_scrapes_it() -> None:
    compose = (GRAFANA / "docker-compose.yml").read_text()
    assert "context: .." in compose and "dockerfile: Dockerfile" in compose
    assert "${LATCHGATE_UPSTREAM" in compose
    assert "./prometheus.yml:/etc/prometheus/prometheus.yml" in compose
    scrape = (GRAFANA / "prometheus.yml").read_text()
    assert "scrape_interval: 5s" in scrape
    assert 'targets: ["latchgate:8787"]' in scrape
    assert "metrics_path: /metrics" in scrape

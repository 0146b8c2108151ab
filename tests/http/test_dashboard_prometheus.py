"""The Grafana dashboard against a real Prometheus: every panel's PromQL parses and shows data.

A Prometheus server (Debian's `prometheus` package) scrapes a running latchgate every second while
traffic causes every kind of event, twice over with the latches reset in between (so refusals
happen in both rounds and their rate is above zero, not only their count). Then every query of
every panel, with the dashboard's variables substituted as Grafana would, goes through
Prometheus's HTTP API.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Running, StartProxy
from tests.fakeupstream import FakeUpstream
from tests.http.test_metrics import drive_all, metrics_text, upstream_table
from tests.promtools import REQUIRE_ENV, Prometheus, prometheus, prometheus_binary, scrape_config

pytestmark = pytest.mark.prometheus

DASHBOARD = Path(__file__).resolve().parents[2] / "grafana" / "dashboards" / "latchgate.json"
ADMIN_KEY = "adm-dashboard-test"
MODEL = "fake-model"
METRIC = re.compile(r"\blatchgate_[a-z_]+")
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
# Grafana's built-in interval variables; any window of a few scrapes works for evaluation.
BUILTIN = {"__rate_interval": "1m", "__interval": "1m", "__range": "1m", "__range_s": "60"}

# Panels that must not only return series but show the events the traffic caused, by label.
KEY_PANELS = {
    "latchgate_refusals_total": (
        "capability", {"legacy_token_limit", "refused_field", "strict_schemas", "native_tools"}),
    "latchgate_retries_total": ("reason", {"status_5xx", "silent"}),
    "latchgate_tool_calls_recovered_total": ("format", {"hermes"}),
    "latchgate_context_overflow_total": ("where", {"preflight", "upstream"}),
}


def panels() -> list[dict[str, Any]]:
    """Every panel that is not a row, including those nested in collapsed rows."""
    out: list[dict[str, Any]] = []
    for panel in json.loads(DASHBOARD.read_text())["panels"]:
        if panel["type"] != "row":
            out.append(panel)
        out += panel.get("panels", [])
    return out


def substitute(expr: str, values: dict[str, str]) -> str:
    """`expr` with every `$var` / `${var}` replaced; an unknown variable is a test failure."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name in BUILTIN:
            return BUILTIN[name]
        if name not in values:
            raise AssertionError(f"the dashboard uses an unknown variable ${name} in {expr!r}")
        return values[name]

    return VARIABLE.sub(one, expr)


def test_substitute() -> None:
    expr = 'rate(x{upstream=~"$upstream", model=~"${model}"}[$__rate_interval])'
    assert substitute(expr, {"upstream": ".*", "model": "a|b"}) == (
        'rate(x{upstream=~".*", model=~"a|b"}[1m])'
    )
    with pytest.raises(AssertionError, match=r"unknown variable \$nope"):
        substitute("up{x=~'$nope'}", {})


def test_missing_binary_skips_or_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_BIN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y prometheus"):
        prometheus_binary()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y prometheus"):
        prometheus_binary()


def test_scrape_config() -> None:
    assert scrape_config("127.0.0.1:1234") == (
        "global:\n"
        "  scrape_interval: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: latchgate\n"
        "    metrics_path: /metrics\n"
        "    static_configs:\n"
        "      - targets: ['127.0.0.1:1234']\n"
    )


# Grafana's "All" (allValue ".*") and a real selection, as its regex formatting renders them.
SELECTIONS = {
    "all": {"upstream": ".*", "model": ".*"},
    "chosen": {"upstream": "(fake)", "model": f"({MODEL})"},
}


async def drive_twice(lg: Running, fake: FakeUpstream, prom: Prometheus) -> None:
    """All events, a scrape, latches reset, all events again, then two scrapes."""
    await prom.scraped_after(time.time() - 60)  # the target is up before any traffic
    await drive_all(lg, fake, MODEL)
    await prom.scraped_after(time.time())
    async with aiohttp.ClientSession() as s:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        async with s.post(lg.url + "/admin/latches/reset", headers=headers) as resp:
            assert resp.status == 200, await resp.text()
    await drive_all(lg, fake, MODEL)
    await prom.scraped_after(time.time(), scrapes=2)


async def test_dashboard_against_prometheus(
    fake: FakeUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    prometheus_binary()  # skip (or fail under CI) before starting anything
    lg = await start_proxy(upstream_table(fake), admin_key=ADMIN_KEY)
    async with prometheus(f"127.0.0.1:{lg.port}", tmp_path) as prom:
        await drive_twice(lg, fake, prom)
        empty: list[str] = []
        for panel in panels():
            for target in panel["targets"]:
                for selection, values in SELECTIONS.items():
                    expr = substitute(target["expr"], values)
                    answer = await prom.query(expr)
                    where = f"{panel['title']!r} {target.get('refId')} ({selection}): {expr}"
                    assert answer["status"] == "success", f"{where}: {answer.get('error')}"
                    if not answer["data"]["result"]:
                        empty.append(where)
                    await check_key_panel(target["expr"], answer, where)
        assert empty == [], "panels with no data after traffic that causes every event"
        await check_variables(prom)
        # the parse check can fail: Prometheus rejects a broken query
        broken = await prom.query("sum(rate(latchgate_requests_total[1m])")
        assert (broken["status"], broken["errorType"]) == ("error", "bad_data")
        ingested = set((await prom.api("label/__name__/values"))["data"])
    used = {name for p in panels() for t in p["targets"] for name in METRIC.findall(t["expr"])}
    exported = {
        s.name for f in text_string_to_metric_families(await metrics_text(lg)) for s in f.samples
    }
    assert used - exported == set(), "dashboard metrics missing from latchgate's /metrics"
    assert used - ingested == set(), "dashboard metrics Prometheus did not ingest"


async def check_key_panel(raw_expr: str, answer: dict[str, Any], where: str) -> None:
    for metric, (label, wanted) in KEY_PANELS.items():
        if metric not in raw_expr:
            continue
        rates = {r["metric"].get(label): float(r["value"][1]) for r in answer["data"]["result"]}
        assert set(rates) == wanted, where
        assert all(rate > 0 for rate in rates.values()), (where, rates)


async def check_variables(prom: Prometheus) -> None:
    """The `upstream` and `model` variables' label_values queries, as Grafana asks them."""
    upstreams = await prom.api("label/upstream/values", **{"match[]": "latchgate_requests_total"})
    # "none": requests that reached no upstream (the admin calls drive_all makes, refusals).
    assert upstreams["data"] == ["fake", "none"]
    models = await prom.api(
        "label/model/values", **{"match[]": 'latchgate_requests_total{upstream=~".*"}'}
    )
    assert sorted(models["data"]) == sorted([MODEL, "none"])

"""The observability profile: Prometheus scrapes every compose service that serves memworker's
metrics, and Grafana's memworker dashboard queries only series memworker exports, through the
Prometheus it is provisioned with.

Offline: the dashboard, the provisioning files and the scrape config are parsed; PromQL is read
by its tokens (metric names, label matchers, grouping labels), since no Prometheus runs here.
The compose file, profile included, is validated against the Compose specification by
``test_deployment.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from worker import metrics

ROOT: Final = Path(__file__).resolve().parents[2]
DEPLOY: Final = ROOT / "deploy"
COMPOSE: Final = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: Final[dict[str, dict[str, Any]]] = COMPOSE["services"]
DASHBOARD: Final = json.loads(
    (DEPLOY / "grafana" / "dashboards" / "memworker.json").read_text(encoding="utf-8")
)
DATASOURCES: Final = yaml.safe_load(
    (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text("utf-8")
)
PROVIDERS: Final = yaml.safe_load(
    (DEPLOY / "grafana" / "provisioning" / "dashboards" / "memworker.yml").read_text("utf-8")
)
PROMETHEUS: Final = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text("utf-8"))
PROFILE: Final = "observability"

#: The series a metric family is exported as, by its type (prometheus-client's exposition;
#: ``_created`` left out: no panel should plot creation times).
SERIES_SUFFIXES: Final = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
}
#: Series Prometheus itself writes for every scrape target.
PROMETHEUS_SERIES: Final = frozenset({"up"})
#: Label matchers ``{...}``, ranges ``[...]``, grouping clauses ``by (...)``, identifiers.
SELECTOR: Final = re.compile(r"\{([^}]*)\}")
MATCHER_LABEL: Final = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")
RANGE: Final = re.compile(r"\[[^\]]*\]")
GROUPING: Final = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
IDENTIFIER: Final = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
#: ``{{label}}`` in a legend.
LEGEND_LABEL: Final = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def declared_metrics() -> list[MetricWrapperBase]:
    """The metric families ``worker.metrics`` declares."""
    return [v for v in vars(metrics).values() if isinstance(v, MetricWrapperBase)]


def exported_series() -> dict[str, frozenset[str]]:
    """Every series name memworker's metrics are exported as, with the labels it carries."""
    series: dict[str, frozenset[str]] = {}
    for metric in declared_metrics():
        labels = frozenset(metric._labelnames)
        for family in metric.describe():
            for suffix in SERIES_SUFFIXES[family.type]:
                extra = {"le"} if suffix == "_bucket" else set()
                series[family.name + suffix] = labels | extra
    return series


def target_labels() -> frozenset[str]:
    """Labels Prometheus puts on every series of a scrape target (its own and relabelled)."""
    relabelled = {
        rule["target_label"]
        for job in PROMETHEUS["scrape_configs"]
        for rule in job.get("relabel_configs", [])
    }
    return frozenset({"job", "instance", *relabelled})


def panels() -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    for panel in DASHBOARD["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries() -> list[tuple[str, dict[str, Any]]]:
    """``(panel title, target)`` for every query of the dashboard."""
    return [(panel["title"], target) for panel in panels() for target in panel.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The series names an expression selects: identifiers not called as functions, once
    matchers, ranges and grouping clauses are set aside."""
    bare = GROUPING.sub(" ", RANGE.sub(" ", SELECTOR.sub(" ", expr)))
    return {
        m.group()
        for m in IDENTIFIER.finditer(bare)
        if not bare[m.end() :].lstrip().startswith("(")
        and not (m.start() > 0 and (bare[m.start() - 1].isdigit() or bare[m.start() - 1] == "."))
    }


def labels_used(expr: str) -> set[str]:
    """Labels an expression matches on or groups by."""
    matched = {label for body in SELECTOR.findall(expr) for label in MATCHER_LABEL.findall(body)}
    grouped = {label.strip() for body in GROUPING.findall(expr) for label in body.split(",")}
    return matched | (grouped - {""})


def profile_services() -> dict[str, dict[str, Any]]:
    """The services ``docker compose --profile observability up`` starts."""
    return {
        name: spec
        for name, spec in SERVICES.items()
        if not spec.get("profiles") or PROFILE in spec["profiles"]
    }


def networks(spec: dict[str, Any]) -> set[str]:
    return set(spec.get("networks", ["default"]))


def container_ports(spec: dict[str, Any]) -> set[int]:
    """Ports a service listens on inside the compose network (``expose`` and published)."""
    published = {str(p).rsplit(":", 1)[-1].split("/")[0] for p in spec.get("ports", [])}
    exposed = {str(p).split("/")[0] for p in spec.get("expose", [])}
    return {int(p) for p in published | exposed}


def scrape_targets() -> set[tuple[str, int]]:
    """``(host, port)`` of every target the Prometheus config names."""
    found: set[tuple[str, int]] = set()
    for job in PROMETHEUS["scrape_configs"]:
        for dns in job.get("dns_sd_configs", []):
            found |= {(name, int(dns["port"])) for name in dns["names"]}
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, port = target.rsplit(":", 1)
                found.add((host, int(port)))
    return found


def bind_mounts(service: str) -> dict[str, tuple[str, str]]:
    """A service's mounts of repository paths: source -> (target, mode)."""
    mounts: dict[str, tuple[str, str]] = {}
    for volume in SERVICES[service]["volumes"]:
        source, target, *mode = volume.split(":")
        if source.startswith("./"):
            mounts[source] = (target, mode[0] if mode else "rw")
    return mounts


def provisioned_uid() -> str:
    (source,) = DATASOURCES["datasources"]
    uid: str = source["uid"]
    return uid


# --- the dashboard --------------------------------------------------------------------------


def test_the_dashboard_is_memworker_with_a_fixed_uid_on_a_current_schema() -> None:
    ids = [panel["id"] for panel in panels()]

    assert DASHBOARD["title"] == "memworker"
    assert DASHBOARD["uid"] == "memworker"  # links to it survive re-provisioning
    assert DASHBOARD["schemaVersion"] >= 39  # Grafana 11 and later
    assert len(ids) == len(set(ids))


def test_every_query_selects_only_series_worker_metrics_exports() -> None:
    known = set(exported_series()) | PROMETHEUS_SERIES
    unknown = {
        (title, name)
        for title, target in queries()
        for name in metric_names(target["expr"])
        if name not in known
    }

    assert queries()
    assert unknown == set()


def test_every_label_a_query_uses_is_one_its_series_carry() -> None:
    exported = exported_series()
    wrong = set()
    for title, target in queries():
        carried = set(target_labels())
        for name in metric_names(target["expr"]):
            carried |= exported.get(name, frozenset())
        wrong |= {(title, label) for label in labels_used(target["expr"]) - carried}

    assert wrong == set()


def test_every_legend_names_a_label_its_query_keeps() -> None:
    wrong = {
        (title, label)
        for title, target in queries()
        for label in LEGEND_LABEL.findall(target.get("legendFormat", ""))
        if label not in labels_used(target["expr"])
    }

    assert wrong == set()


def test_every_query_closes_each_bracket_it_opens() -> None:
    pairs = {")": "(", "]": "[", "}": "{"}
    for title, target in queries():
        stack: list[str] = []
        for char in target["expr"]:
            if char in "([{":
                stack.append(char)
            elif char in pairs:
                assert stack, (title, target["expr"])
                assert stack.pop() == pairs[char], (title, target["expr"])
        assert stack == [], (title, target["expr"])


def test_every_metric_worker_metrics_declares_has_a_panel() -> None:
    selected = {name for _, target in queries() for name in metric_names(target["expr"])}
    missing = {
        family.name
        for metric in declared_metrics()
        for family in metric.describe()
        if not any(family.name + s in selected for s in SERIES_SUFFIXES[family.type])
    }

    assert missing == set()


def test_every_panel_and_query_reads_the_provisioned_prometheus() -> None:
    uid = provisioned_uid()
    wrong = [
        panel["title"]
        for panel in panels()
        if panel["type"] != "row"
        and (
            panel["datasource"]["uid"] != uid
            or any(t["datasource"]["uid"] != uid for t in panel["targets"])
        )
    ]

    assert wrong == []
    assert all(not p.get("targets") for p in panels() if p["type"] == "row")


def test_no_two_panels_overlap_on_the_grid() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in panels():
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]  # Grafana's grid is 24 wide
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


# --- Grafana's provisioning -----------------------------------------------------------------


def test_the_provisioned_datasource_is_the_profiles_prometheus_service() -> None:
    (source,) = DATASOURCES["datasources"]
    url = urlsplit(source["url"])

    assert source["type"] == "prometheus"
    assert url.hostname in profile_services()
    assert url.port in container_ports(SERVICES[url.hostname])
    assert networks(SERVICES[url.hostname]) & networks(SERVICES["grafana"])


def test_grafana_mounts_its_provisioning_and_dashboards_read_only_from_the_repository() -> None:
    mounts = bind_mounts("grafana")

    assert mounts["./deploy/grafana/provisioning"] == ("/etc/grafana/provisioning", "ro")
    assert all(mode == "ro" for _, mode in mounts.values())
    assert all((ROOT / source).exists() for source in mounts)


def test_the_dashboard_provider_loads_the_folder_the_dashboards_are_mounted_at() -> None:
    (provider,) = PROVIDERS["providers"]
    target, _ = bind_mounts("grafana")["./deploy/grafana/dashboards"]
    home = SERVICES["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]

    assert provider["type"] == "file"
    assert provider["options"]["path"] == target
    assert home == f"{target}/memworker.json"


def test_anonymous_visitors_may_only_view_and_the_admin_password_comes_from_the_environment() -> (
    None
):
    environment = SERVICES["grafana"]["environment"]

    assert environment["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert environment["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert environment["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:-")


# --- Prometheus and the profile -------------------------------------------------------------


def test_prometheus_scrapes_only_services_running_beside_it_on_ports_they_listen_on() -> None:
    prometheus = SERVICES["prometheus"]
    running = profile_services()

    for host, port in scrape_targets():
        assert host in running, host
        assert networks(running[host]) & networks(prometheus), host
        assert port in container_ports(running[host]), (host, port)


def test_every_service_serving_metrics_is_scraped_on_its_metrics_port() -> None:
    serving = {
        (name, int(spec["environment"]["MEMWORKER_METRICS_PORT"]))
        for name, spec in profile_services().items()
        if "MEMWORKER_METRICS_PORT" in spec.get("environment", {})
    }

    assert serving  # the lanes
    assert serving <= scrape_targets()


def test_prometheus_reads_the_config_mounted_from_the_repository() -> None:
    (flag,) = [a for a in SERVICES["prometheus"]["command"] if a.startswith("--config.file=")]

    assert bind_mounts("prometheus")["./deploy/prometheus/prometheus.yml"] == (
        flag.removeprefix("--config.file="),
        "ro",
    )


@pytest.mark.parametrize("service", ["prometheus", "grafana"])
def test_monitoring_starts_only_with_its_profile_on_loopback_from_a_pinned_image(
    service: str,
) -> None:
    spec = SERVICES[service]
    _, tag = spec["image"].rsplit(":", 1)

    assert spec["profiles"] == [PROFILE]
    assert all(str(p).startswith("127.0.0.1:") for p in spec["ports"])
    assert re.fullmatch(r"v?\d+\.\d+\.\d+", tag)


def test_the_deployment_guide_gives_the_command_and_the_address() -> None:
    guide = (ROOT / "docs" / "deployment.md").read_text(encoding="utf-8")
    (grafana_port,) = SERVICES["grafana"]["ports"]

    assert f"docker compose --profile {PROFILE} up -d" in guide
    assert grafana_port.rsplit(":", 1)[0] in guide  # 127.0.0.1:3000

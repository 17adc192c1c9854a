#!/usr/bin/env python3
"""Writes k8s/components/monitoring/prometheusrule.yaml from
deploy/observability/ferry-alerts.yaml (the one source of ferry's alert rules).

    clients/python/.venv/bin/python tests/deploy/gen_prometheus_rule.py

tests/deploy/test_manifests.py fails when the two differ.
"""
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "deploy/observability/ferry-alerts.yaml"
TARGET = ROOT / "k8s/components/monitoring/prometheusrule.yaml"

HEADER = """\
# GENERATED from deploy/observability/ferry-alerts.yaml by
# tests/deploy/gen_prometheus_rule.py; edit that file, then rerun the script
# (tests/deploy fails while the two differ). The Prometheus Operator loads
# these rules; `job` is the ServiceMonitor's Service name, ferry.
"""


def rule_object() -> dict:
    rules = yaml.safe_load(SOURCE.read_text())
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "ferry", "labels": {"app.kubernetes.io/name": "ferry"}},
        "spec": rules,
    }


def main() -> None:
    text = yaml.safe_dump(rule_object(), sort_keys=False, width=110, allow_unicode=True)
    TARGET.write_text(HEADER + text)
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""Renders every kustomization under k8s/ and validates every object offline.

* Rendering: the pinned kustomize binary (`kustomize build DIR`, what
  `kubectl kustomize DIR` / `kubectl apply -k DIR` run). Where kubectl is on
  PATH its embedded kustomize renders too, and both must agree.
* Kubernetes kinds: kubernetes-validate's copy of the Kubernetes OpenAPI
  schemas, in strict mode (unknown fields are errors, as with
  `kubectl apply --validate=strict`), against the oldest supported version
  (1.27: gRPC probes are GA there) and the newest the package carries.
* Custom resources (Prometheus Operator ServiceMonitor/PrometheusRule, KEDA
  ScaledObject): no CRD schemas ship with kubernetes-validate, so each is
  checked against a small hand-written schema in tests/deploy/schemas/: the
  subset of the upstream CRD's fields these manifests may use, strict
  (unknown fields are errors), with Kubernetes' own definitions
  (ObjectMeta, LabelSelector, HPA behavior) referenced from
  kubernetes-validate.
An object of any other kind fails the test: nothing goes unvalidated.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import referencing
import yaml
from referencing import Registry, Resource

from conftest import ROOT, kustomization_dirs, kustomize_build

OLDEST = "1.27.0"
NEWEST = kubernetes_validate.utils.latest_version()
SCHEMAS = Path(__file__).parent / "schemas"

# apiVersion, kind -> checked-in schema of the custom resource.
CUSTOM = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring-v1.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule-monitoring-v1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject-keda-v1alpha1.json",
}


def kubernetes_definitions(version: str) -> Resource:
    directory = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = directory / f"v{version}-local-strict" / "_definitions.json"
    return Resource.from_contents(json.loads(path.read_text()))


def validate_custom(obj: dict) -> None:
    schema = json.loads((SCHEMAS / CUSTOM[(obj["apiVersion"], obj["kind"])]).read_text())
    registry = Registry().with_resources([
        ("https://kubernetes.io/api/_definitions.json", kubernetes_definitions(NEWEST)),
    ])
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
    assert not errors, "\n".join(
        f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)


def test_every_kustomization_renders_and_validates(rendered):
    counts = {}
    for directory, objects in rendered.items():
        assert objects, f"{directory} rendered nothing"
        for obj in objects:
            where = f"{directory}: {obj['kind']}/{obj['metadata']['name']}"
            key = (obj["apiVersion"], obj["kind"])
            if key in CUSTOM:
                try:
                    validate_custom(obj)
                except AssertionError as error:
                    pytest.fail(f"{where} does not match its CRD schema:\n{error}")
            else:
                for version in (OLDEST, NEWEST):
                    try:
                        kubernetes_validate.validate(obj, version, strict=True)
                    except kubernetes_validate.SchemaNotFoundError:
                        pytest.fail(f"{where}: {key} is neither a Kubernetes {version} kind "
                                    "nor a custom resource with a schema in tests/deploy/schemas")
                    except kubernetes_validate.ValidationError as error:
                        path = ".".join(str(p) for p in error.path)
                        pytest.fail(f"{where} is invalid for Kubernetes {version}: "
                                    f"{path}: {error.message}")
            counts[directory] = counts.get(directory, 0) + 1
    print("validated:", ", ".join(f"{d}: {n} objects" for d, n in sorted(counts.items())),
          f"(Kubernetes {OLDEST} and {NEWEST}, strict)")


def test_validation_catches_mistakes(rendered):
    """The validators reject what they should (so a pass means something)."""
    objects = rendered["k8s/example"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, NEWEST, strict=True)
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "45s"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, NEWEST, strict=True)
    for kind in ("ServiceMonitor", "ScaledObject", "PrometheusRule"):
        obj = next(o for o in objects if o["kind"] == kind)
        broken = json.loads(json.dumps(obj))
        broken["spec"]["unknownField"] = 1
        with pytest.raises(AssertionError):
            validate_custom(broken)
    scaled = json.loads(json.dumps(next(o for o in objects if o["kind"] == "ScaledObject")))
    scaled["spec"]["triggers"][0]["metadata"]["lagThreshold"] = 5000  # must be a string
    with pytest.raises(AssertionError):
        validate_custom(scaled)


def test_kubectl_kustomize_renders_the_same():
    """`kubectl kustomize` (what users run) gives the same objects as the
    pinned kustomize, where kubectl is installed (this check needs no cluster)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl not on PATH: rendered with the pinned kustomize only")
        return
    for directory in kustomization_dirs():
        ours = [d for d in yaml.safe_load_all(kustomize_build(directory)) if d]
        result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0, result.stderr
        theirs = [d for d in yaml.safe_load_all(result.stdout) if d]
        assert ours == theirs, f"{directory.relative_to(ROOT)}: kubectl kustomize differs"

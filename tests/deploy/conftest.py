"""Shared helpers of the deployment tests (tests/deploy).

What they need, all installed or built by tools/test_sdks (never skipped when
missing: a missing tool is a failure):
  * kustomize (pinned in tools/setup_sdks, installed from the Go module proxy
    into tests/deploy/.bin; FERRY_KUSTOMIZE points elsewhere);
  * kubernetes-validate and PyYAML in this interpreter
    (tests/deploy/requirements.txt);
  * `bazel build //server:ferry //clients/ferryctl:ferryctl
    //clients/cpp/examples:example_worker` (FERRY_BAZEL_BIN points elsewhere).

Every kustomization under k8s/ (a directory with a kustomization.yaml of kind
Kustomization; components are rendered through the overlays that use them)
is rendered once per session, the way `kubectl kustomize DIR` renders it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
BAZEL_BIN = Path(os.environ.get("FERRY_BAZEL_BIN", ROOT / "bazel-bin"))
FERRY = BAZEL_BIN / "server/ferry"
FERRYCTL = BAZEL_BIN / "clients/ferryctl/ferryctl"
WORKER = BAZEL_BIN / "clients/cpp/examples/example_worker"
KUSTOMIZE = Path(os.environ.get("FERRY_KUSTOMIZE", ROOT / "tests/deploy/.bin/kustomize"))
DOCKERFILES = {
    "ferry": ROOT / "deploy/docker/ferry.Dockerfile",
    "worker": ROOT / "deploy/docker/worker.Dockerfile",
}


def kustomization_dirs() -> List[Path]:
    """Every kustomization under k8s/ that renders on its own (not components)."""
    found = []
    for path in sorted(K8S.rglob("kustomization.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind", "Kustomization") == "Kustomization":
            found.append(path.parent)
    return found


def require_file(path: Path, how: str) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: {how}")
    return path


def kustomize_build(directory: Path) -> str:
    require_file(KUSTOMIZE, "run tools/setup_sdks (it installs the pinned kustomize)")
    result = subprocess.run([str(KUSTOMIZE), "build", str(directory)], capture_output=True,
                            text=True, timeout=120)
    if result.returncode != 0:
        pytest.fail(f"kustomize build {directory.relative_to(ROOT)} failed:\n{result.stderr}")
    return result.stdout


@pytest.fixture(scope="session")
def rendered() -> Dict[str, List[dict]]:
    """kustomization dir (relative to the repo, e.g. "k8s/example") -> objects."""
    out = {}
    for directory in kustomization_dirs():
        text = kustomize_build(directory)
        out[str(directory.relative_to(ROOT))] = [d for d in yaml.safe_load_all(text) if d]
    assert {"k8s/base", "k8s/example"} <= set(out), sorted(out)
    return out


# ------------------------------------------------------------------ objects


def objects_of(objects: Iterable[dict], kind: str) -> List[dict]:
    return [o for o in objects if o.get("kind") == kind]


def one(objects: Iterable[dict], kind: str, name: str) -> dict:
    """The object of `kind` named `name` (or `name-<hash>` for generated ones)."""
    matches = [o for o in objects_of(objects, kind)
               if o["metadata"]["name"] == name
               or re.fullmatch(re.escape(name) + r"-[a-z0-9]{10}", o["metadata"]["name"])]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def namespace_of(objects: Iterable[dict]) -> str:
    """The namespace the namespaced objects land in ("default" when unset)."""
    namespaces = {o["metadata"].get("namespace", "default") for o in objects
                  if o["kind"] not in ("Namespace",)}
    assert len(namespaces) == 1, f"objects spread over namespaces {namespaces}"
    return namespaces.pop()


def container(deployment: dict, name: str) -> dict:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    matches = [c for c in containers if c["name"] == name]
    assert len(matches) == 1, f"{deployment['metadata']['name']}: no container {name}"
    return matches[0]


def selector_matches(selector: Optional[dict], labels: dict) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, op, values = expression["key"], expression["operator"], expression.get("values", [])
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def ferry_config(objects: List[dict]) -> dict:
    """ferry.yaml from the rendered ConfigMap, parsed."""
    config_map = one(objects, "ConfigMap", "ferry-config")
    return yaml.safe_load(config_map["data"]["ferry.yaml"])


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def host_of(address: str) -> str:
    return address.rsplit(":", 1)[0]


def metrics_address(config: dict) -> str:
    """server.metrics_listen, or the binary's default (listen's host, port 9464)."""
    server = config.get("server") or {}
    listen = server.get("listen", "127.0.0.1:7070")
    return server.get("metrics_listen", f"{host_of(listen)}:9464")


def duration_seconds(text: str) -> float:
    """A Go/absl duration such as 20s, 1m30s, 500ms."""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    total = 0.0
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)", text)
    assert parts and "".join(a + b for a, b in parts) == text, f"not a duration: {text}"
    for number, unit in parts:
        total += float(number) * units[unit]
    return total


def byte_size(text) -> int:
    """A ferry byte size: 268435456, 256MiB, 3MB..."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?", str(text).strip())
    assert match, f"not a byte size: {text}"
    factor = {None: 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
              "KB": 10**3, "MB": 10**6, "GB": 10**9}[match.group(2)]
    return int(match.group(1)) * factor


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity: 512Mi, 1Gi, 1G, 1000000."""
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(text))
    assert match, f"unsupported quantity {text}"
    factor = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
              "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[match.group(2)]
    return int(match.group(1)) * factor


def binary_flags(binary: Path) -> set:
    """The flags a binary accepts, from absl's --helpfull."""
    require_file(binary, "run `bazel build //server:ferry //clients/ferryctl:ferryctl "
                         "//clients/cpp/examples:example_worker` (tools/test_sdks does)")
    result = subprocess.run([str(binary), "--helpfull"], capture_output=True, text=True,
                            timeout=30)
    return set(re.findall(r"^\s+--([a-z_0-9]+) ", result.stdout + result.stderr, re.M))

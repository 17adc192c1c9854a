"""The rendered manifests against the code: what the pods expose, mount and
wait for must be what the binaries serve, read and do.

For every kustomization under k8s/ (rendered as `kubectl kustomize` would):
  * ferry.yaml from the rendered ConfigMap passes the real binary's
    `ferry --check_config`, run with exactly the environment the Deployment
    gives the container (downward-API values filled in), so a `${NAME}` the
    pod does not set fails here and not in the cluster;
  * the ports of server.listen / server.metrics_listen are the container
    ports, the probe port and the Service's ports; they listen on all
    interfaces; the processor target is the worker headless Service's DNS
    name in the rendered namespace, at the port the worker listens on;
  * terminationGracePeriodSeconds > shutdown.grace + a margin for the final
    commit and the group leave;
  * every file the config names (control token, TLS files) lies in a mounted
    Secret, under a key that Secret has;
  * container flags exist in the binaries; the config path is the mounted
    ConfigMap key; runAsUser is the image's USER;
  * selectors select the pods they are meant for, the NetworkPolicies let
    only ferry reach the workers and only operators reach Control;
  * the autoscaler is capped at the partition count and agrees with the
    config (bootstrap servers, group, topic);
  * the PrometheusRule is deploy/observability/ferry-alerts.yaml.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest
import yaml

from conftest import (DOCKERFILES, FERRY, ROOT, WORKER, binary_flags, byte_size, container,
                      duration_seconds, ferry_config, host_of, metrics_address, namespace_of,
                      objects_of, one, port_of, quantity_bytes, require_file, selector_matches)

# shutdown.grace only bounds the drain; after it ferry commits (a synchronous
# commit, up to librdkafka's socket timeout in a bad case), closes the
# consumer (LeaveGroup, commit on revoke), stops its servers (up to 2 s each).
SHUTDOWN_MARGIN_SECONDS = 15
# Secrets the manifests mount but do not create (users create them; never
# commit a credential), with the keys ferry reads from them. README.md's
# "Deploying on Kubernetes" documents each.
EXTERNAL_SECRETS = {
    "ferry-control-token": {"token"},
    "ferry-server-tls": {"tls.crt", "tls.key", "ca.crt"},
    "ferry-client-tls": {"tls.crt", "tls.key", "ca.crt"},
    "ferry-worker-tls": {"tls.crt", "tls.key", "ca.crt"},
}
# librdkafka's fetch queue (queued.max.messages.kbytes default 65536 KiB)
# comes on top of ferry's byte budget; plus room for the process itself.
LIBRDKAFKA_QUEUE_BYTES = 64 << 20
PROCESS_HEADROOM_BYTES = 256 << 20


def kustomizations(rendered) -> List[str]:
    return sorted(rendered)


@pytest.fixture(params=["k8s/base", "k8s/example", "k8s/example-tls"])
def deployment_set(request, rendered) -> Tuple[str, List[dict]]:
    if request.param not in rendered:
        pytest.fail(f"{request.param} did not render (see test_render_validate)")
    return request.param, rendered[request.param]


def test_every_kustomization_is_covered(rendered):
    """A new overlay under k8s/ must be added to deployment_set's params."""
    covered = {"k8s/base", "k8s/example", "k8s/example-tls"}
    assert set(rendered) == covered


# ---------------------------------------------------------------- the config


def pod_environment(deployment: dict, container_name: str, namespace: str) -> Dict[str, str]:
    """The environment the kubelet gives the container (downward API filled in)."""
    pod_name = f"{deployment['metadata']['name']}-6d5f8b7c9d-x2x4q"
    env = {}
    for item in container(deployment, container_name).get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            field = source["fieldRef"]["fieldPath"]
            env[item["name"]] = {"metadata.name": pod_name, "metadata.namespace": namespace,
                                 "spec.nodeName": "node-1", "status.podIP": "10.0.0.7"}[field]
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            env[item["name"]] = "from-a-secret-or-configmap"
        else:
            pytest.fail(f"unsupported env source {source}")
    return env


def config_files(config: dict) -> Dict[str, str]:
    """Config key -> file path, for every file ferry reads."""
    files = {}
    control = config.get("control") or {}
    if "token_file" in control:
        files["control.token_file"] = control["token_file"]
    for key, value in ((config.get("server") or {}).get("tls") or {}).items():
        files[f"server.tls.{key}"] = value
    for i, processor in enumerate(config.get("processors") or []):
        for key, value in (processor.get("tls") or {}).items():
            if key != "server_name":
                files[f"processors[{i}].tls.{key}"] = value
    return files


def self_signed_pem(directory: Path) -> Tuple[bytes, bytes]:
    """A throwaway certificate and key (for config checks that read them)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=ferry.test", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    return cert.read_bytes(), key.read_bytes()


def test_config_passes_check_config_with_the_pods_environment(deployment_set, tmp_path):
    name, objects = deployment_set
    namespace = namespace_of(objects)
    deployment = one(objects, "Deployment", "ferry")
    require_file(FERRY, "run `bazel build //server:ferry` (tools/test_sdks does)")
    text = one(objects, "ConfigMap", "ferry-config")["data"]["ferry.yaml"]
    # The files the config names, at the same paths under tmp_path (the
    # check may read them: a token, PEM certificates and keys).
    cert, key = self_signed_pem(tmp_path)
    for config_key, path in config_files(yaml.safe_load(text)).items():
        local = tmp_path / "root" / path.lstrip("/")
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(b"a-control-token\n" if config_key == "control.token_file"
                          else key if config_key.endswith("key_file") else cert)
        text = text.replace(path, str(local))
    config_path = tmp_path / "ferry.yaml"
    config_path.write_text(text)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env.update(pod_environment(deployment, "ferry", namespace))
    result = subprocess.run([str(FERRY), "--check_config", f"--config={config_path}"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, f"{name}: ferry --check_config failed:\n{result.stderr}"
    assert "config OK" in result.stdout
    # Without the pod's environment the same file fails: the check really
    # depends on the Deployment's env (client.id: ${POD_NAME}).
    bare = subprocess.run([str(FERRY), "--check_config", f"--config={config_path}"],
                          capture_output=True, text=True, env={"PATH": env["PATH"]}, timeout=60)
    assert bare.returncode == 2 and "POD_NAME" in bare.stderr, bare.stderr


def test_replica_identity_comes_from_the_pod_name(deployment_set):
    _, objects = deployment_set
    config = ferry_config(objects)
    assert config["kafka"]["client.id"] == "${POD_NAME}"
    env = container(one(objects, "Deployment", "ferry"), "ferry")["env"]
    pod_name = [e for e in env if e["name"] == "POD_NAME"]
    assert pod_name and pod_name[0]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_config_file_is_the_mounted_configmap_key(deployment_set):
    _, objects = deployment_set
    deployment = one(objects, "Deployment", "ferry")
    ferry = container(deployment, "ferry")
    config_args = [a for a in ferry["args"] if a.startswith("--config=")]
    assert len(config_args) == 1
    path = config_args[0].split("=", 1)[1]
    volume, key = mounted_source(deployment, ferry, path)
    assert "configMap" in volume, f"{path} is not in a ConfigMap volume"
    config_map = one(objects, "ConfigMap", "ferry-config")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    assert key in config_map["data"], f"ConfigMap has no key {key}"
    # The image's default CMD points at the same place.
    assert f'"--config={path}"' in DOCKERFILES["ferry"].read_text()


def test_container_flags_exist_in_the_binaries(deployment_set):
    _, objects = deployment_set
    for deployment_name, container_name, binary in (("ferry", "ferry", FERRY),
                                                     ("ferry-worker", "worker", WORKER)):
        flags = binary_flags(binary)
        assert flags, f"no flags read from {binary} --helpfull"
        args = container(one(objects, "Deployment", deployment_name), container_name)["args"]
        for arg in args:
            match = re.fullmatch(r"--([a-z_0-9]+)(=.*)?", arg)
            assert match, f"{deployment_name}: unexpected argument {arg!r}"
            assert match.group(1) in flags, f"{binary.name} has no flag --{match.group(1)}"


# ---------------------------------------------------------------- ports


def container_port(c: dict, port) -> int:
    """A probe's or Service's target port (number or name) as a number."""
    if isinstance(port, int):
        assert any(p["containerPort"] == port for p in c["ports"]), port
        return port
    named = [p["containerPort"] for p in c["ports"] if p.get("name") == port]
    assert named, f"container {c['name']} has no port named {port}"
    return named[0]


def probe_port(c: dict, probe: dict) -> int:
    for kind in ("grpc", "tcpSocket", "httpGet"):
        if kind in probe:
            return container_port(c, probe[kind]["port"])
    pytest.fail(f"unsupported probe {probe}")


def test_ports_agree_with_the_config(deployment_set):
    name, objects = deployment_set
    config = ferry_config(objects)
    listen = config["server"]["listen"]
    metrics = metrics_address(config)
    # Reachable from the kubelet and from other pods: all interfaces.
    assert host_of(listen) in ("0.0.0.0", "[::]"), f"server.listen {listen}"
    assert host_of(metrics) in ("0.0.0.0", "[::]"), f"metrics_listen {metrics}"
    control_port, metrics_port = port_of(listen), port_of(metrics)

    health = (config.get("server") or {}).get("health_listen")
    deployment = one(objects, "Deployment", "ferry")
    ferry = container(deployment, "ferry")
    ports = {p["name"]: p["containerPort"] for p in ferry["ports"]}
    expected_ports = {"control": control_port, "metrics": metrics_port}
    if health:
        assert host_of(health) in ("0.0.0.0", "[::]"), f"health_listen {health}"
        expected_ports["health"] = port_of(health)
    assert ports == expected_ports
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert probe in ferry, f"{name}: ferry has no {probe}"
        # The health service is served on server.listen, and alone on
        # server.health_listen when set (the probes' port then).
        want = port_of(health) if health else control_port
        assert probe_port(ferry, ferry[probe]) == want, probe
    service = one(objects, "Service", "ferry")
    assert selector_matches({"matchLabels": service["spec"]["selector"]},
                            deployment["spec"]["template"]["metadata"]["labels"])
    by_name = {p["name"]: p for p in service["spec"]["ports"]}
    assert set(by_name) == {"control", "metrics"}
    for port_name, number in (("control", control_port), ("metrics", metrics_port)):
        assert by_name[port_name]["port"] == number
        assert container_port(ferry, by_name[port_name]["targetPort"]) == number


def test_health_probes_match_the_servers_tls(deployment_set):
    """The kubelet's gRPC probe speaks plaintext only: with server.tls on the
    Control port, a gRPC probe there would never pass, so the probes go to
    server.health_listen (plaintext health alone), or are TCP connects."""
    name, objects = deployment_set
    config = ferry_config(objects)
    ferry = container(one(objects, "Deployment", "ferry"), "ferry")
    server = config.get("server") or {}
    tls = bool(server.get("tls"))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if tls and not server.get("health_listen"):
            assert "tcpSocket" in ferry[probe], f"{name}: {probe} must be tcpSocket under TLS"
        else:
            assert ferry[probe].get("grpc", {}).get("service") in (None, ""), probe
            assert "grpc" in ferry[probe], f"{name}: {probe} should use the gRPC health service"


def test_processor_target_is_the_worker_headless_service(deployment_set):
    name, objects = deployment_set
    namespace = namespace_of(objects)
    config = ferry_config(objects)
    service = one(objects, "Service", "ferry-worker")
    assert service["spec"]["clusterIP"] == "None", "workers need a headless Service"
    worker_deployment = one(objects, "Deployment", "ferry-worker")
    worker_labels = worker_deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_matches({"matchLabels": service["spec"]["selector"]}, worker_labels)
    worker = container(worker_deployment, "worker")
    (service_port,) = service["spec"]["ports"]
    listen = [a.split("=", 1)[1] for a in worker["args"] if a.startswith("--listen=")]
    assert listen and host_of(listen[0]) == "0.0.0.0", "the worker must listen on all interfaces"
    assert container_port(worker, service_port["targetPort"]) == port_of(listen[0])
    assert probe_port(worker, worker["readinessProbe"]) == port_of(listen[0])
    for processor in config["processors"]:
        target = processor["target"]
        match = re.fullmatch(r"dns:///([^:/]+):(\d+)", target)
        assert match, f"{name}: target {target} is not dns:///host:port"
        assert match.group(1) == f"ferry-worker.{namespace}.svc.cluster.local", (
            f"{name}: target {target} does not name the worker Service in namespace {namespace}")
        assert int(match.group(2)) == service_port["port"]


# ---------------------------------------------------------------- lifecycle


def test_termination_grace_exceeds_the_shutdown_grace(deployment_set):
    name, objects = deployment_set
    config = ferry_config(objects)
    grace = duration_seconds((config.get("shutdown") or {}).get("grace", "20s"))
    pod = one(objects, "Deployment", "ferry")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] >= grace + SHUTDOWN_MARGIN_SECONDS, (
        f"{name}: terminationGracePeriodSeconds {pod['terminationGracePeriodSeconds']} < "
        f"shutdown.grace {grace}s + {SHUTDOWN_MARGIN_SECONDS}s")
    # A preStop hook would run before SIGTERM and eat into the same budget.
    assert "lifecycle" not in container(one(objects, "Deployment", "ferry"), "ferry")
    # Rolling updates add a member before removing one.
    strategy = one(objects, "Deployment", "ferry")["spec"]["strategy"]["rollingUpdate"]
    assert strategy["maxUnavailable"] == 0 and strategy["maxSurge"] >= 1


def mounted_source(deployment: dict, c: dict, path: str) -> Tuple[dict, str]:
    """The volume holding `path` in container `c`, and the key inside it."""
    for mount in c.get("volumeMounts", []):
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix):
            assert mount.get("readOnly") is True, f"{mount['mountPath']} should be read-only"
            assert "subPath" not in mount, "subPath mounts never see updates"
            relative = path[len(prefix):]
            volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
            volume = volumes[mount["name"]]
            source = volume.get("secret") or volume.get("configMap") or {}
            items = source.get("items")
            if items:
                keys = [i["key"] for i in items if i["path"] == relative]
                assert keys, f"{path}: no item of volume {mount['name']} has path {relative}"
                return volume, keys[0]
            return volume, relative
    pytest.fail(f"{path} is not under any volumeMount of container {c['name']}")


def test_config_files_are_mounted_secrets(deployment_set):
    name, objects = deployment_set
    config = ferry_config(objects)
    deployment = one(objects, "Deployment", "ferry")
    ferry = container(deployment, "ferry")
    files = config_files(config)
    assert "control.token_file" in files, f"{name}: Control must require a token"
    rendered_secrets = {s["metadata"]["name"]: s for s in objects_of(objects, "Secret")}
    for config_key, path in files.items():
        volume, key = mounted_source(deployment, ferry, path)
        assert "secret" in volume, f"{name}: {config_key} ({path}) is not in a Secret volume"
        secret = volume["secret"]["secretName"]
        assert not volume["secret"].get("optional"), f"{secret} must not be optional"
        if secret in rendered_secrets:
            assert key in (rendered_secrets[secret].get("data") or {}), (secret, key)
        else:
            assert secret in EXTERNAL_SECRETS, (
                f"{name}: Secret {secret} is neither rendered nor a documented external Secret")
            assert key in EXTERNAL_SECRETS[secret], f"{config_key}: {secret} has no key {key}"


def test_external_secrets_are_documented(rendered):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Deploying on Kubernetes", 1)
    assert len(section) == 2, "README.md has no section 'Deploying on Kubernetes'"
    used = set()
    for objects in rendered.values():
        for deployment in objects_of(objects, "Deployment"):
            for volume in deployment["spec"]["template"]["spec"].get("volumes", []):
                if "secret" in volume:
                    used.add(volume["secret"]["secretName"])
    assert used <= set(EXTERNAL_SECRETS)
    for secret in used:
        assert f"`{secret}`" in section[1], f"README's Kubernetes section never names {secret}"


def test_pods_run_as_the_images_user(deployment_set):
    _, objects = deployment_set
    for deployment_name, dockerfile in (("ferry", "ferry"), ("ferry-worker", "worker")):
        users = re.findall(r"^USER\s+(\d+):(\d+)\s*$", DOCKERFILES[dockerfile].read_text(), re.M)
        assert len(users) == 1, f"{dockerfile}.Dockerfile needs one numeric USER uid:gid"
        uid, gid = map(int, users[0])
        assert uid != 0
        pod = one(objects, "Deployment", deployment_name)["spec"]["template"]["spec"]
        context = pod["securityContext"]
        assert context["runAsNonRoot"] is True
        assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid)
        for c in pod["containers"]:
            security = c["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["readOnlyRootFilesystem"] is True
            assert security["capabilities"]["drop"] == ["ALL"]


def test_resources_cover_the_configured_budgets(deployment_set):
    _, objects = deployment_set
    config = ferry_config(objects)
    budget = byte_size((config.get("budgets") or {}).get("max_buffered_bytes", "256MiB"))
    queue = int((config.get("kafka") or {}).get("queued.max.messages.kbytes", 65536)) * 1024
    for deployment in objects_of(objects, "Deployment"):
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            resources = c["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), c["name"]
            assert "memory" in resources["limits"], c["name"]
    ferry = container(one(objects, "Deployment", "ferry"), "ferry")
    limit = quantity_bytes(ferry["resources"]["limits"]["memory"])
    assert limit >= budget + max(queue, LIBRDKAFKA_QUEUE_BYTES) + PROCESS_HEADROOM_BYTES, (
        f"memory limit {limit} leaves no room for max_buffered_bytes {budget} + the fetch queue")


# ---------------------------------------------------------------- selectors, policies


def pod_labels(objects: List[dict], deployment: str) -> dict:
    return one(objects, "Deployment", deployment)["spec"]["template"]["metadata"]["labels"]


def test_selectors_select_their_pods(deployment_set):
    _, objects = deployment_set
    ferry_pods = pod_labels(objects, "ferry")
    worker_pods = pod_labels(objects, "ferry-worker")
    for deployment, labels in (("ferry", ferry_pods), ("ferry-worker", worker_pods)):
        spec = one(objects, "Deployment", deployment)["spec"]
        assert selector_matches(spec["selector"], labels)
        anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]
        for term in anti["preferredDuringSchedulingIgnoredDuringExecution"]:
            assert selector_matches(term["podAffinityTerm"]["labelSelector"], labels)
    # The two Deployments' pods never match each other's selectors.
    assert not selector_matches(one(objects, "Deployment", "ferry")["spec"]["selector"],
                                worker_pods)
    assert not selector_matches(one(objects, "Deployment", "ferry-worker")["spec"]["selector"],
                                ferry_pods)
    pdb = one(objects, "PodDisruptionBudget", "ferry")
    assert selector_matches(pdb["spec"]["selector"], ferry_pods)
    assert pdb["spec"].get("maxUnavailable") == 1
    for monitor in objects_of(objects, "ServiceMonitor"):
        service = one(objects, "Service", "ferry")
        assert selector_matches(monitor["spec"]["selector"], service["metadata"]["labels"])
        ports = {p["name"] for p in service["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            assert endpoint["port"] in ports and endpoint["path"] == "/metrics"


def allowed(policies: List[dict], pod: dict, port: int, peer: dict, peer_namespace: dict,
            c: dict) -> bool:
    """Would NetworkPolicy let `peer` (labels, in a namespace with labels
    `peer_namespace`, same namespace when it has the policy's) reach `port`
    of `pod` (labels), whose container `c` names its ports?"""
    selecting = [p for p in policies if selector_matches(p["spec"]["podSelector"], pod)
                 and "Ingress" in p["spec"].get("policyTypes", ["Ingress"])]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            if rule.get("ports") and not any(
                    container_port(c, p["port"]) == port for p in rule["ports"]):
                continue
            sources = rule.get("from")
            if not sources:
                return True
            for source in sources:
                namespace_ok = ("namespaceSelector" in source and
                                selector_matches(source["namespaceSelector"], peer_namespace)) \
                    or ("namespaceSelector" not in source and peer_namespace.get("same"))
                pod_ok = "podSelector" not in source or selector_matches(source["podSelector"],
                                                                         peer)
                if "ipBlock" in source:
                    continue
                if namespace_ok and pod_ok:
                    return True
    return False


def test_network_policies_isolate_workers_and_control(deployment_set):
    _, objects = deployment_set
    policies = objects_of(objects, "NetworkPolicy")
    config = ferry_config(objects)
    ferry_pods, worker_pods = pod_labels(objects, "ferry"), pod_labels(objects, "ferry-worker")
    ferry = container(one(objects, "Deployment", "ferry"), "ferry")
    worker = container(one(objects, "Deployment", "ferry-worker"), "worker")
    worker_port = worker["ports"][0]["containerPort"]
    control, metrics = port_of(config["server"]["listen"]), port_of(metrics_address(config))
    same = {"same": True, "kubernetes.io/metadata.name": namespace_of(objects)}
    other = {"kubernetes.io/metadata.name": "elsewhere"}
    monitoring = {"kubernetes.io/metadata.name": "monitoring"}
    operator = {"ferry-operator": "true", "app": "toolbox"}
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    stranger = {"app": "web"}

    # Workers: ferry only.
    assert allowed(policies, worker_pods, worker_port, ferry_pods, same, worker)
    for peer, namespace in ((stranger, same), (operator, same), (ferry_pods, other),
                            (prometheus, monitoring), (worker_pods, same)):
        assert not allowed(policies, worker_pods, worker_port, peer, namespace, worker), peer
    # Control: operators only.
    assert allowed(policies, ferry_pods, control, operator, same, ferry)
    for peer, namespace in ((stranger, same), (worker_pods, same), (prometheus, monitoring),
                            (operator, other), (ferry_pods, same)):
        assert not allowed(policies, ferry_pods, control, peer, namespace, ferry), peer
    # Metrics: Prometheus and operators.
    assert allowed(policies, ferry_pods, metrics, prometheus, monitoring, ferry)
    assert allowed(policies, ferry_pods, metrics, operator, same, ferry)
    for peer, namespace in ((stranger, same), (worker_pods, same), (prometheus, other)):
        assert not allowed(policies, ferry_pods, metrics, peer, namespace, ferry), peer


# ---------------------------------------------------------------- autoscaling


def test_autoscaling_is_capped_at_the_partition_count(rendered):
    for name, objects in rendered.items():
        for scaled in objects_of(objects, "ScaledObject") + objects_of(
                objects, "HorizontalPodAutoscaler"):
            spec = scaled["spec"]
            partitions = int(scaled["metadata"]["annotations"]["ferry/topic-partitions"])
            maximum = spec.get("maxReplicaCount", spec.get("maxReplicas"))
            minimum = spec.get("minReplicaCount", spec.get("minReplicas", 1))
            assert 1 <= minimum <= maximum <= partitions, (
                f"{name}: replicas {minimum}..{maximum} with {partitions} partitions")
            assert maximum == partitions, "cap the autoscaler at the partition count"
            target = spec["scaleTargetRef"]
            assert target["kind"] == "Deployment" and target["name"] == "ferry"
            deployment = one(objects, "Deployment", "ferry")
            assert "replicas" not in deployment["spec"], (
                f"{name}: the autoscaled Deployment must not set replicas (apply would reset it)")
            config = ferry_config(objects)
            for trigger in spec.get("triggers", []):
                assert trigger["type"] == "kafka"
                metadata = trigger["metadata"]
                assert metadata["bootstrapServers"] == config["kafka"]["bootstrap.servers"]
                assert metadata["consumerGroup"] == config["kafka"]["group.id"]
                assert metadata["topic"] in [t["name"] for t in config["topics"]]
                assert metadata.get("allowIdleConsumers", "false") == "false"
                assert int(metadata["lagThreshold"]) > 0
    example = rendered["k8s/example"]
    assert objects_of(example, "ScaledObject"), "the example overlay autoscales"


# ---------------------------------------------------------------- monitoring


def test_prometheus_rule_is_the_observability_alerts(rendered):
    alerts = yaml.safe_load((ROOT / "deploy/observability/ferry-alerts.yaml").read_text())
    for name, objects in rendered.items():
        for rule in objects_of(objects, "PrometheusRule"):
            assert rule["spec"] == alerts, (
                f"{name}: PrometheusRule differs from deploy/observability/ferry-alerts.yaml; "
                "run clients/python/.venv/bin/python tests/deploy/gen_prometheus_rule.py")
    assert objects_of(rendered["k8s/example"], "PrometheusRule")
    assert objects_of(rendered["k8s/example"], "ServiceMonitor")


def test_worker_tls_files_are_mounted_secrets(deployment_set):
    name, objects = deployment_set
    deployment = one(objects, "Deployment", "ferry-worker")
    worker = container(deployment, "worker")
    for arg in worker["args"]:
        match = re.fullmatch(r"--(tls_cert|tls_key|tls_client_ca)=(.+)", arg)
        if not match:
            continue
        volume, key = mounted_source(deployment, worker, match.group(2))
        assert "secret" in volume, f"{name}: --{match.group(1)} is not in a Secret"
        assert key in EXTERNAL_SECRETS[volume["secret"]["secretName"]], (arg, key)


def without_tls(config: dict) -> dict:
    config = yaml.safe_load(yaml.safe_dump(config))
    (config.get("server") or {}).pop("tls", None)
    # The plaintext health port the probes use under TLS.
    (config.get("server") or {}).pop("health_listen", None)
    for processor in config.get("processors") or []:
        processor.pop("tls", None)
    return config


def test_tls_overlay_only_adds_tls(rendered):
    """k8s/example-tls/ferry.yaml is k8s/example/ferry.yaml plus `tls:` (and
    the plaintext health port for the probes)."""
    plain = ferry_config(rendered["k8s/example"])
    tls = ferry_config(rendered["k8s/example-tls"])
    assert "tls" in tls["server"] and all("tls" in p for p in tls["processors"])
    assert without_tls(tls) == plain
    # Mutual TLS both ways of the processor stream: ferry presents a client
    # certificate and the workers demand one.
    for processor in tls["processors"]:
        assert {"ca_file", "cert_file", "key_file"} <= set(processor["tls"])
    worker = container(one(rendered["k8s/example-tls"], "Deployment", "ferry-worker"), "worker")
    assert any(a.startswith("--tls_client_ca=") for a in worker["args"])

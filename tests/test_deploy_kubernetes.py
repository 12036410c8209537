"""The Kubernetes manifests of deploy/, checked against the Dask operator's own CRDs and run through its own
pod builders."""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from distprice.cluster.config import ClusterConfig
from distprice.cluster.start import cluster_config

from utils import CRD_FILES, documents


@functools.cache
def crd_schema(kind: str) -> dict:
    """The openAPIV3Schema of the operator's CRD for ``kind`` (shipped in the dask-kubernetes package), made
    strict as ``kubectl apply`` is: a field the CRD does not name is an error, not silently dropped."""
    spec = importlib.util.find_spec("dask_kubernetes")
    if spec is None:
        pytest.skip("needs dask-kubernetes (the test extra) for the operator's CRDs")
    crds = Path(spec.origin).parent / "operator/deployment/helm/dask-kubernetes-operator/crds"
    (crd,) = documents(crds / CRD_FILES[kind])
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    schema["properties"] |= {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
    }
    return schema


def _strict(schema):
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {
        k: (_strict(v) if k != "properties" else {name: _strict(s) for name, s in v.items()}) for k, v in schema.items()
    }
    if (
        "properties" in strict
        and "additionalProperties" not in strict
        and not strict.get("x-kubernetes-preserve-unknown-fields")
    ):
        strict["additionalProperties"] = False
    return strict


def schema_errors(document: dict) -> list[str]:
    schema = crd_schema(document["kind"])
    jsonschema = pytest.importorskip("jsonschema", reason="needs jsonschema (the test extra)")
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


def test_manifests_match_the_operators_crds(manifests):
    for kind, document in manifests.items():
        assert schema_errors(document) == [], kind


@pytest.mark.parametrize(
    "mistake, error",
    [
        (
            lambda d: d["spec"]["worker"]["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": 1}),
            "spec.worker.spec.containers.0.resources.limits.nvidia.com/gpu: 1 is not of type 'string'",
        ),
        (
            lambda d: d["spec"]["worker"]["spec"]["containers"][0].update(comand=["dask"]),
            "Additional properties are not allowed ('comand' was unexpected)",
        ),
        (lambda d: d["spec"].pop("scheduler"), "'scheduler' is a required property"),
    ],
)
def test_the_crd_check_catches_mistakes(manifests, mistake, error):
    broken = copy.deepcopy(manifests["DaskCluster"])
    mistake(broken)
    assert any(error in e for e in schema_errors(broken)), schema_errors(broken)


def kubernetes_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of ``$(VAR)`` in a container's command and args: ``$$`` is a ``$``, and a
    reference to no variable of the container stays as written."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


def container_command(container: dict) -> list[str]:
    env = {e["name"]: e["value"] for e in container.get("env", [])}
    return [kubernetes_expand(part, env) for part in container.get("command", []) + container.get("args", [])]


def test_the_operator_gives_the_job_its_scheduler_address(manifests):
    pytest.importorskip("kopf", reason="needs dask-kubernetes (the test extra)")
    from dask_kubernetes.operator.controller.controller import build_job_pod_spec

    daskjob = manifests["DaskJob"]
    name = daskjob["metadata"]["name"]
    pod = build_job_pod_spec(name, name, "risk", daskjob["spec"]["job"]["spec"], {}, {})
    (job,) = pod["spec"]["containers"]
    address = f"tcp://{name}-scheduler.risk.svc.cluster.local:8786"
    shell = container_command(job)
    assert shell[:2] == ["sh", "-c"]
    words = shlex.split(shell[2])
    assert words[:5] == ["exec", "distprice", "run", "--cluster", address]
    assert "$(date +%F)" in shell[2]  # left for the shell
    assert cluster_config(address) == ClusterConfig(kind="address", address=address)
    # the init container gets no such variable: it waits on the Service the operator names after the job
    (wait,) = pod["spec"]["initContainers"]
    assert f'"tcp://{name}-scheduler:8786"' in wait["command"][2] and "wait_for_workers(1" in wait["command"][2]
    assert daskjob["spec"]["job"]["spec"]["restartPolicy"] == "Never"
    assert daskjob["spec"]["cluster"]["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == name


def test_the_operator_starts_gpu_workers_on_the_scheduler(manifests):
    pytest.importorskip("kopf", reason="needs dask-kubernetes (the test extra)")
    from dask_kubernetes.operator.controller.controller import build_worker_deployment_spec

    cluster, group = manifests["DaskCluster"], manifests["DaskWorkerGroup"]
    name = cluster["metadata"]["name"]
    assert group["spec"]["cluster"] == name
    assert cluster["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == name
    worker_specs = [
        cluster["spec"]["worker"],
        group["spec"]["worker"],
        manifests["DaskJob"]["spec"]["cluster"]["spec"]["worker"],
    ]
    for worker in worker_specs:
        deployment = build_worker_deployment_spec(f"{name}-default", "risk", name, "abc12", worker["spec"], {}, {})
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container_command(container) == [
            "dask",
            "worker",
            f"tcp://{name}-scheduler.risk.svc.cluster.local:8786",
            "--name",
            f"{name}-default-worker-abc12",
            "--nworkers",
            "6",
            "--nthreads",
            "2",
            "--preload",
            "distprice.cluster.worker",
        ]
        resources = container["resources"]
        for side in ("requests", "limits"):
            assert resources[side]["nvidia.com/gpu"] == "1" and {"cpu", "memory"} <= set(resources[side])
        assert container["image"].endswith("-cuda")

"""The deploy/ files and the batch-system clusters: the compose file and the images' pins, the Kubernetes
manifests (checked against the Dask operator's own CRDs and run through its own pod builders), SLURM and PBS
job scripts rendered by dask-jobqueue, a SLURM cluster whose jobs a stand-in sbatch runs on this machine, the
certificates of deploy/tls/make-certs.sh and a TLS-only local cluster that refuses clients without them."""
from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
import yaml
from click.testing import CliRunner

import distprice
from distprice.cli import main
from distprice.errors import ConfigError
from distprice.config import ClusterConfig, JobQueue, load_config, parse_config
from distprice.jobqueue import build_cluster, job_script
from distprice.runtime import Pricer, cluster_config, start

from conftest import random_portfolio

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
CONFIGS = ROOT / "configs"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def documents(path: Path) -> list[dict]:
    with open(path) as file:
        return [d for d in yaml.safe_load_all(file) if d is not None]


@pytest.fixture(scope="module")
def book():
    return random_portfolio(np.random.default_rng(7), 300, max_steps_per_year=12)


@pytest.fixture(scope="module")
def expected(book):
    return distprice.price(book, engine="cpu")


def assert_same_prices(got, expected):
    assert list(got["id"]) == list(expected["id"])
    np.testing.assert_allclose(got["price"], expected["price"], rtol=1e-13, atol=0)


# ---- docker ----

@pytest.fixture(scope="module")
def compose():
    (spec,) = documents(DEPLOY / "docker" / "compose.yaml")
    return spec


def test_compose_services_and_what_compose_needs_of_them(compose):
    assert set(compose) - {"name"} == {"services"} | {k for k in compose if k.startswith("x-")}
    services = compose["services"]
    assert set(services) == {"scheduler", "worker-0", "worker-1", "cpu-worker", "job"}
    used = {"image", "build", "command", "entrypoint", "ports", "healthcheck", "restart", "profiles", "depends_on",
            "volumes", "deploy"}
    for name, service in services.items():
        assert set(service) <= used, (name, set(service) - used)
        assert service["image"].startswith("distprice:0.1.0-")
        build = service["build"]
        assert (DEPLOY / "docker" / build["context"]).resolve() == ROOT
        assert (ROOT / build["dockerfile"]).is_file()
        assert service["image"].endswith("-cuda") == build["dockerfile"].endswith(".cuda")
        for dependency, condition in service.get("depends_on", {}).items():
            assert dependency in services and condition == {"condition": "service_healthy"}
    scheduler = services["scheduler"]
    assert scheduler["command"][:2] == ["dask", "scheduler"]
    assert scheduler["ports"] == ["127.0.0.1:8787:8787"]  # the dashboard on the host's loopback only
    assert "/health" in " ".join(scheduler["healthcheck"]["test"])
    assert "profiles" not in scheduler


def test_compose_gpu_workers_get_one_gpu_each_and_never_run_with_cpu_workers(compose):
    services = compose["services"]
    gpu = {name: s for name, s in services.items() if name.startswith("worker-")}
    devices = []
    for service in gpu.values():
        assert service["command"][:4] == ["dask", "cuda", "worker", "tcp://scheduler:8786"]
        (device,) = service["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
        devices += device["device_ids"]
        assert service["profiles"] == ["gpu"]
    assert sorted(devices) == ["0", "1"]
    cpu = services["cpu-worker"]
    assert cpu["command"][:3] == ["dask", "worker", "tcp://scheduler:8786"] and cpu["profiles"] == ["cpu"]
    assert all(v.endswith(":/data:ro") for s in [cpu, *gpu.values()] for v in s["volumes"])


def test_compose_job_runs_distprice_on_the_compose_config(compose):
    job = compose["services"]["job"]
    assert job["entrypoint"][:4] == ["distprice", "run", "--cluster", "/configs/compose.yaml"]
    assert "../../configs:/configs:ro" in job["volumes"] and (DEPLOY / "docker/../../configs").resolve() == CONFIGS
    config = load_config(CONFIGS / "compose.yaml")
    assert (config.cluster.kind, config.cluster.address) == ("address", "tcp://scheduler:8786")
    assert config.job.portfolio.startswith("/data/") and config.job.output.startswith("/data/")


def test_images_are_pinned_lean_and_run_as_a_user():
    froms = {}
    for name in ("Dockerfile.cpu", "Dockerfile.cuda"):
        text = (DEPLOY / "docker" / name).read_text()
        (base,) = re.findall(r"^ARG \w+_IMAGE=(\S+)$", text, flags=re.M)
        froms[name] = base
        assert re.search(r":\d+\.\d+\.\d+-", base), base  # a full version in the tag, not latest
        installs = re.findall(r"pip install .*", text)
        assert installs and all("--no-cache-dir" in i and "--constraint" in i for i in installs)
        for apt in re.findall(r"apt-get install[^&]*", text):
            assert "--no-install-recommends" in apt and not re.search(r"\b(gcc|g\+\+|build-essential|make)\b", apt)
        if "apt-get" in text:
            assert text.count("rm -rf /var/lib/apt/lists/*") == text.count("apt-get update")
        final = text.rsplit("\nFROM ", 1)[1]
        assert "COPY --from=build /opt/venv /opt/venv" in final and "\nUSER 10001\n" in final
    # the client and the workers must run the same Python: 3.12 on both (Ubuntu 24.04's python3)
    assert froms["Dockerfile.cpu"].startswith("python:3.12.") and "ubuntu24.04" in froms["Dockerfile.cuda"]


def test_dockerignore_lets_through_what_the_images_copy():
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    for name in ("Dockerfile.cpu", "Dockerfile.cuda"):
        for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", (DEPLOY / "docker" / name).read_text(), flags=re.M):
            for source in sources.split():
                assert source in allowed and (ROOT / source).exists(), source


def test_image_pins_are_within_pyproject_and_agree():
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    pins = {}
    for line in (DEPLOY / "docker" / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for text in project["dependencies"] + project["optional-dependencies"]["gpu"]:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pins and requirement.specifier.contains(pins[name]), (text, pins.get(name))
    assert pins["dask"] == pins["distributed"]  # scheduler, workers and client on one Dask


# ---- kubernetes ----

MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
CRD_FILES = {"DaskCluster": "daskcluster.yaml", "DaskWorkerGroup": "daskworkergroup.yaml", "DaskJob": "daskjob.yaml"}


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
    schema["properties"] |= {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                             "metadata": {"type": "object"}}
    return schema


def _strict(schema):
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    strict = {k: (_strict(v) if k != "properties" else {name: _strict(s) for name, s in v.items()})
              for k, v in schema.items()}
    if "properties" in strict and "additionalProperties" not in strict \
            and not strict.get("x-kubernetes-preserve-unknown-fields"):
        strict["additionalProperties"] = False
    return strict


def schema_errors(document: dict) -> list[str]:
    schema = crd_schema(document["kind"])
    jsonschema = pytest.importorskip("jsonschema", reason="needs jsonschema (the test extra)")
    validator = jsonschema.Draft7Validator(schema)
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict]:
    found = {}
    for path in MANIFESTS:
        for document in documents(path):
            assert document["apiVersion"] == "kubernetes.dask.org/v1" and document["kind"] in CRD_FILES
            found[document["kind"]] = document
    assert set(found) == set(CRD_FILES)
    return found


def test_manifests_match_the_operators_crds(manifests):
    for kind, document in manifests.items():
        assert schema_errors(document) == [], kind


@pytest.mark.parametrize("mistake, error", [
    (lambda d: d["spec"]["worker"]["spec"]["containers"][0]["resources"]["limits"].update({"nvidia.com/gpu": 1}),
     "spec.worker.spec.containers.0.resources.limits.nvidia.com/gpu: 1 is not of type 'string'"),
    (lambda d: d["spec"]["worker"]["spec"]["containers"][0].update(comand=["dask"]),
     "Additional properties are not allowed ('comand' was unexpected)"),
    (lambda d: d["spec"].pop("scheduler"), "'scheduler' is a required property"),
])
def test_the_crd_check_catches_mistakes(manifests, mistake, error):
    broken = copy.deepcopy(manifests["DaskCluster"])
    mistake(broken)
    assert any(error in e for e in schema_errors(broken)), schema_errors(broken)


def kubernetes_expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of ``$(VAR)`` in a container's command and args: ``$$`` is a ``$``, and a
    reference to no variable of the container stays as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


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
    worker_specs = [cluster["spec"]["worker"], group["spec"]["worker"],
                    manifests["DaskJob"]["spec"]["cluster"]["spec"]["worker"]]
    for worker in worker_specs:
        deployment = build_worker_deployment_spec(f"{name}-default", "risk", name, "abc12", worker["spec"], {}, {})
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container_command(container)[:7] == [
            "dask", "cuda", "worker", f"tcp://{name}-scheduler.risk.svc.cluster.local:8786",
            "--name", f"{name}-default-worker-abc12", "--nthreads"]
        resources = container["resources"]
        for side in ("requests", "limits"):
            assert resources[side]["nvidia.com/gpu"] == "1" and {"cpu", "memory"} <= set(resources[side])
        assert container["image"].endswith("-cuda")


# ---- plain hosts, and every Dask command of deploy/ ----

def unit_command(name: str) -> list[str]:
    """The ExecStart of a systemd unit in deploy/hosts, split into words, its ${VARIABLES} filled in."""
    text = (DEPLOY / "hosts" / name).read_text().replace("\\\n", " ")
    env = dict(line.removeprefix("Environment=").split("=", 1) for line in text.splitlines()
               if line.startswith("Environment=") and " " not in line)
    (command,) = [line.removeprefix("ExecStart=") for line in text.splitlines() if line.startswith("ExecStart=")]
    return shlex.split(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], command))


def test_host_units_run_tls_only_with_the_dashboard_on_loopback():
    scheduler, worker = unit_command("dask-scheduler.service"), unit_command("dask-cuda-worker.service")
    assert scheduler[:2] == ["/opt/distprice/venv/bin/dask", "scheduler"]
    assert worker[:4] == ["/opt/distprice/venv/bin/dask", "cuda", "worker", "tls://scheduler.example.org:8786"]
    for words, role in ((scheduler, "scheduler"), (worker, "worker")):
        options = dict(zip(words, words[1:]))
        assert options["--tls-ca-file"] == "/etc/distprice/tls/ca.pem"
        assert options["--tls-cert"] == f"/etc/distprice/tls/{role}.pem"
        assert options["--tls-key"] == f"/etc/distprice/tls/{role}-key.pem"
    options = dict(zip(scheduler, scheduler[1:]))
    assert (options["--protocol"], options["--dashboard-address"]) == ("tls", "127.0.0.1:8787")
    for name in ("dask-scheduler.service", "dask-cuda-worker.service"):
        assert "Environment=DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True" in (DEPLOY / "hosts" / name).read_text()


def dask_commands(compose, manifests) -> list[list[str]]:
    """Every Dask command line that deploy/ starts: compose services, operator pods, systemd units."""
    commands = [s["command"] for s in compose["services"].values() if s.get("command", [])[:1] == ["dask"]]
    clusters = [manifests["DaskCluster"]["spec"], manifests["DaskJob"]["spec"]["cluster"]["spec"]]
    pods = [c[role]["spec"] for c in clusters for role in ("scheduler", "worker")]
    pods.append(manifests["DaskWorkerGroup"]["spec"]["worker"]["spec"])
    commands += [c["args"] for pod in pods for c in pod["containers"]]
    commands += [["dask", *unit_command(name)[1:]] for name in ("dask-scheduler.service", "dask-cuda-worker.service")]
    return commands


def test_every_dask_command_takes_the_options_it_is_given(compose, manifests):
    from distributed.cli.dask_scheduler import main as scheduler
    from distributed.cli.dask_worker import main as worker

    cuda = importlib.util.find_spec("dask_cuda") and importlib.import_module("dask_cuda.cli").worker
    known = {("dask", "scheduler"): scheduler, ("dask", "worker"): worker, ("dask", "cuda", "worker"): cuda}
    checked = 0
    for words in dask_commands(compose, manifests):
        head = tuple(words[:3]) if words[1] == "cuda" else tuple(words[:2])
        assert head in known, words
        if known[head]:  # dask cuda worker is checked where dask-cuda is installed
            options = {o for p in known[head].params for o in p.opts + p.secondary_opts}
            assert {w.split("=")[0] for w in words if w.startswith("--")} <= options, words
            checked += 1
    assert checked >= 4  # at least the schedulers and the CPU worker


# ---- slurm and pbs ----

def test_slurm_gpu_example_renders_its_job_script():
    script = job_script(load_config(CONFIGS / "slurm-gpu.yaml").cluster)
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    for directive in ("-J distprice", "-p gpu", "-A risk", "-t 02:00:00", "--gres=gpu:4", "--cpus-per-task=32",
                      "--mem=256G", "--constraint=h100", "-n 1"):
        assert f"#SBATCH {directive}" in lines
    prologue = lines.index("source /shared/venvs/distprice/bin/activate")
    (worker,) = [i for i, line in enumerate(lines) if " -m dask cuda worker " in line]
    assert prologue < worker
    assert lines[worker].startswith(f"{sys.executable} -m dask cuda worker tcp://")
    words = lines[worker].split()
    assert words[words.index("--nthreads") + 1] == "8" and words[words.index("--memory-limit") + 1] == "64.00GiB"
    assert words[words.index("--local-directory") + 1] == "$TMPDIR" and "--nworkers" not in words


def test_pbs_example_renders_its_job_script():
    lines = job_script(load_config(CONFIGS / "pbs.yaml").cluster).splitlines()
    for directive in ("-N distprice", "-q workq", "-A risk", "-l select=1:ncpus=32:mem=128GB", "-l walltime=01:00:00"):
        assert f"#PBS {directive}" in lines
    (worker,) = [line for line in lines if " -m distributed.cli.dask_worker " in line]
    words = worker.split()
    assert [words[words.index(flag) + 1] for flag in ("--nworkers", "--nthreads", "--memory-limit")] == \
        ["8", "4", "16.00GiB"]


def test_pbs_gpu_jobs_ask_for_ngpus_and_run_dask_cuda_worker():
    cluster = parse_config({"cluster": {"kind": "pbs", "jobqueue": {"cores": 8, "memory": "64GiB",
                                                                    "gpus_per_job": 2}}}).cluster
    lines = job_script(cluster).splitlines()
    assert "#PBS -l select=1:ncpus=8:ngpus=2:mem=64GB" in lines
    (worker,) = [line for line in lines if " -m dask cuda worker " in line]
    assert "--nthreads 4 --memory-limit 32.00GiB" in worker


def test_cluster_script_command():
    runner = CliRunner()
    result = runner.invoke(main, ["cluster-script", str(CONFIGS / "slurm-gpu.yaml")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("#!/usr/bin/env bash\n") and "#SBATCH --gres=gpu:4\n" in result.output
    result = runner.invoke(main, ["cluster-script", str(CONFIGS / "local-cpu.yaml")])
    assert result.exit_code == 1
    assert "cluster kind local runs no batch jobs; job scripts are for kinds slurm, pbs" in result.output


SLURM_CPU = {"kind": "slurm", "dashboard_address": None,
             "jobqueue": {"cores": 1, "memory": "2GiB", "interface": "lo", "start_timeout": 60}}


def test_without_dask_jobqueue_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    cluster = parse_config({"cluster": SLURM_CPU}).cluster
    for attempt in (start, job_script):
        with pytest.raises(RuntimeError, match=r"^cluster kind slurm needs dask-jobqueue: "
                                               r"pip install 'distprice\[jobqueue\]'$"):
            attempt(cluster)


@pytest.mark.parametrize("kind, command", [("slurm", "sbatch"), ("pbs", "qsub")])
def test_without_the_submit_command_nothing_starts(monkeypatch, tmp_path, kind, command):
    monkeypatch.setenv("PATH", str(tmp_path))
    cluster = parse_config({"cluster": SLURM_CPU | {"kind": kind}}).cluster
    with pytest.raises(RuntimeError, match=f"^cluster kind {kind} submits its jobs with {command}, which is not on "
                                           f"PATH: run this on a login node of the {kind} cluster"):
        start(cluster)
    assert "#!/usr/bin/env bash" in job_script(cluster)  # rendering needs no batch system


# A stand-in for sbatch and scancel: each job script runs here, in a session of its own whose id is the job id,
# seeing as many GPUs as its --gres asks for, as under SLURM.
FAKE_SBATCH = """#!/bin/sh
cp "$1" "$FAKE_SLURM/job-$$.sh"
gpus=$(sed -n 's/^#SBATCH --gres=gpu:\\([0-9]*\\)$/\\1/p' "$1")
if [ -n "$gpus" ]; then export CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((gpus - 1))); fi
{run}
"""
RUN_JOB = ('setsid bash "$FAKE_SLURM/job-$$.sh" > "$FAKE_SLURM/job-$$.out" 2>&1 < /dev/null &\n'
           'echo "Submitted batch job $!"\n'
           'echo "$!" >> "$FAKE_SLURM/started"')
QUEUE_JOB = 'echo "Submitted batch job $$"'
FAKE_SCANCEL = """#!/bin/sh
echo "$1" >> "$FAKE_SLURM/cancelled"
kill -TERM -- "-$1" 2>/dev/null
exit 0
"""


@pytest.fixture
def fake_slurm(tmp_path, monkeypatch):
    """Puts a stand-in sbatch (running each job here, or ``queued``: never) and scancel first on PATH; yields
    the folder where they log; kills whatever job is left at the end."""
    folder = tmp_path / "slurm"
    folder.mkdir()

    def install(queued: bool = False) -> Path:
        for name, text in (("sbatch", FAKE_SBATCH.format(run=QUEUE_JOB if queued else RUN_JOB)),
                           ("scancel", FAKE_SCANCEL)):
            (folder / name).write_text(text)
            (folder / name).chmod(0o755)
        monkeypatch.setenv("FAKE_SLURM", str(folder))
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return folder

    yield install
    started = folder / "started"
    for job in started.read_text().split() if started.exists() else []:
        try:
            os.killpg(int(job), signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_slurm_cluster_prices_on_the_workers_its_jobs_start(fake_slurm, book, expected):
    folder = fake_slurm()
    config = parse_config({"cluster": SLURM_CPU}).cluster
    with Pricer(config) as pricer:
        priced = pricer.price(book, engine="cpu")
        assert pricer.workers == 1
        assert pricer.client.scheduler.address.startswith("tcp://127.0.0.1:")
    assert_same_prices(priced, expected)
    (job,) = (folder / "started").read_text().split()
    assert (folder / "cancelled").read_text().split() == [job]  # closing the pricer cancelled the job
    (script,) = folder.glob("job-*.sh")
    assert "#SBATCH -J distprice" in script.read_text()


def listening_addresses(port: int) -> set[str]:
    return {c.laddr.ip for c in psutil.Process().net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port}


def test_without_a_dashboard_the_schedulers_http_server_stays_on_loopback(fake_slurm):
    fake_slurm()
    config = parse_config({"cluster": {"kind": "slurm", "dashboard_address": None,
                                       "jobqueue": {"cores": 1, "memory": "1GiB"}}}).cluster
    with build_cluster(config) as cluster:  # no job submitted; its scheduler listens on every interface
        assert listening_addresses(cluster.scheduler_info["services"]["dashboard"]) == {"127.0.0.1"}


def test_jobs_that_never_start_time_out_and_are_cancelled(fake_slurm):
    folder = fake_slurm(queued=True)
    config = parse_config({"cluster": SLURM_CPU | {"jobqueue": SLURM_CPU["jobqueue"] | {"start_timeout": 1,
                                                                                         "jobs": 2}}}).cluster
    with pytest.raises(RuntimeError, match=r"^no slurm job started its workers within 1 s; the jobs were "
                                           r"cancelled\. They may have waited in the queue"):
        start(config)
    assert len(set((folder / "cancelled").read_text().split())) == 2


@pytest.mark.gpu
def test_a_slurm_gpu_job_runs_dask_cuda_worker(fake_slurm, book, expected):
    from distprice.engines import gpu_available

    if not gpu_available() or importlib.util.find_spec("dask_cuda") is None:
        pytest.skip("needs a CUDA GPU and dask-cuda")
    folder = fake_slurm()
    config = parse_config({"cluster": SLURM_CPU | {"jobqueue": SLURM_CPU["jobqueue"] | {"gpus_per_job": 1}}}).cluster
    with Pricer(config) as pricer:
        priced = pricer.price(book, engine="gpu-flat")
        assert pricer.workers == 1  # dask cuda worker: one worker for the job's one GPU
    np.testing.assert_allclose(priced["price"], expected["price"], rtol=1e-12, atol=0)
    assert (priced["engine"] == "gpu-flat").all()
    (script,) = folder.glob("job-*.sh")
    assert "#SBATCH --gres=gpu:1" in script.read_text() and " -m dask cuda worker " in script.read_text()


@pytest.mark.parametrize("jobqueue, line", [
    (None, "x.yaml: cluster.jobqueue: is required for kind slurm"),
    ({"memory": "8GiB"}, "x.yaml: cluster.jobqueue.cores: is required"),
    ({"cores": 4, "memory": "lots"},
     "x.yaml: cluster.jobqueue.memory: must be a number of bytes >= 1 or a size such as '64GiB', not 'lots'"),
    ({"cores": 4, "memory": "8GiB", "walltime": 7200},
     "x.yaml: cluster.jobqueue.walltime: must be hours:minutes:seconds such as '02:00:00' (quoted in YAML), not 7200"),
    ({"cores": 4, "memory": "8GiB", "walltime": "2h"}, "x.yaml: cluster.jobqueue.walltime: must be hours:minutes"),
    ({"cores": 4, "memory": "8GiB", "queue": "gpu long"},
     "x.yaml: cluster.jobqueue.queue: must be a name without spaces, not 'gpu long'"),
    ({"cores": 4, "memory": "8GiB", "gpus_per_job": 0},
     "x.yaml: cluster.jobqueue.gpus_per_job: must be an integer >= 1, not 0"),
    ({"cores": 4, "memory": "8GiB", "jobs": 1.5}, "x.yaml: cluster.jobqueue.jobs: must be an integer >= 1, not 1.5"),
    ({"cores": 4, "memory": "8GiB", "gpus_per_job": 4, "processes": 2},
     "x.yaml: cluster.jobqueue.processes: must equal gpus_per_job (4) or be left out: dask cuda worker runs one "
     "worker per GPU, not 2"),
    ({"cores": 2, "memory": "8GiB", "processes": 4},
     "x.yaml: cluster.jobqueue.cores: must be at least the worker processes of a job (4), not 2"),
    ({"cores": 4, "memory": "8GiB", "start_timeout": 0},
     "x.yaml: cluster.jobqueue.start_timeout: must be a number of seconds > 0, not 0"),
    ({"cores": 4, "memory": "8GiB", "job_script_prologue": "module load cuda"},
     "x.yaml: cluster.jobqueue.job_script_prologue: must be a list of one-line strings, not 'module load cuda'"),
    ({"cores": 4, "memory": "8GiB", "job_script_prologue": ["module load cuda\nsource env"]},
     "x.yaml: cluster.jobqueue.job_script_prologue: must be a list of one-line strings, not a list"),
    ({"cores": 4, "memory": "8GiB", "job_extra_directives": ["#SBATCH --exclusive"]},
     "x.yaml: cluster.jobqueue.job_extra_directives: must be given without their #SBATCH / #PBS prefix, not "
     "'#SBATCH --exclusive'"),
    ({"cores": 4, "memory": "8GiB", "gpu_per_job": 4}, "x.yaml: cluster.jobqueue.gpu_per_job: unknown key (did you "
                                                       "mean gpus_per_job?); allowed keys: queue, account, walltime"),
    ("gpu", "x.yaml: cluster.jobqueue: must be a mapping of settings, not 'gpu'"),
])
def test_a_bad_jobqueue_section_names_its_key_and_rule(jobqueue, line):
    cluster = {"kind": "slurm"} | ({} if jobqueue is None else {"jobqueue": jobqueue})
    with pytest.raises(ConfigError) as caught:
        parse_config({"cluster": cluster}, "x.yaml")
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_jobqueue_defaults_and_its_place():
    queue = parse_config({"cluster": {"kind": "pbs", "jobqueue": {"cores": 8, "memory": 2**34}}}).cluster.jobqueue
    assert queue == JobQueue(cores=8, memory=2**34, queue=None, account=None, walltime="01:00:00", processes=None,
                             gpus_per_job=None, jobs=1, start_timeout=600.0, job_script_prologue=(),
                             job_extra_directives=(), interface=None, local_directory=None)
    with pytest.raises(ConfigError, match=r"^x.yaml: cluster.jobqueue: is for kinds slurm and pbs only, not kind "
                                          r"address$"):
        parse_config({"cluster": {"kind": "address", "address": "tcp://h:8786",
                                  "jobqueue": {"cores": 8, "memory": "8GiB"}}}, "x.yaml")


# ---- tls ----

MAKE_CERTS = DEPLOY / "tls" / "make-certs.sh"


def make_certs(folder: Path, host: str = "127.0.0.1") -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("needs openssl")
    subprocess.run(["bash", str(MAKE_CERTS), str(folder), host], check=True, capture_output=True)
    return folder


def openssl(*args: str) -> str:
    return subprocess.run(["openssl", *args], check=True, capture_output=True, text=True).stdout


def test_make_certs_makes_a_ca_and_certificates_it_signed(tmp_path):
    certs = make_certs(tmp_path / "certs", "scheduler.example.org")
    names = ["scheduler", "worker", "client"]
    for name in ["ca", *names]:
        assert stat.S_IMODE((certs / f"{name}-key.pem").stat().st_mode) == 0o600
    assert openssl("verify", "-CAfile", str(certs / "ca.pem"), *(str(certs / f"{n}.pem") for n in names)).count(
        ": OK") == 3
    scheduler = openssl("x509", "-in", str(certs / "scheduler.pem"), "-noout", "-subject", "-ext",
                        "subjectAltName,extendedKeyUsage")
    assert "CN = scheduler.example.org" in scheduler
    assert "DNS:scheduler.example.org, DNS:localhost, IP Address:127.0.0.1" in scheduler
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in scheduler
    ca = (certs / "ca.pem").read_bytes()
    make_certs(certs, "10.0.0.5")  # again, for another scheduler host: the CA stays, so do the old certificates
    assert (certs / "ca.pem").read_bytes() == ca
    assert "IP Address:10.0.0.5, DNS:localhost, IP Address:127.0.0.1" in openssl(
        "x509", "-in", str(certs / "scheduler.pem"), "-noout", "-ext", "subjectAltName")
    usage = subprocess.run(["bash", str(MAKE_CERTS), str(certs)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_a_tls_cluster_prices_and_refuses_clients_without_a_certificate_of_its_ca(tmp_path, book, expected,
                                                                                   caplog):
    from distributed import Client
    from distributed.security import Security

    make_certs(tmp_path / "certs")
    shutil.copy(CONFIGS / "tls-local.yaml", tmp_path)
    cluster = load_config(tmp_path / "tls-local.yaml").cluster
    cluster = dataclasses.replace(cluster, n_workers=1, processes=False, dashboard_address=None)
    caplog.set_level(logging.WARNING, logger="distributed.comm.tcp")  # the scheduler runs in this process
    with Pricer(cluster) as pricer:
        address = pricer.client.scheduler.address
        assert address.startswith("tls://127.0.0.1:")
        assert all(w.startswith("tls://") for w in pricer.client.scheduler_info()["workers"])
        assert_same_prices(pricer.price(book, engine="cpu"), expected)
        host, port = address.removeprefix("tls://").rsplit(":", 1)
        # no certificate: the scheduler ends the TLS handshake (the client sees its alert, or the socket close)
        context = ssl.create_default_context(cafile=str(tmp_path / "certs/ca.pem"))
        context.check_hostname = False
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            with socket.create_connection((host, int(port)), timeout=10) as raw, context.wrap_socket(raw) as tls:
                tls.sendall(b"\0" * 8)
                tls.recv(1)
        # a certificate from another CA: refused too, though the client trusts the cluster's CA; and plain TCP
        other = make_certs(tmp_path / "other")
        stranger = Security(tls_ca_file=str(tmp_path / "certs/ca.pem"), tls_client_cert=str(other / "client.pem"),
                            tls_client_key=str(other / "client-key.pem"), require_encryption=True)
        with pytest.raises(OSError):
            Client(address, security=stranger, timeout=5)
        with pytest.raises(OSError):
            Client(address.replace("tls://", "tcp://"), timeout=5)
    # the scheduler's own account of the three refusals
    refusals = [r.getMessage() for r in caplog.records if f"Listener on '{address}'" in r.getMessage()]
    assert [re.search(r"\[SSL: (\w+)\]", m).group(1) for m in refusals] == [
        "PEER_DID_NOT_RETURN_A_CERTIFICATE", "CERTIFICATE_VERIFY_FAILED", "WRONG_VERSION_NUMBER"]


def test_a_slurm_cluster_with_security_runs_tls_workers(tmp_path):
    certs = make_certs(tmp_path / "certs")
    security = {"ca_file": str(certs / "ca.pem"), "cert_file": str(certs / "client.pem"),
                "key_file": str(certs / "client-key.pem")}
    cluster = parse_config({"cluster": SLURM_CPU | {"security": security}}).cluster
    words = job_script(cluster).splitlines()[-1].split()
    assert words[3].startswith("tls://127.0.0.1:")  # the scheduler this process started listens on TLS only
    assert [words[words.index(f"--tls-{name}") + 1] for name in ("ca-file", "cert", "key")] == \
        [security["ca_file"], security["cert_file"], security["key_file"]]

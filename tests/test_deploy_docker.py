"""The Docker files of deploy/: the compose file (what compose needs of each service, GPU workers, the job),
the images' pins, their user and what .dockerignore lets through."""

from __future__ import annotations

import re

import pytest

from distprice.cluster.config import load_config

from utils import CONFIGS, DEPLOY, ROOT


def test_compose_services_and_what_compose_needs_of_them(compose):
    assert set(compose) - {"name"} == {"services"} | {k for k in compose if k.startswith("x-")}
    services = compose["services"]
    assert set(services) == {"scheduler", "worker-0", "worker-1", "cpu-worker", "job"}
    used = {
        "image",
        "build",
        "command",
        "entrypoint",
        "ports",
        "healthcheck",
        "restart",
        "profiles",
        "depends_on",
        "volumes",
        "deploy",
    }
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
    from distprice.cluster.config import WORKERS_PER_GPU

    services = compose["services"]
    gpu = {name: s for name, s in services.items() if name.startswith("worker-")}
    devices = []
    for service in gpu.values():
        assert service["command"][:3] == ["dask", "worker", "tcp://scheduler:8786"]
        options = dict(zip(service["command"], service["command"][1:]))
        assert (int(options["--nworkers"]), options["--nthreads"]) == (WORKERS_PER_GPU, "2")
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
    assert lines[-1] == "configs/certs*"  # TLS keys made beside the configs stay out of the images
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


def test_images_carry_a_warm_numba_cache():
    """Each image compiles the engines when it is built (``distprice warm``) into the cache folder its containers
    use, left writable for a CPU model that must compile its own."""
    for name in ("Dockerfile.cpu", "Dockerfile.cuda"):
        final = (DEPLOY / "docker" / name).read_text().rsplit("\nFROM ", 1)[1]
        (cache,) = re.findall(r"NUMBA_CACHE_DIR=(\S+)", final)
        warm = final.index("RUN distprice warm")
        assert final.index("COPY --from=build /opt/venv") < warm < final.index("\nUSER 10001\n")
        assert f"chmod -R a+rwX {cache}" in final[warm:]

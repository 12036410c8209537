"""The systemd units of deploy/hosts, every Dask command line deploy/ starts (compose services, operator
pods, units) against the options the Dask commands take, and the dashboard's reverse proxy."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from utils import DEPLOY


def unit_command(name: str) -> list[str]:
    """The ExecStart of a systemd unit in deploy/hosts, split into words, its ${VARIABLES} filled in."""
    text = (DEPLOY / "hosts" / name).read_text().replace("\\\n", " ")
    env = dict(
        line.removeprefix("Environment=").split("=", 1)
        for line in text.splitlines()
        if line.startswith("Environment=") and " " not in line
    )
    (command,) = [line.removeprefix("ExecStart=") for line in text.splitlines() if line.startswith("ExecStart=")]
    return shlex.split(re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], command))


def test_host_units_run_tls_only_with_the_dashboard_on_loopback():
    scheduler, worker = unit_command("dask-scheduler.service"), unit_command("distprice-gpu-worker@.service")
    assert scheduler[:2] == ["/opt/distprice/venv/bin/dask", "scheduler"]
    assert worker[:3] == ["/opt/distprice/venv/bin/dask", "worker", "tls://scheduler.example.org:8786"]
    for words, role in ((scheduler, "scheduler"), (worker, "worker")):
        options = dict(zip(words, words[1:]))
        assert options["--tls-ca-file"] == "/etc/distprice/tls/ca.pem"
        assert options["--tls-cert"] == f"/etc/distprice/tls/{role}.pem"
        assert options["--tls-key"] == f"/etc/distprice/tls/{role}-key.pem"
    options = dict(zip(scheduler, scheduler[1:]))
    assert (options["--protocol"], options["--dashboard-address"]) == ("tls", "127.0.0.1:8787")


def test_the_gpu_worker_unit_runs_a_local_cuda_clusters_processes_on_its_own_gpu():
    """An instance per GPU (``distprice-gpu-worker@0``): that GPU alone, as many worker processes of 2 threads as
    a ``local-cuda`` cluster gives a GPU of 16 cores, so that their host work keeps the GPU busy."""
    from distprice.cluster.config import WORKERS_PER_GPU

    words = unit_command("distprice-gpu-worker@.service")
    options = dict(zip(words, words[1:]))
    assert (int(options["--nworkers"]), options["--nthreads"]) == (WORKERS_PER_GPU, "2")
    assert "Environment=CUDA_VISIBLE_DEVICES=%i" in (DEPLOY / "hosts" / "distprice-gpu-worker@.service").read_text()
    for name in ("dask-scheduler.service", "distprice-gpu-worker@.service"):
        assert "Environment=DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True" in (DEPLOY / "hosts" / name).read_text()


def dask_commands(compose, manifests) -> list[list[str]]:
    """Every Dask command line that deploy/ starts: compose services, operator pods, systemd units."""
    commands = [s["command"] for s in compose["services"].values() if s.get("command", [])[:1] == ["dask"]]
    clusters = [manifests["DaskCluster"]["spec"], manifests["DaskJob"]["spec"]["cluster"]["spec"]]
    pods = [c[role]["spec"] for c in clusters for role in ("scheduler", "worker")]
    pods.append(manifests["DaskWorkerGroup"]["spec"]["worker"]["spec"])
    commands += [c["args"] for pod in pods for c in pod["containers"]]
    commands += [
        ["dask", *unit_command(name)[1:]] for name in ("dask-scheduler.service", "distprice-gpu-worker@.service")
    ]
    return commands


def test_every_dask_command_takes_the_options_it_is_given(compose, manifests):
    from distributed.cli.dask_scheduler import main as scheduler
    from distributed.cli.dask_worker import main as worker

    known = {("dask", "scheduler"): scheduler, ("dask", "worker"): worker}
    commands = dask_commands(compose, manifests)
    for words in commands:
        head = tuple(words[:2])
        assert head in known, words
        options = {o for p in known[head].params for o in p.opts + p.secondary_opts}
        assert {w.split("=")[0] for w in words if w.startswith("--")} <= options, words
    assert len(commands) >= 10  # compose: scheduler, three workers; the operator: two schedulers, three pods; units


def test_every_deployed_worker_starts_with_the_worker_preload(compose, manifests):
    from distprice.cluster.worker import PRELOAD

    workers = [words for words in dask_commands(compose, manifests) if "worker" in words[1:3]]
    assert len(workers) == 7  # compose: two GPU services and the CPU one; the operator's three pods; the unit
    for words in workers:
        assert words[words.index("--preload") + 1] == PRELOAD == "distprice.cluster.worker", words


NGINX_SITE = DEPLOY / "hosts" / "dashboard-nginx.conf"


def test_the_dashboard_proxy_asks_a_password_and_passes_websockets_to_loopback():
    text = NGINX_SITE.read_text()
    lines = {line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    assert "listen 443 ssl;" in lines and "auth_basic_user_file /etc/nginx/distprice.htpasswd;" in lines
    assert "proxy_pass http://127.0.0.1:8787;" in lines  # the dashboard stays on loopback, as configs keep it
    assert {"proxy_http_version 1.1;", "proxy_set_header Upgrade $http_upgrade;"} <= lines
    assert (
        "proxy_set_header Connection $distprice_connection;" in lines
        and "map $http_upgrade $distprice_connection {" in lines
    )


def test_nginx_takes_the_dashboard_proxy(tmp_path):
    if shutil.which("nginx") is None or shutil.which("openssl") is None:
        pytest.skip("needs nginx and openssl")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1"]
        + ["-subj", "/CN=localhost", "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True,
        capture_output=True,
    )
    (tmp_path / "htpasswd").write_text("alice:$apr1$x$y\n")
    site = (
        NGINX_SITE.read_text()
        .replace("/etc/nginx/tls/risk-host.pem", str(tmp_path / "cert.pem"))
        .replace("/etc/nginx/tls/risk-host-key.pem", str(tmp_path / "key.pem"))
        .replace("/etc/nginx/distprice.htpasswd", str(tmp_path / "htpasswd"))
    )
    (tmp_path / "site.conf").write_text(site)
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/error.log;\nevents {{}}\n"
        f"http {{\n  access_log off;\n  include {tmp_path}/site.conf;\n}}\n"
    )
    done = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True
    )
    assert done.returncode == 0 and "test is successful" in done.stderr, done.stderr

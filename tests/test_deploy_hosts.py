"""The systemd units of deploy/hosts, and every Dask command line deploy/ starts (compose services, operator
pods, units) against the options the Dask commands take."""

from __future__ import annotations

import importlib.util
import re
import shlex

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


def test_every_deployed_worker_starts_with_the_worker_preload(compose, manifests):
    from distprice.cluster.worker import PRELOAD

    workers = [words for words in dask_commands(compose, manifests) if "worker" in words[1:3]]
    assert len(workers) == 7  # compose: two GPU services and the CPU one; the operator's three pods; the unit
    for words in workers:
        assert words[words.index("--preload") + 1] == PRELOAD == "distprice.cluster.worker", words

"""SLURM and PBS clusters through dask-jobqueue: rendered job scripts, the cluster-script command, missing
tools, and a SLURM cluster whose jobs a stand-in sbatch runs on this machine."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
from click.testing import CliRunner
from distributed import Client

from distprice.cli import main
from distprice.cluster.config import JobQueue, load_config, parse_config
from distprice.cluster.jobqueue import build_cluster, job_script
from distprice.cluster.pricer import Pricer
from distprice.cluster.start import start
from distprice.errors import ConfigError

from utils import CONFIGS, SLURM_CPU, assert_same_prices

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_slurm_gpu_example_renders_its_job_script():
    script = job_script(load_config(CONFIGS / "slurm-gpu.yaml").cluster)
    lines = script.splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    for directive in (
        "-J distprice",
        "-p gpu",
        "-A risk",
        "-t 02:00:00",
        "--gres=gpu:4",
        "--cpus-per-task=48",
        "--mem=256G",
        "--constraint=h100",
        "-n 1",
    ):
        assert f"#SBATCH {directive}" in lines
    prologue = lines.index("source /shared/venvs/distprice/bin/activate")
    (worker,) = [i for i, line in enumerate(lines) if " -m distributed.cli.dask_worker " in line]
    assert prologue < worker
    assert lines[worker].startswith(f"{sys.executable} -m distributed.cli.dask_worker tcp://")
    words = lines[worker].split()
    # 48 cores for 4 GPUs: 6 processes of 2 threads on each GPU, as on a local-cuda cluster
    assert [words[words.index(flag) + 1] for flag in ("--nworkers", "--nthreads", "--memory-limit")] == [
        "24",
        "2",
        "10.67GiB",
    ]
    assert words[words.index("--local-directory") + 1] == "$TMPDIR"
    assert words[words.index("--preload") + 1] == "distprice.cluster.worker"
    assert words[words.index("--preload-nanny") + 1] == "distprice.cluster.nanny"


def test_pbs_example_renders_its_job_script():
    lines = job_script(load_config(CONFIGS / "pbs.yaml").cluster).splitlines()
    for directive in ("-N distprice", "-q workq", "-A risk", "-l select=1:ncpus=32:mem=128GB", "-l walltime=01:00:00"):
        assert f"#PBS {directive}" in lines
    (worker,) = [line for line in lines if " -m distributed.cli.dask_worker " in line]
    words = worker.split()
    assert [words[words.index(flag) + 1] for flag in ("--nworkers", "--nthreads", "--memory-limit", "--preload")] == [
        "8",
        "4",
        "16.00GiB",
        "distprice.cluster.worker",
    ]


def test_pbs_gpu_jobs_ask_for_ngpus_and_share_them():
    cluster = parse_config(
        {"cluster": {"kind": "pbs", "jobqueue": {"cores": 8, "memory": "64GiB", "gpus_per_job": 2}}}
    ).cluster
    lines = job_script(cluster).splitlines()
    assert "#PBS -l select=1:ncpus=8:ngpus=2:mem=64GB" in lines
    (worker,) = [line for line in lines if " -m distributed.cli.dask_worker " in line]
    assert "--nthreads 2 --memory-limit 16.00GiB --nworkers 4" in worker  # 2 processes of 2 threads a GPU
    assert "--preload-nanny distprice.cluster.nanny" in worker


def test_cluster_script_command():
    runner = CliRunner()
    result = runner.invoke(main, ["cluster-script", str(CONFIGS / "slurm-gpu.yaml")])
    assert result.exit_code == 0, result.output
    # the script on stdout alone (a busy dashboard port is logged on stderr)
    assert result.stdout.startswith("#!/usr/bin/env bash\n") and "#SBATCH --gres=gpu:4\n" in result.stdout
    result = runner.invoke(main, ["cluster-script", str(CONFIGS / "local-cpu.yaml")])
    assert result.exit_code == 2
    assert "cluster kind local runs no batch jobs; job scripts are for kinds slurm, pbs" in result.output


def test_without_dask_jobqueue_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    cluster = parse_config({"cluster": SLURM_CPU}).cluster
    for attempt in (start, job_script):
        with pytest.raises(
            RuntimeError,
            match=r"^cluster kind slurm needs dask-jobqueue: "
            r"pip install 'distprice\[jobqueue\]'$",
        ):
            attempt(cluster)


@pytest.mark.parametrize("kind, command", [("slurm", "sbatch"), ("pbs", "qsub")])
def test_without_the_submit_command_nothing_starts(monkeypatch, tmp_path, kind, command):
    monkeypatch.setenv("PATH", str(tmp_path))
    cluster = parse_config({"cluster": SLURM_CPU | {"kind": kind}}).cluster
    with pytest.raises(
        RuntimeError,
        match=f"^cluster kind {kind} submits its jobs with {command}, which is not on "
        f"PATH: run this on a login node of the {kind} cluster",
    ):
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
RUN_JOB = (
    'setsid bash "$FAKE_SLURM/job-$$.sh" > "$FAKE_SLURM/job-$$.out" 2>&1 < /dev/null &\n'
    'echo "Submitted batch job $!"\n'
    'echo "$!" >> "$FAKE_SLURM/started"'
)
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
        for name, text in (
            ("sbatch", FAKE_SBATCH.format(run=QUEUE_JOB if queued else RUN_JOB)),
            ("scancel", FAKE_SCANCEL),
        ):
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


def test_a_slurm_cluster_prices_on_the_workers_its_jobs_start(fake_slurm, small_book, small_priced):
    folder = fake_slurm()
    config = parse_config({"cluster": SLURM_CPU}).cluster
    with Pricer(config) as pricer:
        priced = pricer.price(small_book, engine="cpu")
        assert pricer.workers == 1
        assert pricer.client.scheduler.address.startswith("tcp://127.0.0.1:")
    assert_same_prices(priced, small_priced)
    (job,) = (folder / "started").read_text().split()
    assert (folder / "cancelled").read_text().split() == [job]  # closing the pricer cancelled the job
    (script,) = folder.glob("job-*.sh")
    assert "#SBATCH -J distprice" in script.read_text()


def listening_addresses(port: int) -> set[str]:
    return {
        c.laddr.ip
        for c in psutil.Process().net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }


def test_without_a_dashboard_the_schedulers_http_server_stays_on_loopback(fake_slurm):
    fake_slurm()
    config = parse_config(
        {"cluster": {"kind": "slurm", "dashboard_address": None, "jobqueue": {"cores": 1, "memory": "1GiB"}}}
    ).cluster
    with build_cluster(config) as cluster:  # no job submitted; its scheduler listens on every interface
        assert listening_addresses(cluster.scheduler_info["services"]["dashboard"]) == {"127.0.0.1"}


def test_jobs_that_never_start_time_out_and_are_cancelled(fake_slurm):
    folder = fake_slurm(queued=True)
    config = parse_config(
        {"cluster": SLURM_CPU | {"jobqueue": SLURM_CPU["jobqueue"] | {"start_timeout": 1, "jobs": 2}}}
    ).cluster
    with pytest.raises(
        RuntimeError,
        match=r"^no slurm job started its workers within 1 s; the jobs were "
        r"cancelled\. They may have waited in the queue",
    ):
        start(config)
    assert len(set((folder / "cancelled").read_text().split())) == 2


def test_a_gpu_jobs_worker_processes_share_its_gpus_alike(fake_slurm):
    fake_slurm()  # each job sees the GPUs its --gres asks for: CUDA_VISIBLE_DEVICES=0,1
    queue = SLURM_CPU["jobqueue"] | {"gpus_per_job": 2, "processes": 4, "cores": 4}
    config = parse_config({"cluster": SLURM_CPU | {"jobqueue": queue}}).cluster
    with build_cluster(config) as cluster, Client(cluster) as client:
        cluster.scale(jobs=1)
        client.wait_for_workers(4, timeout=60)
        seen = client.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"])
    assert sorted(seen.values()) == ["0", "0", "1", "1"]


@pytest.mark.gpu
def test_a_slurm_gpu_job_prices_on_its_gpu(fake_slurm, small_book, small_priced):
    from distprice.cuda import gpu_available

    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    folder = fake_slurm()
    queue = SLURM_CPU["jobqueue"] | {"gpus_per_job": 1, "cores": 2}
    config = parse_config({"cluster": SLURM_CPU | {"jobqueue": queue}}).cluster
    with Pricer(config) as pricer:
        priced = pricer.price(small_book, engine="gpu-flat")
        assert pricer.workers == 1  # 2 cores: one worker process of 2 threads on the job's GPU
    np.testing.assert_allclose(priced["price"], small_priced["price"], rtol=1e-12, atol=0)
    assert (priced["engine"] == "gpu-flat").all()
    (script,) = folder.glob("job-*.sh")
    assert "#SBATCH --gres=gpu:1" in script.read_text()
    assert "--preload-nanny distprice.cluster.nanny" in script.read_text()


@pytest.mark.parametrize(
    "jobqueue, line",
    [
        (None, "x.yaml: cluster.jobqueue: is required for kind slurm"),
        ({"memory": "8GiB"}, "x.yaml: cluster.jobqueue.cores: is required"),
        (
            {"cores": 4, "memory": "lots"},
            "x.yaml: cluster.jobqueue.memory: must be a number of bytes >= 1 or a size such as '64GiB', not 'lots'",
        ),
        (
            {"cores": 4, "memory": "8GiB", "walltime": 7200},
            "x.yaml: cluster.jobqueue.walltime: must be hours:minutes:seconds such as '02:00:00' (quoted in YAML), "
            "not 7200",
        ),
        ({"cores": 4, "memory": "8GiB", "walltime": "2h"}, "x.yaml: cluster.jobqueue.walltime: must be hours:minutes"),
        (
            {"cores": 4, "memory": "8GiB", "queue": "gpu long"},
            "x.yaml: cluster.jobqueue.queue: must be a name without spaces, not 'gpu long'",
        ),
        (
            {"cores": 4, "memory": "8GiB", "gpus_per_job": 0},
            "x.yaml: cluster.jobqueue.gpus_per_job: must be an integer >= 1, not 0",
        ),
        (
            {"cores": 4, "memory": "8GiB", "jobs": 1.5},
            "x.yaml: cluster.jobqueue.jobs: must be an integer >= 1, not 1.5",
        ),
        (
            {"cores": 4, "memory": "8GiB", "gpus_per_job": 4, "processes": 2},
            "x.yaml: cluster.jobqueue.processes: must be a multiple of gpus_per_job (4), the same number of worker "
            "processes on each GPU, not 2",
        ),
        (
            {"cores": 2, "memory": "8GiB", "processes": 4},
            "x.yaml: cluster.jobqueue.cores: must be at least the worker processes of a job (4), not 2",
        ),
        (
            {"cores": 4, "memory": "8GiB", "start_timeout": 0},
            "x.yaml: cluster.jobqueue.start_timeout: must be a number of seconds > 0, not 0",
        ),
        (
            {"cores": 4, "memory": "8GiB", "job_script_prologue": "module load cuda"},
            "x.yaml: cluster.jobqueue.job_script_prologue: must be a list of one-line strings, not 'module load cuda'",
        ),
        (
            {"cores": 4, "memory": "8GiB", "job_script_prologue": ["module load cuda\nsource env"]},
            "x.yaml: cluster.jobqueue.job_script_prologue: must be a list of one-line strings, not a list",
        ),
        (
            {"cores": 4, "memory": "8GiB", "job_extra_directives": ["#SBATCH --exclusive"]},
            "x.yaml: cluster.jobqueue.job_extra_directives: must be given without their #SBATCH / #PBS prefix, not "
            "'#SBATCH --exclusive'",
        ),
        (
            {"cores": 4, "memory": "8GiB", "gpu_per_job": 4},
            "x.yaml: cluster.jobqueue.gpu_per_job: unknown key (did you "
            "mean gpus_per_job?); allowed keys: queue, account, walltime",
        ),
        ("gpu", "x.yaml: cluster.jobqueue: must be a mapping of settings, not 'gpu'"),
    ],
)
def test_a_bad_jobqueue_section_names_its_key_and_rule(jobqueue, line):
    cluster = {"kind": "slurm"} | ({} if jobqueue is None else {"jobqueue": jobqueue})
    with pytest.raises(ConfigError) as caught:
        parse_config({"cluster": cluster}, "x.yaml")
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), lines


def test_jobqueue_defaults_and_its_place():
    queue = parse_config({"cluster": {"kind": "pbs", "jobqueue": {"cores": 8, "memory": 2**34}}}).cluster.jobqueue
    assert queue == JobQueue(
        cores=8,
        memory=2**34,
        queue=None,
        account=None,
        walltime="01:00:00",
        processes=None,
        gpus_per_job=None,
        jobs=1,
        start_timeout=600.0,
        job_script_prologue=(),
        job_extra_directives=(),
        interface=None,
        local_directory=None,
    )
    with pytest.raises(
        ConfigError,
        match=r"^x.yaml: cluster.jobqueue: is for kinds slurm and pbs only, not kind "
        r"address$",
    ):
        parse_config(
            {"cluster": {"kind": "address", "address": "tcp://h:8786", "jobqueue": {"cores": 8, "memory": "8GiB"}}},
            "x.yaml",
        )

"""Cluster and job configs: the ready files in configs/ (shipped with the package, found by name), defaults, and
the messages of bad configs."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from distprice.cluster.config import (
    CLUSTER_KINDS,
    ClusterConfig,
    Config,
    JobConfig,
    Security,
    load_config,
    parse_config,
    shipped_configs,
)
from distprice.errors import ConfigError
from distprice.scenarios import parse_shifts

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def problems(mapping) -> list[str]:
    """The lines of the ConfigError that ``mapping`` raises."""
    with pytest.raises(ConfigError) as caught:
        parse_config(mapping, "x.yaml")
    return str(caught.value).splitlines()


def test_every_ready_config_loads():
    expected = {
        "local-cpu.yaml": "local",
        "local-cuda.yaml": "local-cuda",
        "address.yaml": "address",
        "tls.yaml": "address",
        "tls-local.yaml": "local",
        "compose.yaml": "address",
        "slurm-gpu.yaml": "slurm",
        "pbs.yaml": "pbs",
    }
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(expected)
    for name, kind in expected.items():
        config = load_config(CONFIGS / name)
        assert config.cluster.kind == kind
        assert config.source == str(CONFIGS / name)


def test_local_cpu_config():
    config = load_config(CONFIGS / "local-cpu.yaml")
    assert config.cluster == ClusterConfig(
        kind="local",
        n_workers=None,
        threads_per_worker=1,
        processes=True,
        memory_limit="auto",
        dashboard_address="127.0.0.1:8787",
    )
    assert config.job.engine == "cpu"
    assert config.cluster.dask_security() is None


def test_local_cuda_config():
    config = load_config(CONFIGS / "local-cuda.yaml")
    assert (config.cluster.kind, config.cluster.n_workers, config.cluster.threads_per_worker) == (
        "local-cuda",
        None,
        None,
    )
    assert config.job.engine == "auto"


def test_local_cuda_workers_share_each_gpu_and_see_only_it(monkeypatch):
    from distributed import Nanny
    from distributed.security import Security as DaskSecurity

    from distprice.cluster.start import gpu_cluster_spec, gpu_worker_threads, workers_per_gpu
    from distprice.cluster.worker import PRELOAD

    security = DaskSecurity()
    config = ClusterConfig(
        kind="local-cuda", workers_per_gpu=2, threads_per_worker=3, memory_limit="8GiB", dashboard_address=None
    )
    scheduler, workers = gpu_cluster_spec(config, ["0", "GPU-5e1f"], security)
    assert sorted(workers) == ["gpu0-0", "gpu0-1", "gpuGPU-5e1f-0", "gpuGPU-5e1f-1"]
    for name, spec in workers.items():
        assert spec["cls"] is Nanny
        options = spec["options"]
        assert options["env"] == {"CUDA_VISIBLE_DEVICES": "0" if name.startswith("gpu0") else "GPU-5e1f"}
        assert (options["nthreads"], options["memory_limit"], options["protocol"]) == (3, 8 * 2**30, "tls://")
        assert options["host"] == "127.0.0.1" and options["security"] is security
        assert options["preload"] == [PRELOAD]  # as a local cluster's worker processes start
    assert scheduler["options"]["dashboard"] is False and scheduler["options"]["protocol"] == "tls://"
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    defaults = ClusterConfig(kind="local-cuda")
    assert [workers_per_gpu(defaults, gpus) for gpus in (1, 2, 4, 8, 16)] == [6, 4, 2, 1, 1]
    # the cores the workers leave become their threads, at most 4 each
    assert [gpu_worker_threads(defaults, gpus) for gpus in (1, 2, 4, 8, 16)] == [2, 2, 2, 2, 1]
    assert gpu_worker_threads(ClusterConfig(kind="local-cuda", workers_per_gpu=1), 1) == 4
    monkeypatch.setattr("os.cpu_count", lambda: 128)
    assert workers_per_gpu(defaults, 8) == 6 and workers_per_gpu(config, 8) == 2
    assert gpu_worker_threads(defaults, 8) == 2 and gpu_worker_threads(config, 8) == 3
    assert gpu_cluster_spec(defaults, ["0"], security)[1]["gpu0-0"]["options"]["nthreads"] == 4


def test_a_job_takes_fewer_chunks_per_worker_where_worker_processes_share_a_gpu():
    from distprice.cluster.start import default_chunks

    assert [default_chunks(processes) for processes in (1, 2, 6)] == [4, 2, 2]  # CPU workers: 1
    assert parse_config({"job": {"chunks_per_worker": 3}}).job.chunks_per_worker == 3


def test_address_config():
    cluster = load_config(CONFIGS / "address.yaml").cluster
    assert (cluster.address, cluster.timeout, cluster.security) == ("tcp://scheduler:8786", 10.0, None)


def test_tls_config_paths_are_from_the_files_folder():
    cluster = load_config(CONFIGS / "tls.yaml").cluster
    assert cluster.address == "tls://scheduler:8786"
    certs = CONFIGS / "certs"
    assert cluster.security == Security(
        ca_file=str(certs / "ca.pem"),
        cert_file=str(certs / "client.pem"),
        key_file=str(certs / "client-key.pem"),
        require_encryption=True,
    )


def test_job_paths_are_from_the_files_folder(tmp_path):
    (tmp_path / "run.yaml").write_text(
        "job:\n  portfolio: book.parquet\n  curves: /data/curves.csv\n  output: out/priced.csv\n"
    )
    job = load_config(tmp_path / "run.yaml").job
    assert job.portfolio == str(tmp_path / "book.parquet")
    assert job.curves == "/data/curves.csv"
    assert job.output == str(tmp_path / "out/priced.csv")
    assert job.scenarios is None


def test_a_mapping_keeps_relative_paths_without_base_dir():
    assert parse_config({"job": {"portfolio": "book.csv"}}).job.portfolio == "book.csv"
    assert parse_config({"job": {"portfolio": "book.csv"}}, base_dir="/runs").job.portfolio == "/runs/book.csv"


def test_defaults_when_sections_are_missing(tmp_path):
    assert parse_config({}) == Config(ClusterConfig(), JobConfig(), "<dict>")
    assert parse_config({"cluster": None, "job": None}) == Config()
    config = parse_config({"cluster": {"n_workers": 3}})
    assert config.cluster == ClusterConfig(n_workers=3)
    assert config.job == JobConfig()
    assert (config.cluster.kind, config.cluster.threads_per_worker, config.cluster.processes) == ("local", None, True)
    assert (config.cluster.memory_limit, config.cluster.dashboard_address) == ("auto", "127.0.0.1:8787")
    assert (config.job.engine, config.job.precision, config.job.on_invalid) == ("auto", "fp64", "strict")
    assert config.job.chunks_per_worker is None
    (tmp_path / "job-only.yaml").write_text("job:\n  precision: fp32\n")
    loaded = load_config(tmp_path / "job-only.yaml")
    assert loaded.cluster == ClusterConfig()
    assert loaded.job.precision == "fp32"


def test_accepted_values():
    cluster = parse_config(
        {
            "cluster": {
                "kind": "local",
                "n_workers": 2,
                "threads_per_worker": 4,
                "processes": False,
                "memory_limit": "4GiB",
                "dashboard_address": ":0",
            }
        }
    ).cluster
    assert (cluster.n_workers, cluster.threads_per_worker, cluster.processes) == (2, 4, False)
    assert (cluster.memory_limit, cluster.dashboard_address) == ("4GiB", ":0")
    assert parse_config({"cluster": {"memory_limit": 2**30, "dashboard_address": None}}).cluster.memory_limit == 2**30
    assert parse_config({"cluster": {"dashboard_address": None}}).cluster.dashboard_address is None
    timeout = parse_config({"cluster": {"kind": "address", "address": "tcp://10.0.0.5:8786", "timeout": 30}})
    assert timeout.cluster.timeout == 30.0 and isinstance(timeout.cluster.timeout, float)
    job = parse_config(
        {"job": {"engine": "gpu-flat", "precision": "fp32", "on_invalid": "report", "chunks_per_worker": 8}}
    ).job
    assert (job.engine, job.precision, job.on_invalid, job.chunks_per_worker) == ("gpu-flat", "fp32", "report", 8)
    assert CLUSTER_KINDS == ("local", "local-cuda", "address", "slurm", "pbs")


def test_shifts_from_a_list_and_a_string():
    assert parse_shifts("-100,-50,0,50,100") == (-100.0, -50.0, 0.0, 50.0, 100.0)
    assert parse_shifts(" -12.5 , 25 ") == (-12.5, 25.0)
    assert parse_shifts([-100, 0, 100.5]) == (-100.0, 0.0, 100.5)
    assert all(isinstance(s, float) for s in parse_shifts([1, 2]))
    assert parse_config({"job": {"shifts_bp": [-100, 0, 100]}}).job.shifts_bp == (-100.0, 0.0, 100.0)
    assert parse_config({"job": {"shifts_bp": "-25,25"}}).job.shifts_bp == (-25.0, 25.0)


@pytest.mark.parametrize(
    "shifts, rule",
    [
        ("", "at least one shift"),
        ([], "at least one shift"),
        ("-100,,100", "numbers of basis points, not ''"),
        ("-100,abc", "numbers of basis points, not 'abc'"),
        ([1, True], "numbers of basis points, not true"),
        ([1, "x"], "numbers of basis points, not 'x'"),
        ("1,inf", "finite, not 'inf'"),
        ([math.nan], "finite"),
        ("0,50,0", "0 bp is given twice"),
        ({"a": 1}, "a list of numbers or a string"),
        (5, "not 5"),
    ],
)
def test_bad_shifts(shifts, rule):
    with pytest.raises(ValueError, match="shifts must") as caught:
        parse_shifts(shifts)
    assert rule in str(caught.value)


@pytest.mark.parametrize(
    "mapping, line",
    [
        ({"cluster": {"n_workers": "two"}}, "x.yaml: cluster.n_workers: must be an integer >= 1, not 'two'"),
        ({"cluster": {"n_workers": 0}}, "x.yaml: cluster.n_workers: must be an integer >= 1, not 0"),
        ({"cluster": {"n_workers": 2.0}}, "x.yaml: cluster.n_workers: must be an integer >= 1, not 2.0"),
        (
            {"cluster": {"threads_per_worker": True}},
            "x.yaml: cluster.threads_per_worker: must be an integer >= 1, not true",
        ),
        ({"cluster": {"processes": "yes"}}, "x.yaml: cluster.processes: must be true or false, not 'yes'"),
        (
            {"cluster": {"kind": "kubernetes"}},
            "x.yaml: cluster.kind: must be one of local, local-cuda, address, slurm, pbs, not 'kubernetes'",
        ),
        (
            {"cluster": {"memory_limit": "lots"}},
            "x.yaml: cluster.memory_limit: must be auto, a number of bytes >= 1 or a size such as '4GiB', not 'lots'",
        ),
        ({"cluster": {"memory_limit": 0}}, "x.yaml: cluster.memory_limit: must be auto"),
        ({"cluster": {"dashboard_address": "8787"}}, "x.yaml: cluster.dashboard_address: must be 'host:port'"),
        (
            {"cluster": {"dashboard_address": "localhost:99999"}},
            "x.yaml: cluster.dashboard_address: must be 'host:port'",
        ),
        ({"cluster": {"timeout": 0}}, "x.yaml: cluster.timeout: must be a number of seconds > 0, not 0"),
        ({"cluster": {"kind": "address"}}, "x.yaml: cluster.address: is required for kind address"),
        (
            {"cluster": {"workers_per_gpu": 4}},
            "x.yaml: cluster.workers_per_gpu: is for kind local-cuda only, not kind local",
        ),
        (
            {"cluster": {"kind": "local-cuda", "workers_per_gpu": 0}},
            "x.yaml: cluster.workers_per_gpu: must be an integer >= 1, not 0",
        ),
        (
            {"cluster": {"kind": "address", "address": "scheduler:8786"}},
            "x.yaml: cluster.address: must be tcp://host:port or tls://host:port, not 'scheduler:8786'",
        ),
        (
            {"cluster": {"address": "tcp://scheduler:8786"}},
            "x.yaml: cluster.address: is for kind address only, not kind local",
        ),
        (
            {"cluster": {"kind": "address", "address": "tls://scheduler:8786"}},
            "x.yaml: cluster.security: is required for the tls:// address tls://scheduler:8786",
        ),
        (
            {
                "cluster": {
                    "kind": "address",
                    "address": "tcp://scheduler:8786",
                    "security": {"ca_file": "ca.pem", "cert_file": "c.pem", "key_file": "k.pem"},
                }
            },
            "x.yaml: cluster.security: needs a tls:// address, not tcp://scheduler:8786",
        ),
        (
            {"cluster": {"security": {"ca_file": "ca.pem", "cert_file": "c.pem"}}},
            "x.yaml: cluster.security.key_file: is required",
        ),
        (
            {
                "cluster": {
                    "security": {
                        "ca_file": "ca.pem",
                        "cert_file": "c.pem",
                        "key_file": "k.pem",
                        "require_encryption": "yes",
                    }
                }
            },
            "x.yaml: cluster.security.require_encryption: must be true or false, not 'yes'",
        ),
        ({"cluster": {"security": "certs/"}}, "x.yaml: cluster.security: must be a mapping of settings, not 'certs/'"),
        (
            {"cluster": {"nworkers": 4}},
            "x.yaml: cluster.nworkers: unknown key (did you mean n_workers?); allowed keys: "
            "kind, n_workers, workers_per_gpu, threads_per_worker, processes, memory_limit, "
            "dashboard_address, "
            "address, security, timeout, no_workers_timeout, jobqueue",
        ),
        ({"clusters": {}}, "x.yaml: clusters: unknown key (did you mean cluster?); allowed keys: cluster, job"),
        ({"cluster": ["local"]}, "x.yaml: cluster: must be a mapping of settings, not a list"),
        (
            {"job": {"engine": "gpu-fast"}},
            "x.yaml: job.engine: must be one of auto, reference, cpu, gpu-outer, gpu-flat, not 'gpu-fast'",
        ),
        ({"job": {"precision": "fp16"}}, "x.yaml: job.precision: must be one of fp64, fp32, not 'fp16'"),
        ({"job": {"on_invalid": "skip"}}, "x.yaml: job.on_invalid: must be one of strict, report, not 'skip'"),
        ({"job": {"chunks_per_worker": 0}}, "x.yaml: job.chunks_per_worker: must be an integer >= 1, not 0"),
        ({"job": {"portfolio": 7}}, "x.yaml: job.portfolio: must be a path, not 7"),
        ({"job": {"shifts_bp": "0,0"}}, "x.yaml: job.shifts_bp: shifts must differ, but 0 bp is given twice"),
        (
            {"job": {"shifts_bp": [0], "scenarios": "s.csv"}},
            "x.yaml: job.shifts_bp: give scenarios or shifts_bp, not both",
        ),
    ],
)
def test_a_bad_value_names_its_key_and_rule(mapping, line):
    lines = problems(mapping)
    assert len(lines) == 1
    assert lines[0].startswith(line)


def test_several_problems_are_reported_together():
    lines = problems(
        {
            "cluster": {
                "kind": "kubernetes",
                "n_workers": "two",
                "threads_per_worker": True,
                "address": "tls://scheduler:8786",
            },
            "job": {"engine": "gpu-fast", "precision": "fp16"},
            "jobs": {},
        }
    )
    assert [line.split(": ")[1] for line in lines] == [
        "jobs",
        "cluster.kind",
        "cluster.n_workers",
        "cluster.threads_per_worker",
        "job.engine",
        "job.precision",
    ]
    assert all(line.startswith("x.yaml: ") for line in lines)


def test_a_top_level_that_is_no_mapping():
    with pytest.raises(ConfigError, match=r"^<dict>: must be a mapping with the sections cluster, job; not a list$"):
        parse_config(["cluster"])


def test_yaml_syntax_error_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("cluster:\n  kind: local\n  n_workers: [1, 2\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: line 4")
    assert "invalid YAML" in message


def test_a_bad_value_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster:\n  n_workers: two\n")
    with pytest.raises(ConfigError, match=f"^{path}: cluster.n_workers: must be an integer >= 1, not 'two'$"):
        load_config(path)


def test_missing_or_empty_file(tmp_path):
    with pytest.raises(ConfigError, match="no such config file") as caught:
        load_config(tmp_path / "absent.yaml")
    assert str(tmp_path / "absent.yaml") in str(caught.value)
    (tmp_path / "empty.yaml").write_text("# nothing yet\n")
    with pytest.raises(ConfigError, match="empty.yaml: must be a mapping with the sections cluster, job; not null"):
        load_config(tmp_path / "empty.yaml")


def test_dask_security_from_existing_files(tmp_path):
    for name in ("ca.pem", "node.pem", "node-key.pem"):
        (tmp_path / name).write_text("placeholder\n")
    (tmp_path / "tls.yaml").write_text(
        "cluster:\n  kind: address\n  address: tls://scheduler:8786\n  security:\n    ca_file: ca.pem\n"
        "    cert_file: node.pem\n    key_file: node-key.pem\n    require_encryption: false\n"
    )
    security = load_config(tmp_path / "tls.yaml").cluster.dask_security()
    from distributed.security import Security as DaskSecurity

    assert isinstance(security, DaskSecurity)
    assert security.tls_ca_file == str(tmp_path / "ca.pem")
    for role in ("client", "scheduler", "worker"):
        assert getattr(security, f"tls_{role}_cert") == str(tmp_path / "node.pem")
        assert getattr(security, f"tls_{role}_key") == str(tmp_path / "node-key.pem")
    assert security.require_encryption is False


def test_dask_security_names_a_missing_file(tmp_path):
    (tmp_path / "ca.pem").write_text("placeholder\n")
    (tmp_path / "node.pem").write_text("placeholder\n")
    cluster = ClusterConfig(
        kind="address",
        address="tls://scheduler:8786",
        security=Security(str(tmp_path / "ca.pem"), str(tmp_path / "node.pem"), str(tmp_path / "node-key.pem")),
    )
    with pytest.raises(ConfigError, match=f"^cluster.security.key_file: no such file: {tmp_path / 'node-key.pem'}$"):
        cluster.dask_security()


# ---- the shipped configs, found by name ----


def test_the_shipped_configs_are_the_repositorys():
    shipped = shipped_configs()
    assert list(shipped) == sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    for name, path in shipped.items():
        assert path.read_text() == (CONFIGS / f"{name}.yaml").read_text()


def test_a_shipped_config_is_found_by_name_from_any_folder(tmp_path, monkeypatch):
    from distprice.cluster.start import cluster_config

    monkeypatch.chdir(tmp_path)
    local = load_config(CONFIGS / "local-cpu.yaml")
    for name in ("local-cpu", "local-cpu.yaml"):
        by_name = load_config(name)
        assert (by_name.cluster, by_name.job) == (local.cluster, local.job)
        assert by_name.source == str(shipped_configs()["local-cpu"])
    assert cluster_config("local-cpu") == local.cluster  # what distprice.Pricer("local-cpu") starts
    assert cluster_config("local-cuda").kind == "local-cuda"
    # a file that exists is read first, whatever its name
    (tmp_path / "local-cpu.yaml").write_text("cluster:\n  kind: local\n  n_workers: 3\n")
    assert load_config("local-cpu.yaml").cluster.n_workers == 3 and load_config("local-cpu").cluster.n_workers is None


def test_a_name_that_is_no_file_nor_shipped_config_lists_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = "address, compose, local-cpu, local-cuda, pbs, slurm-gpu, tls, tls-local"
    with pytest.raises(ConfigError) as caught:
        load_config("local-gpu")
    assert str(caught.value) == (
        f"local-gpu: no such config file, nor a config shipped with distprice; the shipped ones, by name: {names} "
        "(distprice config show NAME prints one)"
    )
    with pytest.raises(ConfigError, match=r"^configs/local-cpu.yaml: .* \(did you mean local-cpu, the shipped one\?\)"):
        load_config("configs/local-cpu.yaml")  # the docs' old path, outside the checkout


def test_the_config_commands_and_cluster_find_shipped_configs_by_name(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from distprice.cli import main

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    shown = runner.invoke(main, ["config", "show", "local-cpu"])
    assert shown.exit_code == 0 and shown.output == (CONFIGS / "local-cpu.yaml").read_text()
    listed = runner.invoke(main, ["config", "list"])
    assert listed.exit_code == 0 and [line.split()[0] for line in listed.output.splitlines()] == list(shipped_configs())
    assert (
        "local-cpu    A Dask cluster on this machine's CPU cores: distprice run --cluster local-cpu\n" in listed.output
    )
    unknown = runner.invoke(main, ["config", "show", "nightly"])
    assert unknown.exit_code == 2 and "the shipped ones, by name: address, compose, local-cpu" in unknown.output
    pd.DataFrame({"id": ["a"], "instrument": ["bond"], "maturity": [5.0]}).to_csv("book.csv", index=False)
    run = runner.invoke(main, ["run", "--cluster", "nightly", "--portfolio", "book.csv", "--output", "o.csv"])
    assert run.exit_code == 2 and "nightly: no such config file, nor a config shipped" in run.output
    assert not (tmp_path / "o.csv").exists()
    pytest.importorskip("dask_jobqueue")
    script = runner.invoke(main, ["cluster-script", "slurm-gpu"])
    assert script.exit_code == 0 and "#SBATCH --gres=gpu:4\n" in script.output


@pytest.mark.slow
def test_an_installed_distprice_ships_its_configs(tmp_path):
    """The package as setuptools installs it (a build of this checkout's pyproject.toml), imported from a folder
    outside the checkout: its configs come with it and are found by name."""
    built = tmp_path / "lib"
    subprocess.run(
        [sys.executable, "-c", "import setuptools; setuptools.setup()", "-q"]
        + ["egg_info", "--egg-base", str(tmp_path), "build_py", "--build-lib", str(built)],
        cwd=CONFIGS.parent,
        check=True,
        capture_output=True,
    )
    code = (
        "from distprice.cluster.config import load_config, shipped_configs\n"
        "print(shipped_configs()['local-cpu'].parent)\n"
        "print(load_config('local-cuda').cluster.kind)\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(built)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == [str(built / "distprice" / "configs"), "local-cuda"]
    for path in CONFIGS.glob("*.yaml"):
        assert (built / "distprice" / "configs" / path.name).read_text() == path.read_text()

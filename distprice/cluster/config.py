"""Cluster and job settings read from YAML; ready files ship with the package (``configs/`` of the repository,
installed as ``distprice.configs``) and are found by name (:func:`shipped_configs`).

A config file has two sections, both optional: ``cluster`` (where to price, :class:`ClusterConfig`) and
``job`` (what to price, :class:`JobConfig`); a setting left out takes the default of its dataclass.
Relative paths in a file are taken from the file's folder. Every problem found is reported at once, one
line each, as ``source: key.path: rule``.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import importlib.resources
import math
import numbers
import os
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from dask.utils import parse_bytes

from ..choices import ENGINE_NAMES, ON_INVALID, PRECISION_NAMES, SCENARIO_TABLES
from ..errors import ConfigError, OptionError, shown
from ..job import JobOptions, valuation_day

JOBQUEUE_KINDS = ("slurm", "pbs")
CLUSTER_KINDS = ("local", "local-cuda", "address", *JOBQUEUE_KINDS)
WORKERS_PER_GPU = 6
"""The most worker processes a ``local-cuda`` cluster gives a GPU by default (on a 16-core H100 host, 10^6
rows priced from Parquet to Parquet: 6.9 s with one, 4.2 s with two, 3.2-3.8 s with four to eight; on H200
hosts of 16 cores a GPU, six against eight: 10 copies of R1 to one file on two GPUs 0.66-0.73 s against
0.72-0.75 s, on one GPU 1.03-1.16 s against 1.07-1.11 s, under 16 shifts 12.9-13.1 s against 13.7 s)."""
WORKER_THREADS = 4
"""The most threads a ``local-cuda`` worker gets by default (on that host, 8 workers of 2 threads price 10^6
rows from Parquet to a folder of parts in 1.5 s, against 1.7 s with one thread)."""
_SECTIONS = ("cluster", "job")
_SECURITY_FILES = ("ca_file", "cert_file", "key_file")
_JOB_PATHS = (
    "portfolio",
    "curves",
    "scenarios",
    "exercise_schedule",
    "coupon_schedule",
    "principal_schedule",
    "models",
    "output",
)
_HOST_PORT = re.compile(r"[^\s/]*:[0-9]{1,5}")
_ADDRESS = re.compile(r"(tcp|tls)://[^\s/]+:[0-9]{1,5}")
_WALLTIME = re.compile(r"[0-9]+:[0-5][0-9]:[0-5][0-9]")


@dataclass(frozen=True)
class Security:
    """TLS for the cluster's connections: the CA certificate, and one certificate and key (PEM files) that
    serve every role (client, scheduler and worker), so the certificate must be valid for all three."""

    ca_file: str
    cert_file: str
    key_file: str
    require_encryption: bool = True
    """Refuse unencrypted connections."""


@dataclass(frozen=True)
class JobQueue:
    """Dask workers in batch jobs of SLURM or PBS (:mod:`distprice.jobqueue`); every size is per job."""

    cores: int
    """Cores of each job, shared evenly by its worker processes (threads = cores / processes)."""
    memory: str | int
    """Memory of each job (bytes or a size such as ``64GiB``), shared evenly by its worker processes."""
    queue: str | None = None
    """SLURM partition or PBS queue; None: the batch system's default."""
    account: str | None = None
    """Account charged for the jobs; None: the user's default."""
    walltime: str = "01:00:00"
    """Run time limit of each job, ``hours:minutes:seconds``."""
    processes: int | None = None
    """Worker processes per job, a multiple of ``gpus_per_job`` (the same number on each GPU); None: 1 for a CPU
    job, and for a GPU job as many a GPU as a ``local-cuda`` cluster gives one (at most
    :data:`WORKERS_PER_GPU`, each of at least 2 of the job's cores)."""
    gpus_per_job: int | None = None
    """GPUs of each job (SLURM ``--gres=gpu:N``, PBS ``ngpus``); its worker processes then share them, each
    seeing one (:mod:`distprice.cluster.nanny`). None: CPU jobs."""
    jobs: int = 1
    """Jobs to submit."""
    start_timeout: float = 600.0
    """Seconds to wait for the first job's workers to join (jobs may wait in the queue)."""
    job_script_prologue: tuple[str, ...] = ()
    """Shell lines run in each job before its workers start (``module load ...``, ``source venv/bin/activate``)."""
    job_extra_directives: tuple[str, ...] = ()
    """More batch directives, without their ``#SBATCH`` / ``#PBS`` prefix (e.g. ``--constraint=h100``)."""
    interface: str | None = None
    """Network interface of the workers and of the scheduler in this process (e.g. ``ib0``)."""
    local_directory: str | None = None
    """Workers' spill folder on the compute node (e.g. ``$TMPDIR``); taken as written, not from the file's folder."""

    @property
    def worker_processes(self) -> int:
        """Worker processes of each job: ``processes``, or its default."""
        if self.processes is not None:
            return self.processes
        if self.gpus_per_job is None:
            return 1
        return self.gpus_per_job * max(1, min(WORKERS_PER_GPU, self.cores // (2 * self.gpus_per_job)))


@dataclass(frozen=True)
class ClusterConfig:
    """Where to price: ``kind`` ``local`` (a cluster on this machine's cores), ``local-cuda`` (worker processes
    on this machine's visible GPUs, each seeing one), ``address`` (a scheduler already running), or ``slurm`` /
    ``pbs`` (workers in batch jobs, sized by :attr:`jobqueue`; the scheduler runs in this process; needs
    dask-jobqueue)."""

    kind: str = "local"
    n_workers: int | None = None
    """Workers of a ``local`` cluster (None: one per core); of ``local-cuda``, the GPUs it uses (None: every
    visible GPU), each with :attr:`workers_per_gpu` workers."""
    workers_per_gpu: int | None = None
    """Worker processes sharing each GPU of a ``local-cuda`` cluster; None: half this machine's cores per GPU,
    at most :data:`WORKERS_PER_GPU`. A chunk's host work (checks, events, layout, the priced table) runs in its
    worker between kernels, so several processes per GPU keep it busy while the others do theirs."""
    threads_per_worker: int | None = None
    """Threads of each worker (its tasks at once, and their numba loops' threads); None: 1 on a ``local``
    cluster (a worker per core), and on a ``local-cuda`` one the cores its workers leave, the cores over the
    workers, at most :data:`WORKER_THREADS`."""
    processes: bool = True
    """Workers of a ``local`` cluster run in processes of their own; false: in threads of this process."""
    memory_limit: str | int = "auto"
    """Memory of each local worker: ``auto`` (the machine's, shared among the workers), bytes, or a size
    such as ``4GiB``."""
    dashboard_address: str | None = "127.0.0.1:8787"
    """``host:port`` of a local cluster's dashboard (port 0: any free port); None: no dashboard."""
    address: str | None = None
    """The scheduler of kind ``address``: ``tcp://host:port`` or ``tls://host:port``."""
    security: Security | None = None
    """TLS: required by a ``tls://`` address, refused with a ``tcp://`` one; a cluster this process starts
    (local, slurm, pbs) uses TLS with it."""
    timeout: float = 10.0
    """Seconds to wait for the scheduler to answer."""
    no_workers_timeout: float = 60.0
    """Seconds a job waits on a cluster without workers (for the first to join, or after the last has gone)
    before it stops with exit status 5."""
    jobqueue: JobQueue | None = None
    """The batch jobs of kind ``slurm`` or ``pbs`` (required there, refused elsewhere)."""

    def dask_security(self):
        """The :class:`distributed.security.Security` built from :attr:`security`, or None without it.

        Raises :class:`ConfigError` naming each certificate or key file that does not exist.
        """
        if self.security is None:
            return None
        from distributed.security import Security as DaskSecurity

        tls = self.security
        missing = [
            f"cluster.security.{name}: no such file: {getattr(tls, name)}"
            for name in _SECURITY_FILES
            if not os.path.isfile(getattr(tls, name))
        ]
        if missing:
            raise ConfigError("\n".join(missing))
        cert, key = tls.cert_file, tls.key_file
        return DaskSecurity(
            require_encryption=tls.require_encryption,
            tls_ca_file=tls.ca_file,
            tls_client_cert=cert,
            tls_client_key=key,
            tls_scheduler_cert=cert,
            tls_scheduler_key=key,
            tls_worker_cert=cert,
            tls_worker_key=key,
        )


@dataclass(frozen=True)
class JobConfig(JobOptions):
    """What to price (``portfolio``, ``output``) and how: the job's :class:`~distprice.job.JobOptions` (the
    ``curves`` and ``scenarios`` paths, ``shifts_bp`` as a YAML list or a string such as
    ``"-100,-50,0,50,100"``, ``engine``, ``precision``, ``on_invalid``, ``as_of``, ``exercise_schedule``,
    ``models``, ``allow_empty``, ``allow_large_rates``, ``max_invalid``, ``timeout``, ``max_seconds``,
    ``scenario_table``) and ``chunks_per_worker``, the chunks a job is cut into per worker (None: the workers' default,
    :func:`~.start.default_chunks`). ``distprice run`` takes these as the defaults of its options of the same names.
    """

    portfolio: str | None = None
    output: str | None = None
    chunks_per_worker: int | None = None


@dataclass(frozen=True)
class Config:
    """A whole config; ``source`` is the file it was read from, or ``<dict>``."""

    cluster: ClusterConfig = ClusterConfig()
    job: JobConfig = JobConfig()
    source: str = "<dict>"


def parse_config(mapping, source: str = "<dict>", base_dir=None) -> Config:
    """The config a mapping (with sections ``cluster`` and ``job``, both optional) describes.

    Relative paths are joined to ``base_dir`` when it is given. Raises :class:`ConfigError` listing every
    problem; ``source`` names the mapping's origin in the messages.
    """
    problems: list[str] = []

    def report(key: str, rule: str) -> None:
        problems.append(f"{source}: {key}: {rule}")

    if not isinstance(mapping, dict):
        raise ConfigError(f"{source}: must be a mapping with the sections {', '.join(_SECTIONS)}; not {shown(mapping)}")
    for key in mapping:
        if key not in _SECTIONS:
            report(str(key), _unknown(key, _SECTIONS))
    cluster, failed = _section(ClusterConfig, mapping.get("cluster"), "cluster", report, base_dir)
    job, _ = _section(JobConfig, mapping.get("job"), "job", report, base_dir)
    if not {"kind", "address"} & failed:
        if cluster.kind == "address" and cluster.address is None:
            report("cluster.address", "is required for kind address")
        if cluster.kind != "address" and cluster.address is not None:
            report("cluster.address", f"is for kind address only, not kind {cluster.kind}")
        if cluster.kind != "local-cuda" and cluster.workers_per_gpu is not None:
            report("cluster.workers_per_gpu", f"is for kind local-cuda only, not kind {cluster.kind}")
    if cluster.kind == "address" and cluster.address is not None and not {"kind", "address", "security"} & failed:
        tls = cluster.address.startswith("tls://")
        if tls and cluster.security is None:
            report("cluster.security", f"is required for the tls:// address {cluster.address}")
        if not tls and cluster.security is not None:
            report("cluster.security", f"needs a tls:// address, not {cluster.address}")
    if "kind" not in failed:
        _check_jobqueue(cluster, "jobqueue" in failed, report)
    if job.scenarios is not None and job.shifts_bp is not None:
        report("job.shifts_bp", "give scenarios or shifts_bp, not both")
    if job.measures and (job.scenarios is not None or job.shifts_bp is not None):
        report("job.measures", "risk measures are of the base market: give measures or scenarios / shifts_bp, not both")
    if problems:
        raise ConfigError("\n".join(problems))
    return Config(cluster, job, source)


def shipped_configs() -> dict[str, Path]:
    """The ready configs that ship with distprice, by name (``local-cpu`` for ``local-cpu.yaml``): the installed
    package data ``distprice.configs``, or ``configs/`` beside the package in a source checkout."""
    try:
        folder = Path(str(importlib.resources.files("distprice.configs")))
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parents[2] / "configs"
    return {path.stem: path for path in sorted(folder.glob("*.yaml"), key=lambda path: path.stem)}


def config_file(path_or_name) -> str:
    """The config file ``path_or_name`` names: a file that exists, else a shipped config by name (``local-cpu``
    or ``local-cpu.yaml``). Raises :class:`ConfigError` listing the shipped names when it is neither."""
    source = os.fspath(path_or_name)
    if os.path.exists(source):
        return source
    shipped = shipped_configs()
    name = source.removesuffix(".yaml")
    if name in shipped:  # a name has no folder: shipped names have none
        return str(shipped[name])
    stem = Path(name).name
    hint = f" (did you mean {stem}, the shipped one?)" if stem in shipped and stem != name else ""
    raise ConfigError(
        f"{source}: no such config file, nor a config shipped with distprice{hint}; the shipped ones, by name: "
        f"{', '.join(shipped)} (distprice config show NAME prints one)"
    )


def load_config(path) -> Config:
    """The config in the YAML file ``path``, or the shipped config of that name (:func:`config_file`); relative
    paths in it are taken from the file's folder.

    Raises :class:`ConfigError` for a file that is neither, an unreadable file, a YAML syntax error (with its
    line) and every problem :func:`parse_config` finds.
    """
    source = config_file(path)
    try:
        with open(source, "rb") as file:
            mapping = yaml.safe_load(file)
    except OSError as error:
        raise ConfigError(f"{source}: cannot read it: {error.strerror}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(error, "problem", None) or str(error).replace("\n", " ")
        raise ConfigError(f"{source}: {where}invalid YAML: {problem}") from None
    return parse_config(mapping, source, os.path.dirname(os.path.abspath(source)))


def _check_jobqueue(cluster: ClusterConfig, failed: bool, report) -> None:
    """The rules that tie the ``jobqueue`` section to the cluster's kind and its sizes to each other."""
    batch = cluster.kind in JOBQUEUE_KINDS
    if batch and cluster.jobqueue is None and not failed:
        report("cluster.jobqueue", f"is required for kind {cluster.kind}")
    if not batch and cluster.jobqueue is not None:
        report("cluster.jobqueue", f"is for kinds {' and '.join(JOBQUEUE_KINDS)} only, not kind {cluster.kind}")
    queue = cluster.jobqueue
    if queue is None:
        return
    gpus, processes = queue.gpus_per_job, queue.processes
    if gpus is not None and processes is not None and processes % gpus:
        report(
            "cluster.jobqueue.processes",
            f"must be a multiple of gpus_per_job ({gpus}), the same number of worker processes on each GPU, "
            f"not {processes}",
        )
    if queue.cores < (processes or gpus or 1):
        report(
            "cluster.jobqueue.cores",
            f"must be at least the worker processes of a job ({processes or gpus}), not {queue.cores}",
        )


# ---- checks: each returns the value to keep or raises ValueError stating the rule ----


def _unknown(key, allowed) -> str:
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown key{hint}; allowed keys: {', '.join(allowed)}"


def _optional(check):
    return lambda value: None if value is None else check(value)


def _choice(*choices: str):
    def check(value):
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, not {shown(value)}")
        return value

    return check


def _integer(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be an integer >= 1, not {shown(value)}")
    return value


def _count(value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"must be an integer >= 0, not {shown(value)}")
    return value


def _boolean(value):
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, not {shown(value)}")
    return value


def _seconds(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise ValueError(f"must be a number of seconds > 0, not {shown(value)}")
    return float(value)


def _is_size(value) -> bool:
    """A number of bytes >= 1 or a size such as ``4GiB``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value >= 1
    try:
        return isinstance(value, str) and bool(value.strip()) and parse_bytes(value) >= 1
    except ValueError:
        return False


def _memory(value):
    if value == "auto" or _is_size(value):
        return value
    raise ValueError(f"must be auto, a number of bytes >= 1 or a size such as '4GiB', not {shown(value)}")


def _size(value):
    if _is_size(value):
        return value
    raise ValueError(f"must be a number of bytes >= 1 or a size such as '64GiB', not {shown(value)}")


def _dashboard(value):
    if value is not None and not (isinstance(value, str) and _port(_HOST_PORT, value)):
        raise ValueError(f"must be 'host:port' (port 0: any free port) or null for no dashboard, not {shown(value)}")
    return value


def _address(value):
    if not (isinstance(value, str) and _port(_ADDRESS, value)):
        raise ValueError(f"must be tcp://host:port or tls://host:port, not {shown(value)}")
    return value


def _port(pattern: re.Pattern, text: str) -> bool:
    return pattern.fullmatch(text) is not None and int(text.rpartition(":")[2]) <= 65535


def _date(value):
    """A valuation date: ``YYYY-MM-DD`` (YAML may read it as a date already)."""
    try:
        valuation_day(value if not isinstance(value, datetime.date) else value.isoformat())
    except OptionError:
        raise ValueError(f"must be a date YYYY-MM-DD, not {shown(value)}") from None
    return value if not isinstance(value, datetime.date) else value.isoformat()


def _job_option(name: str):
    """The check of job option ``name`` alone, as the job checks it (:meth:`JobOptions.checked`): its value
    parsed."""
    return lambda value: getattr(JobOptions.of(**{name: value}).checked(), name)


def _path(value):
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"must be a path, not {shown(value)}")
    return value


def _word(value):
    """A name that goes into a batch directive or a command line: no spaces, no line breaks."""
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise ValueError(f"must be a name without spaces, not {shown(value)}")
    return value


def _walltime(value):
    if not (isinstance(value, str) and _WALLTIME.fullmatch(value)):
        raise ValueError(f"must be hours:minutes:seconds such as '02:00:00' (quoted in YAML), not {shown(value)}")
    return value


def _lines(value):
    """Lines of a job script: a list of one-line strings, as a tuple."""
    if not isinstance(value, list) or not all(
        isinstance(line, str) and line.strip() and "\n" not in line for line in value
    ):
        raise ValueError(f"must be a list of one-line strings, not {shown(value)}")
    return tuple(value)


def _directives(value):
    lines = _lines(value)
    prefixed = [line for line in lines if line.lstrip().startswith("#")]
    if prefixed:
        raise ValueError(f"must be given without their #SBATCH / #PBS prefix, not {prefixed[0]!r}")
    return lines


_CHECKS = {
    Security: {"ca_file": _path, "cert_file": _path, "key_file": _path, "require_encryption": _boolean},
    JobQueue: {
        "queue": _optional(_word),
        "account": _optional(_word),
        "walltime": _walltime,
        "cores": _integer,
        "memory": _size,
        "processes": _optional(_integer),
        "gpus_per_job": _optional(_integer),
        "jobs": _integer,
        "start_timeout": _seconds,
        "job_script_prologue": _lines,
        "job_extra_directives": _directives,
        "interface": _optional(_word),
        "local_directory": _optional(_path),
    },
    ClusterConfig: {
        "kind": _choice(*CLUSTER_KINDS),
        "n_workers": _optional(_integer),
        "workers_per_gpu": _optional(_integer),
        "threads_per_worker": _optional(_integer),
        "processes": _boolean,
        "memory_limit": _memory,
        "dashboard_address": _dashboard,
        "address": _optional(_address),
        "security": None,
        "timeout": _seconds,
        "no_workers_timeout": _seconds,
        "jobqueue": None,
    },  # sections of their own
    JobConfig: {
        **dict.fromkeys(_JOB_PATHS, _optional(_path)),
        "shifts_bp": _optional(_job_option("shifts_bp")),
        "engine": _choice(*ENGINE_NAMES),
        "precision": _choice(*PRECISION_NAMES),
        "on_invalid": _choice(*ON_INVALID),
        "chunks_per_worker": _integer,
        "as_of": _date,
        "allow_empty": _boolean,
        "allow_large_rates": _boolean,
        "max_invalid": _optional(_count),
        "timeout": _optional(_seconds),
        "max_seconds": _optional(_seconds),
        "base_scenario": _boolean,
        "scenario_table": _choice(*SCENARIO_TABLES),
        "measures": _optional(_job_option("measures")),
        "bump_bp": _job_option("bump_bp"),
        "key_rates": _job_option("key_rates"),
    },
}
_PATHS = {Security: _SECURITY_FILES, JobQueue: (), ClusterConfig: (), JobConfig: _JOB_PATHS}
_SUBSECTIONS = {"security": Security, "jobqueue": JobQueue}
"""Settings of ``cluster`` that are sections of their own: dataclasses with required fields."""


def _section(cls, mapping, where: str, report, base_dir):
    """``cls`` built from the settings in ``mapping`` (None: no settings) and the keys that had problems,
    which keep their defaults (a subsection, whose dataclass has required fields, gives None when anything is
    wrong)."""
    checks = _CHECKS[cls]
    subsection = cls in _SUBSECTIONS.values()
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, dict):
        report(where, f"must be a mapping of settings, not {shown(mapping)}")
        return (None if subsection else cls()), set(checks)
    values, failed = {}, set()
    for key, value in mapping.items():
        if key not in checks:
            report(f"{where}.{key}", _unknown(key, tuple(checks)))
            continue
        if key in _SUBSECTIONS:
            value, bad = (
                (None, ()) if value is None else _section(_SUBSECTIONS[key], value, f"{where}.{key}", report, base_dir)
            )
            if bad:
                failed.add(key)
                continue
        else:
            try:
                value = checks[key](value)
            except ValueError as error:
                report(f"{where}.{key}", str(error))
                failed.add(key)
                continue
        if key in _PATHS[cls] and value is not None and base_dir is not None:
            value = os.path.join(base_dir, value)
        values[key] = value
    for field in dataclasses.fields(cls):
        if field.default is dataclasses.MISSING and field.name not in mapping:
            report(f"{where}.{field.name}", "is required")
            failed.add(field.name)
    if failed and subsection:
        return None, failed
    return cls(**values), failed

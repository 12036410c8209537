"""Ready cluster configs (YAML), shipped as package data and installed as ``distprice.configs``; a config is
found by its name (``local-cpu`` for ``local-cpu.yaml``) by :func:`distprice.cluster.config.load_config`,
``distprice.Pricer``, ``distprice run --cluster`` and ``distprice config show``.

- ``local-cpu.yaml``: a cluster on this machine's CPU cores, one single-threaded worker per core;
- ``local-cuda.yaml``: worker processes sharing each of this machine's GPUs;
- ``address.yaml``, ``tls.yaml``: a scheduler already running, reached over TCP or TLS;
- ``tls-local.yaml``: a cluster on this machine, TLS with certificates of your own;
- ``compose.yaml``: the cluster of ``deploy/docker/compose.yaml``, as its job service sees it;
- ``slurm-gpu.yaml``, ``pbs.yaml``: workers in SLURM or PBS batch jobs.

Those that name hosts, certificates, queues or accounts are templates: copy one (``distprice config show NAME >
cluster.yaml``) and edit it.
"""

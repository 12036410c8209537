"""TLS: the certificates of deploy/tls/make-certs.sh, a TLS-only local cluster that refuses clients without
them, and a SLURM cluster whose workers speak TLS."""

from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import socket
import ssl
import stat
import subprocess
from pathlib import Path

import pytest

from distprice.cluster.config import load_config, parse_config
from distprice.cluster.jobqueue import job_script
from distprice.cluster.pricer import Pricer

from utils import CONFIGS, DEPLOY, SLURM_CPU, assert_same_prices

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
    for name in names:
        assert stat.S_IMODE((certs / f"{name}-key.pem").stat().st_mode) == 0o600
    ca_dir = tmp_path / "certs.ca"  # the CA key is kept apart from what is handed out
    assert not (certs / "ca-key.pem").exists() and not list(certs.glob("*.srl"))
    assert stat.S_IMODE((ca_dir / "ca-key.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE(ca_dir.stat().st_mode) == 0o700
    assert (
        openssl("verify", "-CAfile", str(certs / "ca.pem"), *(str(certs / f"{n}.pem") for n in names)).count(": OK")
        == 3
    )
    scheduler = openssl(
        "x509", "-in", str(certs / "scheduler.pem"), "-noout", "-subject", "-ext", "subjectAltName,extendedKeyUsage"
    )
    assert "CN = scheduler.example.org" in scheduler
    assert "DNS:scheduler.example.org, DNS:localhost, IP Address:127.0.0.1" in scheduler
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in scheduler
    ca = (certs / "ca.pem").read_bytes()
    make_certs(certs, "10.0.0.5")  # again, for another scheduler host: the CA stays, so do the old certificates
    assert (certs / "ca.pem").read_bytes() == ca
    assert "IP Address:10.0.0.5, DNS:localhost, IP Address:127.0.0.1" in openssl(
        "x509", "-in", str(certs / "scheduler.pem"), "-noout", "-ext", "subjectAltName"
    )
    usage = subprocess.run(["bash", str(MAKE_CERTS), str(certs)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr
    same = subprocess.run(
        ["bash", str(MAKE_CERTS), str(certs), "h"],
        capture_output=True,
        text=True,
        env={"CA_DIR": str(certs), "PATH": "/usr/bin:/bin"},
    )
    assert same.returncode == 2 and "CA_DIR must not be OUTPUT_DIR" in same.stderr


def test_a_tls_cluster_prices_and_refuses_clients_without_a_certificate_of_its_ca(
    tmp_path, small_book, small_priced, caplog
):
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
        assert_same_prices(pricer.price(small_book, engine="cpu"), small_priced)
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
        stranger = Security(
            tls_ca_file=str(tmp_path / "certs/ca.pem"),
            tls_client_cert=str(other / "client.pem"),
            tls_client_key=str(other / "client-key.pem"),
            require_encryption=True,
        )
        with pytest.raises(OSError):
            Client(address, security=stranger, timeout=5)
        with pytest.raises(OSError):
            Client(address.replace("tls://", "tcp://"), timeout=5)
    # the scheduler's own account of the three refusals
    refusals = [r.getMessage() for r in caplog.records if f"Listener on '{address}'" in r.getMessage()]
    assert [re.search(r"\[SSL: (\w+)\]", m).group(1) for m in refusals] == [
        "PEER_DID_NOT_RETURN_A_CERTIFICATE",
        "CERTIFICATE_VERIFY_FAILED",
        "WRONG_VERSION_NUMBER",
    ]


def test_a_slurm_cluster_with_security_runs_tls_workers(tmp_path):
    certs = make_certs(tmp_path / "certs")
    security = {
        "ca_file": str(certs / "ca.pem"),
        "cert_file": str(certs / "client.pem"),
        "key_file": str(certs / "client-key.pem"),
    }
    cluster = parse_config({"cluster": SLURM_CPU | {"security": security}}).cluster
    words = job_script(cluster).splitlines()[-1].split()
    assert words[3].startswith("tls://127.0.0.1:")  # the scheduler this process started listens on TLS only
    assert [words[words.index(f"--tls-{name}") + 1] for name in ("ca-file", "cert", "key")] == [
        security["ca_file"],
        security["cert_file"],
        security["key_file"],
    ]

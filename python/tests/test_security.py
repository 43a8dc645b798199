"""TLS (server certificate, client certificates) and refusals, for the worker and the client."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import dtp
from support import Cluster

TASKS = Path(__file__).parent / "fixtures" / "py_tasks.py"
SERVER_EXT = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
CLIENT_EXT = "extendedKeyUsage=clientAuth\n"


def openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)


def make_ca(folder: Path, name: str) -> None:
    openssl(
        folder,
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.pem",
        "-days",
        "2",
        "-subj",
        f"/CN=dtp test {name}",
    )


def issue(folder: Path, ca: str, name: str, cn: str, ext: str) -> None:
    openssl(
        folder,
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
        "-subj",
        f"/CN={cn}",
    )
    (folder / f"{name}.ext").write_text(ext)
    openssl(
        folder,
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.pem",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-out",
        f"{name}.pem",
        "-days",
        "2",
        "-extfile",
        f"{name}.ext",
    )


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: TLS tests skipped")
    folder = tmp_path_factory.mktemp("certs")
    make_ca(folder, "ca")
    issue(folder, "ca", "server", "localhost", SERVER_EXT)
    issue(folder, "ca", "client", "dtp-client", CLIENT_EXT)
    make_ca(folder, "other-ca")
    return folder


def test_tls_with_client_certificates(cluster: Cluster, certs: Path) -> None:
    c = cluster.coordinator(
        "--tls-cert",
        str(certs / "server.pem"),
        "--tls-key",
        str(certs / "server.key"),
        "--tls-client-ca",
        str(certs / "ca.pem"),
    )
    mine = ["--tls-cert", str(certs / "client.pem"), "--tls-key", str(certs / "client.key")]
    cluster.py_worker(c, "py-tls", "--tls-ca", str(certs / "ca.pem"), *mine, tasks=TASKS)
    with dtp.Client(
        c.client_address,
        tls_ca=str(certs / "ca.pem"),
        tls_cert=str(certs / "client.pem"),
        tls_key=str(certs / "client.key"),
    ) as client:
        assert client.submit("py.upper", {"text": "sealed"}).result(timeout=30) == "SEALED"

    untrusted = cluster.py_worker(
        c, "py-other-ca", "--tls-ca", str(certs / "other-ca.pem"), *mine, wait=False
    )
    assert untrusted.wait_exit() == 1
    assert "refused by the coordinator (TLS_FAILED)" in untrusted.output
    assert "certificate verify failed" in untrusted.output

    no_cert = cluster.py_worker(c, "py-no-cert", "--tls-ca", str(certs / "ca.pem"), wait=False)
    assert no_cert.wait_exit() == 1
    assert "refused by the coordinator (UNAUTHENTICATED)" in no_cert.output

    plain = cluster.py_worker(c, "py-plain", wait=False)
    assert plain.wait_exit() == 1
    assert "refused by the coordinator (TLS_REQUIRED)" in plain.output

    with pytest.raises(dtp.TransportError) as wrong_ca:
        dtp.Client(c.client_address, tls_ca=str(certs / "other-ca.pem")).workers()
    assert wrong_ca.value.code == "TLS_FAILED"


def test_tls_to_a_plain_port_is_a_refusal(cluster: Cluster, certs: Path) -> None:
    c = cluster.coordinator()
    worker = cluster.py_worker(c, "py-tls-to-plain", "--tls-ca", str(certs / "ca.pem"), wait=False)
    assert worker.wait_exit() == 1
    assert "refused by the coordinator (TLS_FAILED)" in worker.output
    with pytest.raises(dtp.TransportError) as raised:
        dtp.Client(c.client_address, tls_ca=str(certs / "ca.pem")).workers()
    assert raised.value.code == "TLS_FAILED"


def test_unreadable_tls_files_are_a_usage_error(cluster: Cluster) -> None:
    worker = cluster.py_worker(None, "py-bad-ca", "--tls-ca", "/nonexistent/ca.pem")
    assert worker.wait_exit() == 2
    assert "cannot use TLS CA /nonexistent/ca.pem" in worker.output
    missing = cluster.py_worker(None, "py-no-token", "--token-file", "/nonexistent/token")
    assert missing.wait_exit() == 2
    assert "cannot read /nonexistent/token" in missing.output

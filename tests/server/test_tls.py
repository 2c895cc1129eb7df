"""`gateway serve --tls-cert --tls-key`: HTTPS, with the official SDK trusting a test CA.

Caller keys are bearer tokens; before this the server spoke plain HTTP only. The CA and the
server's certificate are made here with `cryptography`; nothing leaves loopback.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx2 as httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import ServerProcess, server_env

pytestmark = pytest.mark.slow  # `gateway serve` as a process


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_ca_and_server_cert(folder: Path) -> tuple[Path, Path, Path]:
    """A test CA (ca.pem) and a certificate it signed for 127.0.0.1 (server.pem, server.key)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("gateway test CA"))
        .issuer_name(_name("gateway test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return ca_path, cert_path, key_path


@pytest.fixture(scope="module")
def tls_server(
    tmp_path_factory: pytest.TempPathFactory, fake: FakeMessagesAPI
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("tls")
    ca, cert, key = make_ca_and_server_cert(home)
    server = ServerProcess(home, server_env(home, fake.base_url), tls_ca=ca)
    server.cli("db", "upgrade")
    server.start("--tls-cert", str(cert), "--tls-key", str(key))
    try:
        yield server
    finally:
        server.stop()


def test_the_official_sdk_calls_the_server_over_https(tls_server: ServerProcess) -> None:
    assert tls_server.tls_ca is not None
    key = tls_server.create_key("payments-svc")
    client = anthropic.Anthropic(
        base_url=tls_server.base_url,
        api_key=key,
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(
            verify=ssl.create_default_context(cafile=str(tls_server.tls_ca))
        ),
    )
    with client:
        message = client.messages.create(
            model="general_assistant",
            max_tokens=64,
            messages=[{"role": "user", "content": "Summarise the wire transfer policy."}],
        )
        assert message.content and message.content[0].type == "text"
        with client.messages.stream(
            model="general_assistant",
            max_tokens=64,
            messages=[{"role": "user", "content": "And the cash deposit policy."}],
        ) as stream:
            assert stream.get_final_text()
    assert "serving on https://127.0.0.1:" in tls_server.log_path.read_text()


def test_a_client_that_does_not_trust_the_ca_is_refused(tls_server: ServerProcess) -> None:
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{tls_server.base_url}/healthz", timeout=5)


def test_plain_http_to_the_tls_port_gets_no_answer(tls_server: ServerProcess) -> None:
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{tls_server.port}/healthz", timeout=5)


def test_the_read_time_outs_hold_under_tls(tmp_path: Path, fake: FakeMessagesAPI) -> None:
    # A TLS client that completes the handshake and then sends its headers too slowly is
    # answered 408 and closed, as over plain HTTP (the guarded protocol sits under TLS).
    ca, cert, key = make_ca_and_server_cert(tmp_path)
    env = server_env(tmp_path, fake.base_url, GATEWAY_SERVER_HEADER_TIMEOUT_S="0.5")
    server = ServerProcess(tmp_path, env, tls_ca=ca)
    server.cli("db", "upgrade")
    server.start("--tls-cert", str(cert), "--tls-key", str(key))
    try:
        context = ssl.create_default_context(cafile=str(ca))
        with (
            socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            tls.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n")  # never ends
            answer = b""
            while chunk := tls.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer
    finally:
        server.stop()


def test_a_key_that_does_not_match_the_certificate_is_one_line(
    tmp_path: Path, fake: FakeMessagesAPI
) -> None:
    _ca, cert, _key = make_ca_and_server_cert(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _ca2, _cert2, wrong_key = make_ca_and_server_cert(other)
    server = ServerProcess(tmp_path, server_env(tmp_path, fake.base_url))
    done = server.cli(
        "serve", "--port", "0", "--tls-cert", str(cert), "--tls-key", str(wrong_key), check=False
    )
    assert done.returncode == 2, done.stderr
    assert "cannot use the TLS certificate" in done.stderr and "Traceback" not in done.stderr
    assert "serving on" not in done.stderr

    alone = server.cli("serve", "--port", "0", "--tls-cert", str(cert), check=False)
    assert alone.returncode == 2 and "--tls-key" in alone.stderr, alone.stderr

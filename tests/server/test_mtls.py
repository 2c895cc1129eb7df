"""`gateway serve --tls-client-ca`: mutual TLS, with the official SDK presenting a client
certificate (httpx's client cert via ``http_client=``).

Before, `gateway serve` verified no client: anyone who could reach the port and held (or
stole) a caller key could call. Now a client without a certificate from the callers' CA is
refused in the handshake, and with --tls-client-caller the certificate's common name must be
the caller key's caller. Certificates are made here with `cryptography`; loopback only.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2 as httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.fakes.messages_api import FakeMessagesAPI
from tests.server.conftest import ServerProcess, server_env

pytestmark = pytest.mark.slow  # `gateway serve` as a process

PROMPT = [{"role": "user", "content": "Summarise the wire transfer policy."}]
_NOW = datetime.datetime.now(datetime.UTC)
# The test PKI: CA files by name, and (certificate, key) pairs by caller.
Pki = dict[str, Any]


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


class Authority:
    """A test CA that signs server and client certificates into ``folder``."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = (
            self._builder(_name(name), self.key.public_key(), _name(name))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.slug = name.replace(" ", "-")
        self.path = folder / f"{self.slug}.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    @staticmethod
    def _builder(
        subject: x509.Name, public: ec.EllipticCurvePublicKey, issuer: x509.Name
    ) -> x509.CertificateBuilder:
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(_NOW - datetime.timedelta(minutes=5))
            .not_valid_after(_NOW + datetime.timedelta(days=1))
        )

    def issue(self, common: str, *, server: bool = False) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = self._builder(_name(common), key.public_key(), self.cert.subject).add_extension(
            x509.ExtendedKeyUsage([usage]), critical=False
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        stem = self.folder / f"{self.slug}-{common}"
        cert_path, key_path = Path(f"{stem}.pem"), Path(f"{stem}.key")
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        key_path.chmod(0o600)
        return cert_path, key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    servers, callers, other = (
        Authority(folder, "server CA"),
        Authority(folder, "caller CA"),
        Authority(folder, "other CA"),
    )
    return {
        "server_ca": servers.path,
        "server": servers.issue("127.0.0.1", server=True),
        "caller_ca": callers.path,
        "payments": callers.issue("payments-svc"),
        "ledger": callers.issue("ledger-svc"),
        "stranger": other.issue("payments-svc"),
    }


def _start(home: Path, fake: FakeMessagesAPI, pki: Pki, *extra: str) -> ServerProcess:
    server = ServerProcess(
        home, server_env(home, fake.base_url), tls_ca=pki["server_ca"], tls_client=pki["payments"]
    )
    server.cli("db", "upgrade")
    cert, key = pki["server"]
    server.start(
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
        "--tls-client-ca",
        str(pki["caller_ca"]),
        *extra,
    )
    return server


def _client(server: ServerProcess, key: str, cert: tuple[Path, Path] | None) -> anthropic.Anthropic:
    assert server.tls_ca is not None
    context = ssl.create_default_context(cafile=str(server.tls_ca))
    if cert is not None:
        context.load_cert_chain(*cert)
    return anthropic.Anthropic(
        base_url=server.base_url,
        api_key=key,
        max_retries=0,
        http_client=anthropic.DefaultHttpxClient(verify=context),
    )


@pytest.fixture(scope="module")
def mtls_server(
    tmp_path_factory: pytest.TempPathFactory,
    fake: FakeMessagesAPI,
    pki: Pki,
) -> Iterator[ServerProcess]:
    server = _start(tmp_path_factory.mktemp("mtls"), fake, pki, "--tls-client-caller")
    try:
        yield server
    finally:
        server.stop()


def test_the_sdk_with_a_client_certificate_is_served(
    mtls_server: ServerProcess,
    pki: Pki,
) -> None:
    key = mtls_server.create_key("payments-svc")
    with _client(mtls_server, key, pki["payments"]) as client:
        message = client.messages.create(model="general_assistant", max_tokens=64, messages=PROMPT)
    assert message.content and message.content[0].type == "text"
    assert "client certificates required" in mtls_server.log_path.read_text()


def test_a_client_without_a_certificate_or_with_another_cas_is_refused(
    mtls_server: ServerProcess,
    pki: Pki,
) -> None:
    key = mtls_server.create_key("payments-svc")
    for cert in (None, pki["stranger"]):
        with (
            _client(mtls_server, key, cert) as client,
            pytest.raises(anthropic.APIConnectionError),
        ):
            client.messages.create(model="general_assistant", max_tokens=64, messages=PROMPT)
    # Below the SDK: the handshake itself fails, before any request is read.
    context = ssl.create_default_context(cafile=str(mtls_server.tls_ca))
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{mtls_server.base_url}/healthz", verify=context, timeout=10)


def test_a_caller_key_presented_with_another_callers_certificate_is_refused(
    mtls_server: ServerProcess,
    pki: Pki,
) -> None:
    key = mtls_server.create_key("payments-svc")
    with (
        _client(mtls_server, key, pki["ledger"]) as client,
        pytest.raises(anthropic.AuthenticationError, match="client certificate"),
    ):
        client.messages.create(model="general_assistant", max_tokens=64, messages=PROMPT)


def test_client_certificate_mistakes_are_one_line_before_serving(
    tmp_path: Path,
    fake: FakeMessagesAPI,
    pki: Pki,
) -> None:
    server = ServerProcess(tmp_path, server_env(tmp_path, fake.base_url))
    cert, key = pki["server"]
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    missing = server.cli(
        "serve", "--port", "0", *tls, "--tls-client-ca", str(tmp_path / "nope.pem"), check=False
    )
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("not a certificate\n")
    garbage = server.cli("serve", "--port", "0", *tls, "--tls-client-ca", str(not_pem), check=False)
    plain = server.cli(
        "serve", "--port", "0", "--tls-client-ca", str(pki["caller_ca"]), check=False
    )
    alone = server.cli("serve", "--port", "0", *tls, "--tls-client-caller", check=False)
    for done, said in (
        (missing, "does not exist"),
        (garbage, "cannot use the client CA file"),
        (plain, "need TLS"),
        (alone, "needs client certificates"),
    ):
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "serving on" not in done.stderr

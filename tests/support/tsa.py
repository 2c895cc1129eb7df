"""A throwaway RFC 3161 time-stamping authority on 127.0.0.1, made of ``openssl ts``.

    with local_tsa(tmp_path / "tsa") as tsa:
        tsa.url          # http://127.0.0.1:PORT/  (POST application/timestamp-query)
        tsa.ca_cert      # the PEM CA certificate a reader trusts
        tsa.queries      # how many queries it answered

Each TSA has its own CA (an EC P-256 root) and a signing certificate it issued with the
critical id-kp-timeStamping EKU, as RFC 3161 §2.3 requires. A tiny HTTP server on a
loopback port writes each query to a file and answers with ``openssl ts -reply``, so
nothing leaves the machine and the tokens are what a real OpenSSL-based TSA signs.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

OPENSSL = "/usr/bin/openssl"

CONFIG = """\
[ tsa ]
default_tsa = local
[ local ]
dir = {dir}
serial = $dir/serial
crypto_device = builtin
signer_cert = $dir/tsa.crt
signer_key = $dir/tsa.key
signer_digest = sha256
default_policy = 1.3.6.1.4.1.99999.1
other_policies = 1.3.6.1.4.1.99999.2
digests = sha256, sha384, sha512
accuracy = secs:1
ordering = yes
tsa_name = no
ess_cert_id_chain = no
ess_cert_id_alg = sha256
"""
# Only the signer's certificate goes into a token: openssl writes a SET OF certificates in
# the order given, not DER order, and rfc3161-client refuses a SET that is not sorted.

SIGNER_EXTENSIONS = (
    "extendedKeyUsage=critical,timeStamping\n"
    "keyUsage=critical,digitalSignature\n"
    "basicConstraints=CA:FALSE\n"
)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_authority(folder: Path, name: str) -> None:
    """A CA and a time-stamping certificate it issued, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", f"/CN={name} CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder,
    )  # fmt: skip
    _openssl("req", *ec, "-keyout", "tsa.key", "-out", "tsa.csr", "-subj", f"/CN={name}",
             cwd=folder)  # fmt: skip
    (folder / "signer.ext").write_text(SIGNER_EXTENSIONS)
    _openssl(
        "x509", "-req", "-in", "tsa.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "tsa.crt", "-days", "2", "-extfile", "signer.ext",
        cwd=folder,
    )  # fmt: skip
    (folder / "serial").write_text("01\n")
    (folder / "ts.cnf").write_text(CONFIG.format(dir=folder))


@dataclass
class LocalTSA:
    folder: Path
    url: str = ""
    queries: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def ca_cert(self) -> Path:
        return self.folder / "ca.crt"

    def reply(self, query: bytes) -> bytes:
        with self._lock:  # one serial file: one openssl at a time
            self.queries += 1
            request, answer = self.folder / "query.tsq", self.folder / "reply.tsr"
            request.write_bytes(query)
            _openssl("ts", "-reply", "-config", "ts.cnf", "-queryfile", str(request),
                     "-out", str(answer), cwd=self.folder)  # fmt: skip
            return answer.read_bytes()


@contextmanager
def local_tsa(folder: Path, name: str = "Test TSA") -> Iterator[LocalTSA]:
    make_authority(folder, name)
    tsa = LocalTSA(folder)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            query = self.rfile.read(length)
            if self.headers.get("Content-Type") != "application/timestamp-query":
                self.send_error(415, "not a time-stamp query")
                return
            body = tsa.reply(query)
            self.send_response(200)
            self.send_header("Content-Type", "application/timestamp-reply")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return  # quiet: the test output is the test's

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    tsa.url = f"http://127.0.0.1:{server.server_address[1]}/tsr"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield tsa
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

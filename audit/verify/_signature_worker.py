"""A signature-checking worker of verify (audit.verify._signature_pool), as a script.

Started as ``python -P .../audit/verify/_signature_worker.py``: by its path, not as a module
of the ``audit`` package, so that it imports ``cryptography`` and nothing of the store (the
package's imports cost about a second of CPU per worker, which on a log of 30,000 events was
as much as checking a third of its signatures). It knows nothing of what a record signature
signs or what a failure means: the pool sends the trusted keys first (key id and raw public
key), then chunks of ``(key id, signature, signed message)``, and the worker answers each
chunk with the indexes of the items that did not check out; the pool judges those.
"""

import binascii
import marshal
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def main() -> None:
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    # marshal, not pickle: plain tuples of text, bytes and ints, from the verify that started us.
    keys = {
        kid: Ed25519PublicKey.from_public_bytes(raw)
        for kid, raw in marshal.load(inp)  # noqa: S302 - our parent's pipe
    }
    while True:
        try:
            items = marshal.load(inp)  # noqa: S302 - our parent's pipe
        except EOFError:
            return
        failed = []
        for index, (kid, signature, message) in enumerate(items):
            key = keys.get(kid)
            try:
                if key is None or not isinstance(signature, str):
                    raise ValueError(kid)
                # base64.b64decode(signature, validate=True) without its Python layer: the
                # same bytes, the same errors (a non-ASCII text is a ValueError here too).
                key.verify(binascii.a2b_base64(signature, strict_mode=True), message)
            except (InvalidSignature, binascii.Error, ValueError):
                failed.append(index)
        marshal.dump(failed, out)
        out.flush()


if __name__ == "__main__":
    main()

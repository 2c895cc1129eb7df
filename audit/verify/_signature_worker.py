"""A signature-checking worker of verify (audit.verify._signature_pool).

Started as ``python -m audit.verify._signature_worker``.

Its own module, so that running it does not import :mod:`audit.verify._signature_pool` twice.
"""

import sys

from audit.verify._signature_pool import serve

serve(sys.stdin.buffer, sys.stdout.buffer)

"""A signature-checking worker of verify (audit._verify_pool): ``python -m audit._verify_worker``.

Its own module, so that running it does not import :mod:`audit._verify_pool` twice.
"""

import sys

from audit._verify_pool import serve

serve(sys.stdin.buffer, sys.stdout.buffer)

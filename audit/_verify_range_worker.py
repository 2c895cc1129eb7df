"""A range walk's worker (audit._verify_range): ``python -m audit._verify_range_worker``.

Its own module, so that running it does not import :mod:`audit._verify_range` twice.
"""

import sys

from audit._verify_range import serve

serve(sys.stdin.buffer, sys.stdout.buffer)

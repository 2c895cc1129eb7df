"""A range walk's worker (audit.verify._range): ``python -m audit.verify._range_worker``.

Its own module, so that running it does not import :mod:`audit.verify._range` twice.
"""

import sys

from audit.verify._range import serve

serve(sys.stdin.buffer, sys.stdout.buffer)

"""Chi-square goodness of fit between observed draws and an exact distribution."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy import stats

# With fixed seeds the outcome is deterministic; a correct sampler passes with a wide margin
# and a wrong one (checked in test_chi_square_has_power) lands many orders of magnitude below.
ALPHA = 1e-3


def chi_square_pvalue(draws: npt.NDArray[np.intp], expected: npt.NDArray[np.float64]) -> float:
    """p-value of draws (token ids) against ``expected``; a draw of a zero-probability token
    fails outright because no chi-square can excuse an impossible outcome."""
    counts = np.bincount(draws, minlength=expected.shape[0])
    impossible = expected <= 0
    assert counts[impossible].sum() == 0, (
        f"drew impossible tokens {np.nonzero(counts * impossible)}"
    )
    observed = counts[~impossible]
    exp = expected[~impossible] / expected[~impossible].sum() * draws.shape[0]
    if observed.shape[0] == 1:
        return 1.0
    return float(stats.chisquare(observed, exp).pvalue)

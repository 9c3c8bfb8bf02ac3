#!/usr/bin/python3
"""Prints the reference tables of test_sweep_search.c.  Run with Debian's
python3-scipy:
    /usr/bin/python3 tests/server/sobol_reference.py

1. Points of the unscrambled Sobol' sequence (scipy.stats.qmc.Sobol, Joe &
   Kuo direction numbers, 32 bits) as integers x * 2^32, 16 dimensions, at
   the indices the test names.
2. The centred L2 discrepancy (scipy.stats.qmc.discrepancy, method CD, the
   squared value) of the first 64 unscrambled points in 4 dimensions: the
   test's own formula is checked on it.
3. Over SEEDS scrambled sequences (scramble=True, bits=32, seeds 0 ..
   SEEDS-1), the mean and standard deviation of the CD of the first N
   points in D dimensions: the test's scrambled points must match that
   mean within its standard error."""
import numpy as np
from scipy.stats import qmc

INDICES = list(range(32)) + [100, 1000, 4095, 12345, 65535, 99999]
points = qmc.Sobol(d=16, scramble=False, bits=32).random(max(INDICES) + 1)
for i in INDICES:
    row = ", ".join("%du" % round(x * 2**32) for x in points[i])
    print("    {%d, {%s}}," % (i, row))

print("#define UNSCRAMBLED_CD_64_4 %.17g" %
      qmc.discrepancy(points[:64, :4], method="CD"))

SEEDS, N, D = 64, 256, 4
cd = [qmc.discrepancy(qmc.Sobol(d=D, scramble=True, bits=32, seed=s)
                      .random(N), method="CD") for s in range(SEEDS)]
print("#define SCIPY_SCRAMBLED_CD_MEAN %.17g" % np.mean(cd))
print("#define SCIPY_SCRAMBLED_CD_SD %.17g" % np.std(cd, ddof=1))

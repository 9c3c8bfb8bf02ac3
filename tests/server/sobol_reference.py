#!/usr/bin/python3
"""Prints the reference table of test_sweep_search.c: points of the
unscrambled Sobol' sequence (scipy.stats.qmc.Sobol, Joe & Kuo direction
numbers, 32 bits) as integers x * 2^32, 16 dimensions, at the indices the
test names.  Run with Debian's python3-scipy:
    /usr/bin/python3 tests/server/sobol_reference.py"""
from scipy.stats import qmc

INDICES = list(range(32)) + [100, 1000, 4095, 12345, 65535, 99999]
points = qmc.Sobol(d=16, scramble=False, bits=32).random(max(INDICES) + 1)
for i in INDICES:
    row = ", ".join("%du" % round(x * 2**32) for x in points[i])
    print("    {%d, {%s}}," % (i, row))

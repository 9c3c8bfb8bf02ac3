"""common/confseq.c against an independent computation of Lai's t-mixture.

The probe's interval is solved in closed form; here the mixture martingale
M_n(m) is integrated numerically from its definition (numpy trapezoids): the
Gaussian likelihood ratio of mean m + delta*sigma against m, mixed over
delta ~ N(0, 1/c^2) and over sigma with the scale-invariant measure
dsigma/sigma.  The interval's ends must be where M_n = 1/alpha, a point
inside it below, points outside above; a whole-line answer must have M_n
below 1/alpha everywhere.  The sign rule's interval against its Beta
mixture evaluated with SciPy (scipy.special.betaln) at every candidate
median: each order statistic and the points between them.  The skewness
on a hand-worked table (scipy.stats would cost its import, 0.5 s, for
three numbers).  Then the rules' states on hand-made cases.

usage: test_confseq.py CONFSEQ_PROBE (tests/common/probe.py drives it)"""
import math
import os
import sys

import numpy as np
from scipy import special

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from probe import Probe  # noqa: E402

probe = Probe(sys.argv[1])
failures = probe.failures
ask = probe.ask
C2 = ask("c2")["c2"]
SIGN_A = ask("sign_a")["sign_a"]


def mixture(x, m):
    """M_n(m) by quadrature: trapezoids (spectrally exact for these smooth,
    fast-decaying integrands) over u = log sigma and delta."""
    y = np.asarray(x, dtype=float) - m
    n, v, s = len(y), float(np.sum(y * y)), float(np.sum(y))
    tau = 1 / math.sqrt(C2)
    u = np.linspace(math.log(v / n) / 2 - 12, math.log(v / n) / 2 + 12, 601)
    delta = np.linspace(-12 * tau, 12 * tau, 1201)
    sigma = np.exp(u)[:, None]
    # sum (y - delta sigma)^2 / sigma^2, expanded; logs scaled by the null's
    # peak so nothing overflows
    log_null = -n * u - v / (2 * np.exp(2 * u))
    peak = log_null.max()
    null = np.trapz(np.exp(log_null - peak), u)
    log_alt = (-n * np.log(sigma) - (v / sigma**2 - 2 * delta * s / sigma
                                     + n * delta**2) / 2
               - delta**2 / (2 * tau * tau) - math.log(tau * math.sqrt(2 * math.pi)))
    alt = np.trapz(np.trapz(np.exp(log_alt - peak), delta, axis=1), u)
    return alt / null


def close(what, got, want, tol):
    if abs(got - want) > tol * abs(want):
        failures.append(f"{what}: got {got}, want {want}")


def check_interval(x, alpha):
    r = ask("cs", alpha, len(x), *x)
    what = f"alpha {alpha} x {x}"
    mean = float(np.mean(x))
    if r["low"] is None or r["high"] is None:
        if r["low"] is not None or r["high"] is not None:
            failures.append(f"{what}: half a whole line: {r}")
        # the whole line: M_n below 1/alpha however far the candidate
        for far in (1, 10, 1000):
            m = mean - far * (np.std(x) + 1)
            if not mixture(x, m) < 1 / alpha:
                failures.append(f"{what}: whole line but M_n({m}) >= 1/alpha")
        return r
    if not r["low"] < mean < r["high"]:
        failures.append(f"{what}: mean {mean} outside {r}")
    close(f"{what}: M_n at low", mixture(x, r["low"]), 1 / alpha, 1e-5)
    close(f"{what}: M_n at high", mixture(x, r["high"]), 1 / alpha, 1e-5)
    half = r["high"] - r["low"]
    if not mixture(x, mean) < 1 / alpha:
        failures.append(f"{what}: the mean is not inside")
    if not mixture(x, r["high"] + 0.05 * half) > 1 / alpha:
        failures.append(f"{what}: a point past high is inside")
    if not mixture(x, r["low"] - 0.05 * half) > 1 / alpha:
        failures.append(f"{what}: a point below low is inside")
    return r


# Log-ratios of a clear 30% effect, of no effect, one with a big outlier.
effect = [-0.41, -0.30, -0.37, -0.33, -0.45, -0.28]
for alpha in (0.05, 0.10):
    for n in range(2, len(effect) + 1):
        check_interval(effect[:n], alpha)
noise = [0.12, -0.25, 0.03, 0.31, -0.08, -0.15, 0.22, 0.05, -0.02, 0.18]
check_interval(noise, 0.05)
check_interval([-0.2, -0.22, 1.9, -0.21, -0.19, -0.2], 0.05)
# shifting the values shifts the interval; scaling them scales it
base = ask("cs", 0.05, 6, *effect)
moved = ask("cs", 0.05, 6, *[v + 1.5 for v in effect])
close("shifted low", moved["low"], base["low"] + 1.5, 1e-12)
scaled = ask("cs", 0.05, 6, *[v * 3 for v in effect])
close("scaled high", scaled["high"], base["high"] * 3, 1e-12)
# nothing known yet: no values, one value, no spread
for x in ([], [0.3], [0.2, 0.2, 0.2, 0.2]):
    r = ask("cs", 0.05, len(x), *x)
    if r["low"] is not None or r["high"] is not None:
        failures.append(f"{x}: an interval from nothing: {r}")
# the sequence narrows as seeds come (same spread, more of them)
w = [ask("cs", 0.05, n, *noise[:n]) for n in (6, 10)]
if not w[1]["high"] - w[1]["low"] < w[0]["high"] - w[0]["low"]:
    failures.append(f"no narrower with 10 seeds than with 6: {w}")


def sign_mixture(x, m):
    """M_n(m) of the sign rule, from its definition."""
    n, s = len(x), sum(1 for v in x if v <= m)
    a = SIGN_A
    return math.exp(n * math.log(2) + special.betaln(a + s, a + n - s)
                    - special.betaln(a, a))


def check_sign(x, alpha):
    """Every candidate median: inside the probe's interval exactly when
    M_n < 1/alpha (ends: low is in, high is out, as the set is [x_(k),
    x_(k+1)) between order statistics)."""
    r = ask("sign", alpha, len(x), *x)
    low = -math.inf if r["low"] is None else r["low"]
    high = math.inf if r["high"] is None else r["high"]
    xs = sorted(x)
    gaps = [v - 1 for v in xs[:1]] + [(u + v) / 2 for u, v in zip(xs, xs[1:])]
    for m in xs + gaps + [v + 1 for v in xs[-1:]]:
        inside = low <= m < high
        if inside != (sign_mixture(x, m) < 1 / alpha):
            failures.append(f"sign alpha {alpha} x {x}: m {m} inside={inside}"
                            f" but M_n {sign_mixture(x, m)}; {r}")
    return r


for alpha in (0.05, 0.10, 0.05 / 12):
    for n in range(0, len(noise) + 1):
        check_sign(noise[:n], alpha)
    for n in range(1, len(effect) + 1):
        check_sign(effect[:n], alpha)
rng = np.random.default_rng(43)
for n in (12, 20, 40, 100):
    check_sign(list(rng.lognormal(size=n) - 1.2), 0.05 / 4)
# the median is shift and scale equivariant, and ignores the outlier's size
base = ask("sign", 0.05, 10, *noise)
moved = ask("sign", 0.05, 10, *[3 * v + 1.5 for v in noise])
close("sign shifted low", moved["low"], 3 * base["low"] + 1.5, 1e-12)
far = ask("sign", 0.05, 10, *(noise[:9] + [1e6]))
close("sign, an outlier", far["low"], base["low"], 1e-12)
# Hand-worked, a = 1/4: all n values below 0 give S = n at m = 0, and
# M_n = 2^n B(n + a, a) / B(a, a) = 2^n prod_{k<n} (k + 1/4) / (k + 1/2)
# = 32 (0.25 1.25 2.25 3.25 4.25) / (0.5 1.5 2.5 3.5 4.5) = 10.52 at n = 5,
# 10.52 * 2 * 5.25 / 5.5 = 20.09 at n = 6: 0 is out of the 95% interval
# from the sixth negative value on.
if SIGN_A == 0.25:
    for n, want in ((5, 10.524), (6, 20.091)):
        close(f"M_{n} all below", sign_mixture([-1] * n, 0), want, 1e-4)
    r5 = ask("sign", 0.05, 5, *effect[:5])
    r6 = ask("sign", 0.05, 6, *effect[:6])
    if r5["high"] is not None or r6["high"] is None or not r6["high"] < 0:
        failures.append(f"five negatives {r5}, six {r6}: want only the "
                        "sixth to bound the median below 0")
else:
    failures.append(f"the hand-worked sign cases assume a = 1/4, not {SIGN_A}")

# skewness, the adjusted G1 = g1 sqrt(n (n - 1)) / (n - 2), g1 = m3 / m2^1.5
# (SciPy's skew with bias=False), worked by hand: [0, 0, 3] has mean 1,
# m2 = 2, m3 = 2, g1 = 2^-1/2, G1 = sqrt(3); [0, 0, 0, 4] has m2 = 3,
# m3 = 6, g1 = 2 / sqrt(3), G1 = 2; a symmetric set 0.  The standard error
# sqrt(6 n (n - 1) / ((n - 2)(n + 1)(n + 3))): 1.2247 at 3, 1.0142 at 4.
for x, g1, se in (([0, 0, 3], math.sqrt(3), math.sqrt(36 / 24)),
                  ([0, 0, 0, 4], 2.0, math.sqrt(72 / 70)),
                  ([-4, 1, 3, -1, -3, 4], 0.0, None)):
    r = ask("skew", len(x), *x)
    if abs(r["skewness"] - g1) > 1e-12:
        failures.append(f"skewness {x}: got {r['skewness']}, want {g1}")
    if se is not None:
        close(f"skewness se {x}", r["se"], se, 1e-12)
for x in ([0.1, 0.2], [0.3, 0.3, 0.3]):
    if ask("skew", len(x), *x)["skewness"] is not None:
        failures.append(f"a skewness from {x}")


def decide(x, mn=3, mx=20, margin=0.10, alpha=0.05, rule=None):
    words = [rule] if rule else []
    return ask("decide", *words, alpha, margin, mn, mx, len(x), *x)["state"]


def expect(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got}, want {want}")


expect("big effect", decide(effect), "lower")
expect("big effect, higher", decide([-v for v in effect]), "higher")
expect("below min, however clear", decide(effect[:5], mn=6), "running")
expect("no effect, seeds left", decide(noise), "running")
expect("no effect at max", decide(noise, mx=10), "undecided")
tight = [0.004, -0.006, 0.001, 0.003, -0.002, 0.0, 0.005, -0.004]
expect("tight around 0", decide(tight), "equivalent")
expect("tight, margin 0.1%", decide(tight, margin=0.001), "running")
# the rule agrees with its interval: lower exactly when high < 0
r = check_interval(effect[:4], 0.05)
want = "lower" if r["high"] is not None and r["high"] < 0 else "running"
expect("4 seeds of the effect", decide(effect[:4]), want)
expect("t named", decide(effect[:4], rule="t"), want)
# where the rules part: a seed pair far off the others leaves the mean
# unbounded but not the median (11 of 12 below 0: M_12 = 24.0 >= 20; 10 of
# 11: M_11 = 13.4)
outlier = [-0.2, -0.22, 1.9, -0.21, -0.19, -0.2, -0.23, -0.18, -0.2, -0.21,
           -0.24, -0.17]
expect("outlier, t", decide(outlier), "running")
expect("outlier, sign", decide(outlier, rule="sign"), "lower")
expect("sign, higher", decide([-v for v in outlier], rule="sign"), "higher")
expect("sign below min", decide(outlier, mn=13, rule="sign"), "running")
expect("sign, one pair short", decide(outlier[:11], rule="sign"), "running")
expect("sign, no effect at max", decide(noise, mx=10, rule="sign"),
       "undecided")
tight20 = [0.001 * ((7 * i) % 11 - 5) for i in range(20)]
expect("sign, tight around 0", decide(tight20, rule="sign"), "equivalent")

sys.exit(probe.finish())

"""mmstats: the statistics of mmtests-style comparisons, shared by tools/lab/report.py,
lablib.py (the agent's latency histograms) and checks.py, so all of them mark
significance and read histograms by the same rules.

Standard library only (CI runs Debian 12's python3 without extra packages).
"""
import math


def mean_sd(xs):
    """(arithmetic mean, sample stddev) of xs; (None, None) when empty, sd 0.0 for one value."""
    n = len(xs)
    if n == 0:
        return None, None
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
    return m, sd


def significant(a, b):
    """mmtests cidiff: |mean difference| / (1.96 sd_a + 1.96 sd_b) > 1 (bands do not overlap).
    a, b = (n, mean, sd); needs two values on each side."""
    (na, ma, sa), (nb, mb, sb) = a, b
    if na < 2 or nb < 2:
        return False
    half = 1.96 * (sa + sb)
    if half == 0:
        return ma != mb
    return abs(ma - mb) / half > 1


def gain_pct(mean, base, better):
    """Percentage difference to the base as mmtests' compare prints it: positive = better.
    better = 'lower' (times, latencies) or 'higher' (throughput); anything else gives the
    plain change (mean - base) / base. None when either side is missing or the base is 0."""
    if mean is None or base is None or base == 0:
        return None
    change = (mean - base) / abs(base) * 100.0
    return (-change if better == "lower" else change) + 0.0  # + 0.0: no "-0.00%" for the base


def percentile_le(buckets, pct):
    """Upper bound of the bucket holding the pct-th percentile; buckets = [(le, count)] in
    ascending le. Same rule as LiveMetrics::latency_percentile_ns: the first bucket whose
    cumulative count reaches ceil(total * pct / 100). None for an empty histogram."""
    total = sum(c for _, c in buckets)
    if not total:
        return None
    want = max(1, math.ceil(total * pct / 100.0))
    seen = 0
    for le, count in buckets:
        seen += count
        if seen >= want:
            return le
    return None


def log2_buckets(hist):
    """The agent's log2 histogram (bucket i counts values up to 2 << i ns) as [(le_ns, count)]."""
    return [(2 << i, n) for i, n in enumerate(hist)]

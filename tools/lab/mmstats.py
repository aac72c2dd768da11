"""mmstats: the statistics of mmtests-style comparisons, shared by tools/lab/report.py,
lablib.py (the agent's latency histograms) and checks.py, so all of them mark
significance and read histograms by the same rules.

Standard library only (CI runs Debian 12's python3 without extra packages).
"""
import math
from itertools import combinations


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


def rank_p_greater(a, b):
    """Exact one-sided rank test (Mann-Whitney, ties counted half): over every way of
    dealing the pooled values into groups the sizes of a and b, equally likely when nothing
    changed, the share in which b's values exceed a's in at least as many pairs as they do
    here. Per-rep values, so few that the exact distribution is cheap (C(n+m, n) deals).
    Unlike cidiff's bands, which keep their width however many reps there are, it gains
    power with reps; it has none with few: its smallest p is 1 / C(n+m, n) (rank_p_floor)."""
    def above(xs, ys):
        return sum((y > x) + 0.5 * (y == x) for x in xs for y in ys)
    pooled, n = list(a) + list(b), len(a)
    seen = above(a, b)
    deals = hits = 0
    for idx in combinations(range(len(pooled)), n):
        chosen = set(idx)
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        deals += 1
        hits += above(xs, ys) >= seen - 1e-9
    return hits / deals if deals else 1.0


def rank_p_floor(n, m):
    """The smallest p the exact rank test can give with n and m values: 1 / C(n+m, n)."""
    return 1 / math.comb(n + m, n)


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

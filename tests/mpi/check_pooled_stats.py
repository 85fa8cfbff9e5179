"""Usage: check_pooled_stats.py RESIZED.weights MEAN.weights STATS...

A checkpoint of several ranks resumed at another rank count: RESIZED is
the resumed model, MEAN the old ranks' own final average of the same
checkpoint, STATS each old rank's rolling statistics at the checkpoint
(train_synthetic's OUT_PREFIX.RANK.stats). The network's first layer is a
batch-normalised convolution of n filters, whose weights start with its n
biases, n scales, n rolling means and n rolling variances. Passes when the
rolling means are the ranks' mean, the rolling variances the variance of
the ranks' data pooled (the mean of their variances plus the variance of
their means, at least 10 times the tolerance of 1e-6), and every other
parameter equals MEAN's."""
import sys

from compare_weights import params


def first_layer(path):
    with open(path) as f:
        lines = [line.split() for line in f]
    mean = [float(x) for x in lines[0][1:]]
    variance = [float(x) for x in lines[1][1:]]
    assert lines[0][0] == "mean" and lines[1][0] == "variance" and len(mean) == len(variance)
    return mean, variance


def main():
    resized, mean_model = params(sys.argv[1]), params(sys.argv[2])
    ranks = [first_layer(p) for p in sys.argv[3:]]
    n, k = len(ranks[0][0]), len(ranks)
    means = [sum(r[0][c] for r in ranks) / k for c in range(n)]
    spread = [sum((r[0][c] - means[c]) ** 2 for r in ranks) / k for c in range(n)]
    variances = [sum(r[1][c] for r in ranks) / k + spread[c] for c in range(n)]
    bad = []
    for c in range(n):
        if abs(resized[2 * n + c] - means[c]) > 1e-5 * max(1.0, abs(means[c])):
            bad.append("mean %d: %g, the ranks' mean %g" % (c, resized[2 * n + c], means[c]))
        if abs(resized[3 * n + c] - variances[c]) > 1e-6 * variances[c]:
            bad.append("variance %d: %g, pooled %g" % (c, resized[3 * n + c], variances[c]))
    if max(s / v for s, v in zip(spread, variances)) < 1e-5:
        bad.append("the ranks' means hardly differ (the check tells nothing)")
    scale = max(abs(x) for x in mean_model) or 1.0
    rest = [i for i in range(len(resized)) if not 3 * n <= i < 4 * n]
    worst = max(abs(resized[i] - mean_model[i]) for i in rest) / scale
    if len(resized) != len(mean_model) or worst > 1e-6:
        bad.append("the other parameters differ from the mean model's (%.3g)" % worst)
    print("%d ranks, %d channels: largest share of the spread in a pooled variance %.3g; %s"
          % (k, n, max(s / v for s, v in zip(spread, variances)), "; ".join(bad) or "pooled"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

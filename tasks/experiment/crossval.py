"""K-fold cross-validation over all of a task's labelled sentences, and paired significance tests.

With ``compare.folds: K`` (or ``elmo-tasks compare --folds K``) the train, dev and test files are pooled
and cut into K folds by one fixed permutation (``fold_seed``, the same for every source and seed, so
the runs are paired sentence by sentence). Run k tests on fold k, stops early on fold k + 1 (mod K) and
trains on the other K - 2 folds; every sentence is predicted exactly once per seed ("out of fold").

Paired tests between two sources on those out-of-fold predictions (sentence-label tasks):
- McNemar's exact test per seed: the discordant pairs b (only A right) and c (only B right) under
  H0 are Binomial(b + c, 1/2); two-sided p.
- A paired bootstrap over sentences (10,000 resamples) of the accuracy difference B - A, with each
  sentence's correctness averaged over seeds: the 95% interval and the share of resamples with B <= A.
"""
from __future__ import annotations

import numpy as np
from scipy.stats import binomtest, bootstrap


def pooled_splits(data) -> list[str]:
    """The splits (of a ``DataConfig``) whose files are pooled: each file once, so that data.dev = data.train (a
    common tiny setup) does not put every training sentence in the pool twice, in training and held-out folds."""
    repeated = {b for _, b in data.same_files()}
    return [s for s in ("train", "dev", "test") if getattr(data, s) is not None and s not in repeated]


def fold_indices(n: int, k: int, seed: int = 0) -> list[np.ndarray]:
    """K disjoint, near-equal folds of range(n) from one fixed permutation."""
    if not 2 <= k <= n:
        raise ValueError(f"folds must be between 2 and the number of examples ({n}), got {k}")
    perm = np.random.default_rng(seed).permutation(n)
    return [np.sort(f) for f in np.array_split(perm, k)]


def fold_split(pool: list, folds: list[np.ndarray], k: int) -> tuple[dict[str, list], np.ndarray]:
    """Run k's {"train", "dev", "test"} examples and the pool indices of its test fold.

    With two folds there is no separate dev fold: the dev split is then the test fold itself
    (early stopping on test), which is said in the summary; use K >= 3."""
    K = len(folds)
    test = folds[k]
    dev = folds[(k + 1) % K] if K > 2 else folds[k]
    train = np.sort(np.concatenate([f for j, f in enumerate(folds) if j != k and (K == 2 or j != (k + 1) % K)]))
    pick = lambda idx: [pool[i] for i in idx]
    return {"train": pick(train), "dev": pick(dev), "test": pick(test)}, test


def mcnemar(a: np.ndarray, b: np.ndarray) -> dict:
    """Exact McNemar test of two paired 0/1 correctness vectors: counts and two-sided p."""
    a, b = np.asarray(a, bool), np.asarray(b, bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    n = only_a + only_b
    p = 1.0 if n == 0 else float(binomtest(only_b, n, 0.5).pvalue)
    return {"only_a": only_a, "only_b": only_b, "p": p}


def paired_bootstrap(a: np.ndarray, b: np.ndarray, n_resamples: int = 10_000, seed: int = 0) -> dict:
    """Bootstrap over items of mean(b) - mean(a) for paired per-item scores a, b (N,): scipy's percentile
    bootstrap of the per-item differences, resampled 1,000 at a time (memory 1,000 x N)."""
    d = np.asarray(b, float) - np.asarray(a, float)  # (N,)
    res = bootstrap((d,), np.mean, n_resamples=n_resamples, batch=1000, method="percentile", confidence_level=0.95,
                    vectorized=True, random_state=np.random.default_rng(seed))
    means = res.bootstrap_distribution  # (n_resamples,)
    return {"delta": float(d.mean()), "ci95": [float(res.confidence_interval.low), float(res.confidence_interval.high)],
            "p_b_not_better": float((means <= 0).mean())}


def paired_tests(correct: dict[str, dict[int, np.ndarray]], baseline: str) -> list[dict]:
    """Every source against ``baseline``: correct[source][seed] is the (N,) out-of-fold correctness."""
    base = correct[baseline]
    out = []
    for name, by_seed in correct.items():
        if name == baseline:
            continue
        seeds = sorted(set(base) & set(by_seed))
        if not seeds:
            continue
        a = np.mean([base[s] for s in seeds], axis=0)  # (N,) seed-averaged correctness
        b = np.mean([by_seed[s] for s in seeds], axis=0)
        out.append({"a": baseline, "b": name, "seeds": seeds, "accuracy_a": float(a.mean()),
                    "accuracy_b": float(b.mean()), "bootstrap": paired_bootstrap(a, b),
                    "mcnemar": {str(s): mcnemar(base[s], by_seed[s]) for s in seeds}})
    return out

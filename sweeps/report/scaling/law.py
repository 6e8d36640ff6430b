"""The two laws and their robust objective, vectorised over many parameter vectors at once.

- joint law (Hoffmann et al. 2022, approach 3): L(N, D) = E + A N^-alpha + B D^-beta, in the
  log-sum-exp form log L = LSE(a - alpha log N, b - beta log D, e) with a = log A, b = log B,
  e = log E, which keeps every term positive and the optimiser in a well-scaled space;
- compute law, along one tokens-per-parameter ratio: L(C) = E + K C^-gamma, log L = LSE(k - gamma
  log C, e), C = 6 N D.

The objective is the Huber loss (delta 1e-3) of the log-space residuals, summed over rows
(Besiroglu et al. 2024 re-did Hoffmann's fit this way). A `Problem` maps every row to its
parameters through index tables, so one code path serves a design fitted alone and several designs
fitted together with shared exponents (each design its own a, b, e; one alpha, one beta).
`objective(theta)` takes theta of shape (S, P), S parameter vectors at once, and returns the S
values and their analytic gradients (S, P): the starting grid is screened in one call.
"""

from __future__ import annotations

import dataclasses

import numpy as np

DELTA = 1e-3
JOINT = "joint"
COMPUTE = "compute"
# Names of a law's per-design coefficients and its exponents (the shareable ones).
COEFS = {JOINT: ("a", "b", "e"), COMPUTE: ("k", "e")}
EXPONENTS = {JOINT: ("alpha", "beta"), COMPUTE: ("gamma",)}
# Each term: (its coefficient, its exponent, the feature it multiplies); e is the constant term.
TERMS = {JOINT: (("a", "alpha", "log_n"), ("b", "beta", "log_d")), COMPUTE: (("k", "gamma", "log_c"),)}


def features(params: np.ndarray, tokens: np.ndarray) -> dict[str, np.ndarray]:
    params, tokens = np.asarray(params, float), np.asarray(tokens, float)
    return {"log_n": np.log(params), "log_d": np.log(tokens), "log_c": np.log(6.0 * params * tokens)}


def log_predict(law: str, values: dict[str, float], feats: dict[str, np.ndarray]) -> np.ndarray:
    """log L at the given features for one design's parameter values (a, b, e, alpha, beta...)."""
    parts = [values[c] - values[x] * feats[f] for c, x, f in TERMS[law]]
    parts.append(np.full_like(feats["log_n"], values["e"]))
    return np.logaddexp.reduce(np.stack(parts), axis=0)


def predict(law: str, values: dict[str, float], params, tokens) -> np.ndarray:
    return np.exp(log_predict(law, values, features(params, tokens)))


def natural(law: str, values: dict[str, float]) -> dict[str, float]:
    """The reported form: E, A, B, alpha, beta (or E, K, gamma) from the log-space values."""
    out = {"E": float(np.exp(values["e"]))}
    for coef, exponent, _ in TERMS[law]:
        out[coef.upper()] = float(np.exp(values[coef]))
        out[exponent] = float(values[exponent])
    return out


@dataclasses.dataclass
class Problem:
    """The rows of one fit and how each row reads theta.

    names[j] is theta's j-th entry, e.g. "a" (one design) or "a[satformer]" (shared exponents).
    """

    law: str
    names: list[str]
    log_loss: np.ndarray  # (n,)
    feats: list[np.ndarray]  # per term: (n,) feature
    coef: list[np.ndarray]  # per term: (n, P) one-hot of the row's coefficient
    expo: list[np.ndarray]  # per term: (n, P) one-hot of the row's exponent
    const: np.ndarray  # (n, P) one-hot of the row's e

    @classmethod
    def build(cls, law: str, groups: list[str], group_of_row, params, tokens, loss, shared: bool):
        """Rows belong to `groups` (designs) through `group_of_row` (indices into groups); with
        `shared`, the exponents are one entry of theta for all groups."""
        group_of_row = np.asarray(group_of_row, int)
        names = []
        multi = len(groups) > 1
        for g in groups:
            names += [f"{c}[{g}]" if multi else c for c in COEFS[law]]
        for g in [None] if shared or not multi else groups:
            names += [x if g is None else f"{x}[{g}]" for x in EXPONENTS[law]]
        index = {name: j for j, name in enumerate(names)}
        feats_all = features(params, tokens)

        def onehot(base: str) -> np.ndarray:
            plain = not multi or (shared and base in EXPONENTS[law])
            cols = [index[base if plain else f"{base}[{groups[g]}]"] for g in group_of_row]
            m = np.zeros((len(group_of_row), len(names)))
            m[np.arange(len(group_of_row)), cols] = 1.0
            return m

        return cls(
            law=law,
            names=names,
            log_loss=np.log(np.asarray(loss, float)),
            feats=[feats_all[f] for _, _, f in TERMS[law]],
            coef=[onehot(c) for c, _, _ in TERMS[law]],
            expo=[onehot(x) for _, x, _ in TERMS[law]],
            const=onehot("e"),
        )

    def log_pred(self, theta: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """log L per row for each theta (S, P) -> (S, n), and the softmax weight of each part."""
        parts = [
            theta @ c.T - (theta @ x.T) * f for c, x, f in zip(self.coef, self.expo, self.feats, strict=True)
        ]
        parts.append(theta @ self.const.T)
        stacked = np.stack(parts)  # (T+1, S, n)
        top = stacked.max(axis=0)
        w = np.exp(stacked - top)
        total = w.sum(axis=0)
        return top + np.log(total), list(w / total)

    def objective(self, theta: np.ndarray, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Huber(delta) of the log residuals summed over rows, scaled by 1/delta^2 so that the
        optimiser's tolerances see numbers near 1; (S,) values and (S, P) gradients. `counts`
        (S, n) or (n,): how many times each row counts (a bootstrap replicate's multiplicities)."""
        theta = np.atleast_2d(theta)
        pred, weights = self.log_pred(theta)
        r = pred - self.log_loss
        absr = np.abs(r)
        huber = np.where(absr <= DELTA, 0.5 * r**2, DELTA * (absr - 0.5 * DELTA)) / DELTA**2
        g = np.clip(r, -DELTA, DELTA) / DELTA**2  # dHuber/dr
        if counts is not None:
            huber, g = huber * counts, g * counts
        value = huber.sum(axis=1)
        grad = (g * weights[-1]) @ self.const
        for c, x, f, w in zip(self.coef, self.expo, self.feats, weights[:-1], strict=True):
            gw = g * w
            grad += gw @ c - (gw * f) @ x
        return value, grad

    def values(self, theta: np.ndarray, group: str | None = None) -> dict[str, float]:
        """One group's a, b, e, alpha, beta (plain names) from theta."""
        out = {}
        for name, v in zip(self.names, np.asarray(theta, float), strict=True):
            base, _, owner = name.partition("[")
            if not owner or owner[:-1] == group:
                out[base] = float(v)
        return out

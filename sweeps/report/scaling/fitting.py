"""Fitting a ladder: which law its rungs can identify, the robust fit per design (or with the
exponents shared across designs), and the comparison of shared against separate fits.

Speed: the objective and its gradient are analytic and vectorised over starting points
(`law.Problem.objective`), so the whole grid of starts (4,500 for the joint law: a and b in
0..25 step 5, e in -1..1 step 0.5, alpha and beta in 0..2 step 0.5) is screened in one call; the
`top` best are refined together (`refit_many`: reweighted Gauss-Newton, vectorised over starts)
and the best of those is polished by L-BFGS-B to convergence. Bootstrap replicates and held-out
rungs are row weightings of the same problem, refitted all at once from the full fit's optimum.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from scipy.optimize import minimize

from sweeps.report.scaling.law import (
    COEFS,
    COMPUTE,
    DELTA,
    EXPONENTS,
    JOINT,
    TERMS,
    Problem,
    natural,
    predict,
)
from sweeps.report.scaling.table import Ladder
from sweeps.study.ladder import LadderError

AUTO = "auto"
RATIO_TOLERANCE = 0.01  # rungs whose D/N differ by less than 1% share a ratio
BOUNDS = {"a": (-50, 100), "b": (-50, 100), "k": (-50, 100), "e": (-20, 10)}
EXPONENT_BOUNDS = (0.0, 10.0)


def _grid(law: str) -> np.ndarray:
    if law == JOINT:
        axes = {
            "a": np.arange(0, 26, 5.0),
            "b": np.arange(0, 26, 5.0),
            "e": np.arange(-1, 1.01, 0.5),
            "alpha": np.arange(0, 2.01, 0.5),
            "beta": np.arange(0, 2.01, 0.5),
        }
    else:
        axes = {
            "k": np.arange(0, 30.1, 2.5),
            "e": np.arange(-1, 1.01, 0.5),
            "gamma": np.arange(0, 1.51, 0.25),
        }
    order = list(COEFS[law]) + list(EXPONENTS[law])
    return np.array(list(itertools.product(*(axes[name] for name in order))))


GRIDS = {law: _grid(law) for law in (JOINT, COMPUTE)}


def identify(ladder: Ladder, law: str = AUTO) -> tuple[str, list[str]]:
    """The law this ladder's rungs can identify and notes on what was reduced; raises LadderError
    naming the parameters that no fit of these rungs could pin down, and why."""
    return identify_rungs(ladder.rung_keys(), law, ladder.source)


def identify_rungs(rungs: list[tuple[float, float]], law: str = AUTO, where: str = "the ladder"):
    """`identify` on distinct (N, D) rungs."""
    sizes = sorted({n for n, _ in rungs})
    budgets = sorted({d for _, d in rungs})
    ratios = _distinct([d / n for n, d in rungs])
    if len(rungs) == 1:
        raise LadderError(
            f"{where}: one rung (N={sizes[0]:.4g}, D={budgets[0]:.4g}) identifies no law: "
            "E, A, B, alpha and beta all need rungs of several sizes and budgets"
        )
    if law == COMPUTE or (law == AUTO and len(ratios) == 1):
        notes = []
        if len(ratios) == 1:
            notes.append(
                f"alpha and beta (and A, B) cannot be told apart: every rung has D/N = {ratios[0]:.4g}, so "
                "N^-alpha and D^-beta fall together; fitted L(C) = E + K C^-gamma along that ratio instead"
            )
        levels = _distinct([6 * n * d for n, d in rungs])
        if len(levels) < 4:
            raise LadderError(
                f"{where}: E, K and gamma (L(C) = E + K C^-gamma, 3 parameters) need rungs at 4 or more "
                f"distinct compute levels; this ladder has {len(levels)}"
            )
        return COMPUTE, notes
    if len(sizes) == 1:
        raise LadderError(
            f"{where}: alpha and A cannot be identified: every rung has N = {sizes[0]:.4g}, where A N^-alpha "
            "is a constant that E absorbs; add rungs of other sizes"
        )
    if len(budgets) == 1:
        raise LadderError(
            f"{where}: beta and B cannot be identified: every rung has D = {budgets[0]:.4g}, where B D^-beta "
            "is a constant that E absorbs; add rungs of other token budgets"
        )
    if len(rungs) < 6:
        raise LadderError(
            f"{where}: E, A, B, alpha and beta (5 parameters) need 6 or more distinct (N, D) rungs; "
            f"this ladder has {len(rungs)}"
        )
    return JOINT, []


def _distinct(values: list[float]) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or abs(math.log(v / out[-1])) > RATIO_TOLERANCE:
            out.append(v)
    return out


def _bounds(problem: Problem) -> list[tuple[float, float]]:
    return [BOUNDS.get(name.partition("[")[0], EXPONENT_BOUNDS) for name in problem.names]


def minimise(problem: Problem, starts: np.ndarray, top: int = 16) -> tuple[np.ndarray, float]:
    """Screens `starts` (S, P) in one vectorised call, refines the `top` best together
    (`refit_many`), then polishes the best of them with L-BFGS-B to convergence; returns the
    optimum and its objective."""
    values, _ = problem.objective(starts)
    order = np.argsort(values)[:top]
    ones = np.ones((len(order), len(problem.log_loss)))
    refined, refined_values = refit_many(problem, starts[order], ones)
    best = refined[int(np.argmin(refined_values))]

    def fun(theta):
        v, g = problem.objective(theta[None, :])
        return float(v[0]), g[0]

    res = minimize(
        fun,
        best,
        jac=True,
        method="L-BFGS-B",
        bounds=_bounds(problem),
        options={"maxiter": 5000, "ftol": 1e-14, "gtol": 1e-10},
    )
    if res.fun <= float(np.min(refined_values)):
        return res.x, float(res.fun)
    return best, float(np.min(refined_values))


@dataclasses.dataclass
class DesignFit:
    law: str
    values: dict[str, float]  # log-space a, b, e, alpha, beta (or k, e, gamma)
    points: int
    residual_rms: float  # RMS of measured - fitted loss over the design's rows, in loss units

    @property
    def natural(self) -> dict[str, float]:
        return natural(self.law, self.values)

    def predict(self, params, tokens) -> np.ndarray:
        return predict(self.law, self.values, params, tokens)


@dataclasses.dataclass
class LadderFit:
    law: str
    shared: bool
    designs: dict[str, DesignFit]
    notes: list[str]
    objective: float


def _design_problem(ladder: Ladder, law: str, shared: bool) -> tuple[Problem, list[str]]:
    designs = ladder.designs
    group = np.array([designs.index(d) for d in ladder.design])
    return Problem.build(law, designs, group, ladder.params, ladder.tokens, ladder.loss, shared), designs


def _to_theta(
    problem: Problem, per_design: dict[str, dict[str, float]], exponents_of: str | None = None
) -> np.ndarray:
    """theta for `problem` from per-design values; shared exponents from design `exponents_of`
    (default: the mean over designs)."""
    theta = []
    for name in problem.names:
        base, _, owner = name.partition("[")
        if owner:
            theta.append(per_design[owner[:-1]][base])
        elif exponents_of is not None or base in COEFS[problem.law]:
            theta.append(per_design[exponents_of or next(iter(per_design))][base])
        else:
            theta.append(float(np.mean([v[base] for v in per_design.values()])))
    return np.array(theta)


def solve(
    ladder: Ladder, law: str, shared: bool, warm: dict[str, dict[str, float]] | None = None, top: int = 16
):
    """Per-design log-space values and the objective. Separate fits screen their grid (plus `warm`,
    a previous solution, when given); shared fits start from per-design solutions."""
    designs = ladder.designs
    if not shared or len(designs) == 1:
        out, total = {}, 0.0
        for d in designs:
            problem, _ = _design_problem(ladder.only(d), law, False)
            starts = GRIDS[law]
            if warm is not None:
                starts = np.vstack([_to_theta(problem, {d: warm[d]}), starts])
                theta, value = minimise(problem, starts, top=min(top, 4))
            else:
                theta, value = minimise(problem, starts, top=top)
            out[d], total = problem.values(theta), total + value
        return out, total
    separate = warm or solve(ladder, law, False, top=top)[0]
    problem, _ = _design_problem(ladder, law, True)
    starts = [_to_theta(problem, separate)] + [_to_theta(problem, separate, d) for d in designs]
    theta, value = minimise(problem, np.array(starts), top=len(starts))
    return {d: problem.values(theta, d) for d in designs}, value


def fit(ladder: Ladder, law: str = AUTO, shared: bool = False, top: int = 16, warm=None) -> LadderFit:
    """The robust fit of every design of `ladder` (refusing unidentifiable ladders); a shared fit
    starts from `warm` (separate fits' values) when given."""
    for d in ladder.designs:
        identify(ladder.only(d), law)  # every design must identify on its own rows
    chosen, notes = identify(ladder, law)
    values, objective = solve(ladder, chosen, shared, warm=warm, top=top)
    return LadderFit(chosen, shared, _design_fits(ladder, chosen, values), notes, objective)


def _design_fits(ladder: Ladder, law: str, values: dict[str, dict[str, float]]) -> dict[str, DesignFit]:
    out = {}
    for d, v in values.items():
        part = ladder.only(d)
        resid = part.loss - predict(law, v, part.params, part.tokens)
        out[d] = DesignFit(law, v, len(part.loss), float(np.sqrt(np.mean(resid**2))))
    return out


def n_parameters(law: str, designs: int, shared: bool) -> int:
    coefs, exps = len(COEFS[law]), len(EXPONENTS[law])
    return designs * coefs + (exps if shared else designs * exps)


def aic(ladder: Ladder, result: LadderFit) -> float:
    """Akaike's criterion with Gaussian residuals in log loss: n log(RSS/n) + 2k."""
    rss = 0.0
    for d, f in result.designs.items():
        part = ladder.only(d)
        rss += float(np.sum((np.log(part.loss) - np.log(f.predict(part.params, part.tokens))) ** 2))
    n = len(ladder.loss)
    return n * math.log(rss / n) + 2 * n_parameters(result.law, len(result.designs), result.shared)


def compare_shared(ladder: Ladder, law: str = AUTO) -> dict:
    """Shared exponents against separate fits: AIC of each and the held-out rung error (leave one
    rung out, refit from the full fit, predict the rung's rows; RMS in loss units). The held-out
    refits are one batch per problem: each held-out rung is a weighting that zeroes its rows."""
    separate = fit(ladder, law, False)
    shared = fit(ladder, law, True, warm={d: f.values for d, f in separate.designs.items()})
    rung = ladder.rung_of_row()
    kept = []
    for r in range(rung.max() + 1):
        try:
            for d in ladder.designs:
                identify(ladder.take(np.flatnonzero(rung != r)).only(d), separate.law)
            kept.append(r)
        except LadderError:
            pass
    held = np.array([rung == r for r in kept], dtype=float)  # (R, n)
    errors = {}
    for key, full in (("separate", separate), ("shared", shared)):
        warm = {d: f.values for d, f in full.designs.items()}
        err = []
        groups = [ladder.designs] if full.shared else [[d] for d in ladder.designs]
        for group in groups:
            rows = np.isin(ladder.design, group)
            part = ladder.take(np.flatnonzero(rows))
            problem, _ = _design_problem(part, separate.law, full.shared)
            thetas, _ = refit_many(
                problem, _to_theta(problem, {d: warm[d] for d in group}), 1 - held[:, rows]
            )
            for i, theta in enumerate(thetas):
                test = held[i, rows] > 0
                for d in group:
                    sel = test & (part.design == d)
                    values = problem.values(theta, d if len(group) > 1 else None)
                    err += (
                        part.loss[sel] - predict(separate.law, values, part.params[sel], part.tokens[sel])
                    ).tolist()
        errors[key] = err
    out = {"law": separate.law, "rungs_held_out": len(kept), "rungs_skipped": int(rung.max() + 1 - len(kept))}
    for key, result in (("separate", separate), ("shared", shared)):
        out[key] = {
            "aic": aic(ladder, result),
            "parameters": n_parameters(result.law, len(result.designs), result.shared),
            "heldout_rms": float(np.sqrt(np.mean(np.square(errors[key])))) if errors[key] else math.nan,
        }
    out["preferred_by_aic"] = "shared" if out["shared"]["aic"] < out["separate"]["aic"] else "separate"
    return out


def refit_many(problem: Problem, theta: np.ndarray, counts: np.ndarray, iterations: int = 300):
    """Refits of one problem under many row weightings at once (bootstrap replicates: counts
    (S, n)), from theta (P,) or (S, P): iteratively reweighted Gauss-Newton, the Huber loss's
    quadratic majoriser at the current residuals (weights min(1, delta/|r|)), with Levenberg-
    Marquardt damping and a step taken only where it lowers the Huber objective. Vectorised over
    replicates, it replaces one L-BFGS run per replicate (docs/scaling/README.md: agreement)."""
    counts = np.atleast_2d(counts).astype(float)
    theta = np.array(np.broadcast_to(theta, (len(counts), len(problem.names))), dtype=float)
    bounds = np.array(_bounds(problem))
    value, _ = problem.objective(theta, counts)
    damping = np.full(len(theta), 1e-3)
    eye = np.eye(theta.shape[1])[None]
    active = np.arange(len(theta))  # replicates still moving; the batch shrinks as they settle
    for _ in range(iterations):
        th, cn, lam = theta[active], counts[active], damping[active]
        pred, parts = problem.log_pred(th)
        jac = parts[-1][..., None] * problem.const[None]  # (S, n, P): d log L / d theta
        for c, x, f, w in zip(problem.coef, problem.expo, problem.feats, parts[:-1], strict=True):
            jac = jac + w[..., None] * (c - f[:, None] * x)[None]
        r = pred - problem.log_loss
        w = cn * np.minimum(1.0, DELTA / np.maximum(np.abs(r), 1e-300))
        jw = jac * w[..., None]
        hess = np.einsum("snp,snq->spq", jw, jac)
        grad = np.einsum("snp,sn->sp", jw, r)
        diag = np.einsum("spp->sp", hess)[:, :, None] + 1e-12
        step = -np.linalg.solve(hess + lam[:, None, None] * eye * diag, grad[..., None])[..., 0]
        trial = np.clip(th + step, bounds[:, 0], bounds[:, 1])
        trial_value, _ = problem.objective(trial, cn)
        better = trial_value <= value[active]
        gain = (value[active] - trial_value) / np.maximum(value[active], 1e-300)
        theta[active[better]], value[active[better]] = trial[better], trial_value[better]
        damping[active] = np.clip(np.where(better, lam * 0.3, lam * 10), 1e-12, 1e12)
        settled = np.where(better, gain < 1e-13, damping[active] >= 1e8)
        active = active[~settled]
        if not len(active):
            break
    return theta, value


__all__ = [
    "AUTO",
    "COMPUTE",
    "JOINT",
    "TERMS",
    "DesignFit",
    "LadderFit",
    "aic",
    "compare_shared",
    "fit",
    "identify",
    "solve",
]

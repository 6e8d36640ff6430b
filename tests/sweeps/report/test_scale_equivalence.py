"""The vectorised report algorithms against their plain definitions (tests/sweeps/report/oracles.py):
the same ranks, fronts and p_front exactly, the same hypervolume to the bit, on random points and
on points shaped like a study's (ties in exact metrics, duplicate points, seeds and probe rounds,
points missing seeds, maximised objectives)."""

import numpy as np
import pytest

from sweeps.report import dominance, history, stats
from tests.sweeps.report import oracles


def random_points(rng, n, m, ties):
    points = rng.normal(size=(n, m))
    if ties:  # few distinct values: equal coordinates and duplicate points, as exact metrics give
        points = np.round(points * 2) / 2
    return points.tolist()


@pytest.mark.parametrize("m", [1, 2, 3, 4])
@pytest.mark.parametrize("ties", [False, True])
def test_ranks_and_fronts_are_the_definitions(m, ties):
    rng = np.random.default_rng(m + 10 * ties)
    for n in (0, 1, 2, 5, 17, 60):
        points = random_points(rng, n, m, ties)
        assert dominance.nondominated_ranks(points) == oracles.nondominated_ranks(points)
        expected = [r == 0 for r in oracles.nondominated_ranks(points)]
        assert dominance.front_mask(points).tolist() == expected


def test_nan_is_never_dominated_and_dominates_nothing():
    points = [[1.0, 1.0], [float("nan"), 0.0], [2.0, 2.0], [0.5, float("nan")]]
    assert dominance.nondominated_ranks(points) == oracles.nondominated_ranks(points) == [0, 0, 1, 0]


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("ties", [False, True])
def test_a_stack_of_sets_gets_each_sets_front(m, ties, monkeypatch):
    """`front_masks` (p_front's replicates at once) is `front_mask` set by set, NaN included, and
    in memory-bounded slices as in one."""
    rng = np.random.default_rng(m + 10 * ties)
    for n in (1, 2, 7, 30):
        stack = np.asarray([random_points(rng, n, m, ties) for _ in range(40)]).reshape(40, n, m)
        stack[3, 0, 0] = stack[5, n - 1, m - 1] = np.nan
        expected = [dominance.front_mask(points).tolist() for points in stack]
        assert dominance.front_masks(stack).tolist() == expected
        monkeypatch.setattr(dominance, "STACK_CELLS", n * n * m * 3)  # slices of 3 sets
        assert dominance.front_masks(stack).tolist() == expected
        monkeypatch.undo()


@pytest.mark.parametrize("m", [1, 2, 3, 4])
@pytest.mark.parametrize("ties", [False, True])
def test_hypervolume_is_the_slicing_to_the_bit(m, ties):
    rng = np.random.default_rng(100 + m + 10 * ties)
    for n in (0, 1, 3, 12, 40 if m < 4 else 15):
        points = (np.asarray(random_points(rng, n, m, ties)).reshape(n, m) * 0.3 + 0.5).tolist()
        for ref in ([1.0] * m, [1.1] * m, [0.6] * m):
            assert dominance.hypervolume(points, ref) == oracles.hypervolume(points, ref)


@pytest.mark.parametrize("m", [2, 3])
def test_history_is_the_refronting_one_to_the_bit(m):
    rng = np.random.default_rng(m)
    for ties in (False, True):
        points = (np.asarray(random_points(rng, 80, m, ties)) * 0.25 + 0.6).tolist()
        assert history.front_history(points, [1.0] * m) == oracles.history(points, [1.0] * m)


def study_samples(rng, n, seeds, rounds):
    """Points as a study has them: val_loss per seed (some points missing seeds), peak memory
    per seed (exact: one value per design, shared by many points), tokens/s per probe round."""
    out = []
    for i in range(n):
        own = sorted(rng.choice(seeds, size=rng.integers(1, seeds + 1), replace=False).tolist())
        loss = 3.0 - 0.01 * (i % 7) + 0.02 * rng.normal()
        memory = 100.0 + 10.0 * (i % 3)
        speed = {f"r{r}": 1000.0 - 15 * (i % 5) + rng.normal() for r in range(rounds)}
        out.append({
            "val_loss": {s: loss + 0.01 * rng.normal() for s in own},
            "peak_mem_mb": dict.fromkeys(own, memory),
            "tokens_per_s": speed,
        })  # fmt: skip
    return out


@pytest.mark.parametrize(
    ("n", "seeds", "rounds"),
    [(2, 2, 3), (6, 3, 5), (12, 5, 5), (25, 1, 4), (9, 11, 2)],  # 11 seeds: numpy's pairwise sums
)
def test_p_front_is_the_loop_over_points(n, seeds, rounds):
    rng = np.random.default_rng(n * 100 + seeds)
    samples = study_samples(rng, n, seeds, rounds)
    metrics = ["val_loss", "peak_mem_mb", "tokens_per_s"]
    directions = ["minimize", "minimize", "maximize"]
    robust = frozenset({"tokens_per_s"})
    for picked in (metrics, metrics[:2]):
        args = (samples, picked, directions[: len(picked)])
        fast = stats.p_front(*args, replicates=150, robust=robust)
        assert fast == oracles.p_front(*args, replicates=150, robust=robust)


def test_p_front_on_random_samples_with_robust_and_plain_means():
    rng = np.random.default_rng(7)
    samples = [{"a": {s: rng.normal() for s in range(rng.integers(1, 9))},
                "b": {s: float(rng.integers(0, 3)) for s in range(rng.integers(1, 9))}}
               for _ in range(30)]  # fmt: skip
    for robust in (frozenset(), frozenset({"a"}), frozenset({"a", "b"})):
        args = (samples, ["a", "b"], ["minimize", "maximize"])
        assert stats.p_front(*args, replicates=100, robust=robust) == oracles.p_front(
            *args, replicates=100, robust=robust
        )


def test_a_studys_table_and_files_are_the_same_as_with_the_old_algorithms(monkeypatch, tmp_path):
    """fronts.compute over a grid study's trials (7 designs x 3 seeds, paired against the baseline,
    exact memory ties), then the table and CSV, with the new algorithms and with the oracles."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import TrialState, create_trial

    from sweeps.report import fronts
    from sweeps.report.outputs import table_text, write_files

    rng = np.random.default_rng(3)
    designs = ["base", "sat", "res", "dense", "mudd", "hyper", "tanh"]
    trials = []
    for d, design in enumerate(designs):
        for seed in range(3):
            loss = 3.0 - 0.02 * d + 0.01 * seed + 0.01 * rng.normal()
            trials.append(create_trial(
                state=TrialState.COMPLETE, values=[loss, 100.0 + 10 * (d % 3)], params={"design": design},
                distributions={"design": CategoricalDistribution(designs)},
                user_attrs={"point": design, "seed": seed},
            ))  # fmt: skip
    objectives = [("val_loss", "minimize"), ("peak_mem_mb", "minimize")]
    new = fronts.compute(trials, objectives, "base", replicates=300)
    monkeypatch.setattr(fronts, "nondominated_ranks", oracles.nondominated_ranks)
    monkeypatch.setattr(fronts, "hypervolume", oracles.hypervolume)
    monkeypatch.setattr(stats, "p_front", oracles.p_front)
    old = fronts.compute(trials, objectives, "base", replicates=300)
    assert new == old
    assert table_text(new) == table_text(old)
    write_files(new, tmp_path / "new")
    write_files(old, tmp_path / "old")
    assert (tmp_path / "new" / "pareto.csv").read_text() == (tmp_path / "old" / "pareto.csv").read_text()

"""Every metric a trial or a sweep records, once: what it is and how each consumer treats it.

One `Metric` record per name. The trainer's final metrics (`trial_names`), the names
a study may use as objectives or as the scheduler's metric, how data-parallel workers' values
combine (`trainers.distributed`), which metrics are exact or timed in rounds (the fronts'
statistics and adaptive seeds), and how the fronts show them are all read from `TABLE`. Adding
an objective is one entry here (plus the code that measures it).

Fields of a record:

- `direction`: which way is better; a study's objective takes it unless the file says otherwise.
- `varies`: `seed` (a new seed gives a new number: losses), `exact` (the same number for every
  seed of an architecture: memory counted by the allocator, parameters, FLOPs; one pair decides
  a verdict and more seeds cannot change it) or `rounds` (timed by the cost probe in interleaved
  rounds: its samples are the rounds, not the seeds).
- `statistic`: how a point's samples are summarised: `mean` (95% t interval), or `median`
  (order-statistic interval) for timing rounds, where a busy neighbour makes outliers.
- `workers`: how the values of a data-parallel run's workers combine: `global` (computed over
  the global batch already, every step), `max` / `min` / `sum` / `mean` (all-reduced at the end of
  training), `same` (identical on every worker: the model's shape), `rank0` (rank 0's own reading);
  None for what the workers do not measure (the cost probe's).
- `shown`: `relative` (as a ratio to the reference point in the plain-language conclusions) or
  `absolute` (as a difference with its interval).
- `objective`: a study may name it as an objective or as the scheduler's metric.
- `source`: `trial` (`trainers.fit` returns it), `data_parallel` (returned by data-parallel runs
  only), `probe` (the sweep's cost probe adds it, `sweeps.run.probe`) or `eval` (the
  lm-evaluation-harness on the final weights, a study's `evals:` section; `eval_metric`).
- `needs_data`: the `trial.data.kind` (or kinds) it needs (None: any).
- `recall`: which of the recall probe's measurements it is (`trainers.recall`; None: not the
  probe's): `text` (copies and lookups in the text's own symbols), `reserved` (lookups in the
  records' reserved symbols) or `curve` (read from the reserved lookups' curve over training).
- `test`: what judges a paired comparison of it (`sweeps.report.verdicts.judge`): `t` (a paired
  t over seeds), `sign` (timing rounds), `exact` (no test: any difference decides), or for a
  bounded, bimodal or censored metric `permutation` (exact paired permutation test, the interval
  within the metric's range) or `logrank` (time to an event, censored at the budget;
  `sweeps.report.exact_tests`). Left empty, the one `varies` implies (seed: t, rounds: sign,
  exact: exact).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Literal

Direction = Literal["minimize", "maximize"]
VARIES = ("seed", "exact", "rounds")
STATISTICS = ("mean", "median")
WORKERS = ("global", "max", "min", "sum", "mean", "same", "rank0")
ALL_REDUCED = ("max", "min", "sum", "mean")  # what trainers.distributed reduces at the end
SHOWN = ("relative", "absolute")
SOURCES = ("trial", "data_parallel", "probe", "eval")
TESTS = ("t", "sign", "exact", "permutation", "logrank")
IMPLIED_TEST = {"seed": "t", "rounds": "sign", "exact": "exact"}


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    direction: Direction | None  # None: no better way (not an objective)
    varies: Literal["seed", "exact", "rounds"]
    workers: Literal["global", "max", "min", "sum", "mean", "same", "rank0"] | None
    statistic: Literal["mean", "median"] = "mean"
    shown: Literal["relative", "absolute"] = "absolute"
    objective: bool = False
    source: Literal["trial", "data_parallel", "probe"] = "trial"
    needs_data: str | tuple[str, ...] | None = None
    recall: Literal["text", "reserved", "curve"] | None = None
    test: str = ""

    def __post_init__(self):
        if not self.test:  # frozen: the implied test is set once, here
            object.__setattr__(self, "test", IMPLIED_TEST.get(self.varies, ""))

    def problems(self) -> list[str]:
        """What makes this record inconsistent ([] when none)."""
        out = []
        for field, allowed in (("varies", VARIES), ("statistic", STATISTICS), ("shown", SHOWN),
                               ("source", SOURCES)):  # fmt: skip
            if getattr(self, field) not in allowed:
                out.append(f"{field}: given {getattr(self, field)!r}; allowed: {', '.join(allowed)}")
        if self.workers not in (*WORKERS, None):
            out.append(f"workers: given {self.workers!r}; allowed: {', '.join(WORKERS)} or None")
        if self.test not in TESTS:
            out.append(f"test: given {self.test!r}; allowed: {', '.join(TESTS)}")
        elif self.varies != "seed" and self.test != IMPLIED_TEST.get(self.varies):
            out.append(f"test: {self.varies} metrics are judged by the {IMPLIED_TEST[self.varies]} test")
        if self.objective and self.direction is None:
            out.append("an objective needs a direction")
        if (self.varies == "rounds") != (self.statistic == "median"):
            out.append("timing rounds, and only they, are summarised by their median")
        if (self.source == "probe") != (self.workers is None):
            out.append("the workers reduce every metric but the probe's")
        return [f"metric {self.name}: {p}" for p in out]


def _memory(name: str, objective: bool = False, shown: str = "absolute", source: str = "trial") -> Metric:
    """Tensor memory of one training step, counted exactly (trainers.step_memory.StepMemoryMeter): a
    data-parallel run's is its largest worker's."""
    return Metric(name, "MiB", "minimize", "exact", "max", shown=shown, objective=objective, source=source)


def _exact_shape(name: str, unit: str, shown: str = "absolute") -> Metric:
    """A count the model's shape fixes: the same on every seed and every worker."""
    return Metric(name, unit, "minimize", "exact", "same", shown=shown, objective=True)


def _loss(name: str, unit: str) -> Metric:
    """Averaged over the global batch (the module reduces it over workers every step)."""
    return Metric(name, unit, "minimize", "seed", "global", objective=True)


def _probe(name: str, unit: str) -> Metric:
    """Timed by the sweep's cost probe beside the baseline, in interleaved rounds."""
    return Metric(
        name, unit, "maximize", "rounds", None, statistic="median", shown="relative", objective=True,
        source="probe",
    )  # fmt: skip


def _recall(name: str, unit: str, direction: Direction, recall: str = "text", test: str = "") -> Metric:
    """The recall probe's (trainers.recall): the same items for every trial, measured on the final
    weights, which every data-parallel worker holds alike. Its records' reserved symbols are
    planted in text data only (`data.records`)."""
    data = ("text", "tokens") if recall == "text" else "text"
    return Metric(
        name, unit, direction, "seed", "same", objective=True, needs_data=data, recall=recall, test=test
    )


ENTRIES = (
    _loss("val_loss", "nats/token"),
    _loss("val_ppl", "perplexity"),
    # bits per UTF-8 byte of the validation text: comparable across tokenizers, where val_loss is not
    Metric(
        "val_bpb", "bits/byte", "minimize", "seed", "global", objective=True, needs_data=("text", "tokens")
    ),
    _loss("train_loss", "nats/token"),
    Metric("mqar_acc", "fraction", "maximize", "seed", "global", objective=True, needs_data="mqar"),
    # the in-context recall probe on the validation text (trainers.recall; docs/results.md)
    _recall("copy_loss", "nats/token", "minimize"),
    _recall("copy_acc", "fraction", "maximize"),
    _recall("copy_gain", "nats/token", "maximize"),
    _recall("recall_loss", "nats/token", "minimize"),
    _recall("recall_acc", "fraction", "maximize"),
    # lookups in the records' reserved symbols (data.records.symbols: reserved), and when they emerge
    _recall("reserved_recall_loss", "nats/token", "minimize", "reserved"),
    _recall("reserved_recall_acc", "fraction", "maximize", "reserved"),
    # bounded and bimodal (chance or ~1), and censored at the budget: tests that fit them
    _recall("reserved_recall_auc", "fraction", "maximize", "curve", test="permutation"),
    _recall("reserved_recall_tokens", "tokens", "minimize", "curve", test="logrank"),
    Metric("reserved_recall_emerged", "0/1", "maximize", "seed", "same", needs_data="text", recall="curve"),
    _probe("tokens_per_s", "tokens/s"),
    _probe("tokens_per_s_ratio", "x the baseline's"),
    _memory("peak_mem_mb", objective=True, shown="relative"),
    _memory("mem_activations_mb", objective=True, shown="relative"),
    _exact_shape("params_total", "parameters", shown="relative"),
    _exact_shape("params_design", "parameters"),
    _exact_shape("flops_per_token", "FLOPs/token"),
    Metric("tokens", "tokens", None, "exact", "global"),
    # the trial's own clock and resident set: shared with whatever else runs, informational
    Metric("train_tokens_per_s", "tokens/s", "maximize", "seed", "rank0"),
    _memory("mem_params_mb"),
    _memory("mem_grads_mb"),
    _memory("mem_optimizer_mb"),
    _memory("mem_ddp_buckets_mb", source="data_parallel"),
    Metric("rss_peak_mb", "MiB", "minimize", "seed", "rank0"),
)


def _table(entries: Iterable[Metric]) -> dict[str, Metric]:
    table: dict[str, Metric] = {}
    for m in entries:
        if m.name in table:
            raise ValueError(f"metric {m.name} is in trainers.metrics twice")
        if problems := m.problems():
            raise ValueError("; ".join(problems))
        table[m.name] = m
    return table


TABLE: dict[str, Metric] = _table(ENTRIES)
# The cost probe's absolute speed, the one metric that is a time axis (equal-time losses, the
# trial timeout) and whose probe baseline carries the spread of its own timings.
TOKENS_PER_S = "tokens_per_s"
# The objectives of a study that names none (directions from the table).
DEFAULT_OBJECTIVES = ("val_loss", TOKENS_PER_S, "peak_mem_mb")


def get(name: str) -> Metric | None:
    """The record of `name` (None for a name the table does not hold: a test's made-up metric)."""
    return TABLE.get(name) or eval_metric(name)


def names(**where) -> tuple[str, ...]:
    """Names of the metrics whose fields equal `where` (e.g. `objective=True`), in table order."""
    return tuple(n for n, m in TABLE.items() if all(getattr(m, k) == v for k, v in where.items()))


def objective_names() -> tuple[str, ...]:
    return names(objective=True)


def trial_names() -> tuple[str, ...]:
    """What every trial's `trainers.fit` returns, whatever its data and workers."""
    return names(source="trial", needs_data=None)


def recall_names(*kinds: str) -> tuple[str, ...]:
    """The recall probe's metrics of the given `recall` kinds (text, reserved, curve), table order."""
    return tuple(n for n, m in TABLE.items() if m.recall in kinds)


def is_exact(name: str) -> bool:
    m = get(name)
    return m is not None and m.varies == "exact"


def is_timed(name: str) -> bool:
    """Timed by the cost probe in rounds (its samples are the rounds)."""
    m = get(name)
    return m is not None and m.varies == "rounds"


def varies_with_seed(name: str) -> bool:
    """More seeds can move its verdict (unknown names: assumed so)."""
    m = get(name)
    return m is None or m.varies == "seed"


def test_of(name: str) -> str:
    """The test that judges a paired comparison of `name` (unknown names: the t test)."""
    m = get(name)
    return "t" if m is None else m.test


def is_bounded_fraction(name: str) -> bool:
    """A fraction (0..1): a difference of two lies in [-1, 1]."""
    m = get(name)
    return m is not None and m.unit == "fraction"


def is_relative(name: str) -> bool:
    m = get(name)
    return m is not None and m.shown == "relative"


def robust(names_: Iterable[str]) -> frozenset[str]:
    """Those of `names_` summarised by their median (timing rounds)."""
    return frozenset(n for n in names_ if (m := get(n)) is not None and m.statistic == "median")


def probe_names() -> tuple[str, ...]:
    return names(source="probe")


def data_issue(name: str, data_kind: str) -> str | None:
    """Why `name` cannot be measured on data of `data_kind` (None: it can)."""
    m = get(name)
    kinds = (
        (m.needs_data,) if m is not None and isinstance(m.needs_data, str) else getattr(m, "needs_data", None)
    )
    if kinds is None or data_kind in kinds:
        return None
    return f"given {name!r} with trial.data.kind {data_kind!r}; needs {' or '.join(kinds)}"


def worker_reductions(keys: Iterable[str]) -> dict[str, list[str]]:
    """The keys of `keys` all-reduced over data-parallel workers, by operation (`ALL_REDUCED`),
    in the order given; the others are rank 0's (global, same on every worker, or its own)."""
    out: dict[str, list[str]] = {}
    for key in keys:
        m = get(key)
        if m is not None and m.workers in ALL_REDUCED:
            out.setdefault(m.workers, []).append(key)
    return out


# --- lm-eval task metrics: a family of names, not entries ----------------------------------------
# `eval/<task>/<metric>` (`.<filter>` appended for an lm-eval filter other than `none`; the name
# `evals.harness.metric_name` writes): scored by the harness on a trial's final weights when its
# study has an `evals:` section. Their direction is lm-eval's to say per task, so a study states it.
EVAL_PREFIX = "eval/"


def eval_parts(name: str) -> tuple[str, str] | None:
    """(task, metric) of an `eval/<task>/<metric>` name; None for any other name."""
    parts = name.split("/") if name.startswith(EVAL_PREFIX) else []
    return (parts[1], parts[2]) if len(parts) == 3 and parts[1] and parts[2] else None


def eval_metric(name: str) -> Metric | None:
    """The record of an lm-eval task metric: seed-varying (a paired verdict like val_loss), scored
    once on rank 0's final weights, no direction of its own. None for any other name."""
    if eval_parts(name) is None:
        return None
    return Metric(name, "lm-eval score", None, "seed", "rank0", source="eval")

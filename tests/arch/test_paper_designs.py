"""The paper's design forms have one home (`arch.paper_designs`): the paper's studies name the same
forms under the same names, and each is a valid residual config."""

from pathlib import Path

import yaml

from arch import ModelConfig
from arch.paper_designs import BASELINE, PAPER_DESIGNS
from tests.arch.design_examples import DESIGN_EXAMPLES

PAPER_STUDY = Path(__file__).resolve().parents[2] / "studies" / "paper" / "base.yaml"


def test_the_paper_study_sweeps_exactly_the_paper_designs_under_their_names():
    choices = yaml.safe_load(PAPER_STUDY.read_text())["space"]["model.residual"]["choices"]
    assert list(choices) == list(PAPER_DESIGNS)
    assert choices == PAPER_DESIGNS


def test_every_paper_design_is_a_valid_residual_config_and_the_baseline_is_the_plain_stream():
    kinds = {name: ModelConfig.from_dict({"residual": r}).residual.kind for name, r in PAPER_DESIGNS.items()}
    assert kinds[BASELINE] == "none"
    assert sorted(set(kinds.values())) == [
        "denseformer",
        "hyper_connections",
        "muddformer",
        "none",
        "value_residual",
    ]


def test_the_design_harness_runs_every_paper_design_under_its_name():
    examples = dict(DESIGN_EXAMPLES)
    assert len(examples) == len(DESIGN_EXAMPLES)  # test ids are unique
    assert {name: examples.get(name) for name in PAPER_DESIGNS} == PAPER_DESIGNS

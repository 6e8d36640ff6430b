"""Every design of the shared harness, exported and loaded by transformers in a process without
this project: arch's logits, and greedy `generate` equal to `arch.generate` (left-padded batch)."""

import pytest
import torch

pytest.importorskip("transformers", reason="the interop extra (pip install -e '.[interop]')")
pytest.importorskip("safetensors", reason="the interop extra (pip install -e '.[interop]')")

from arch.generate import generate  # noqa: E402
from tests.arch.design_examples import DESIGN_EXAMPLES  # noqa: E402
from tests.arch.test_decoding import perturbed  # noqa: E402
from tests.arch.test_designs import tokens  # noqa: E402
from tests.trainers.interop.fresh_process import run_fresh  # noqa: E402
from trainers.interop.export import write_export  # noqa: E402

NEW_TOKENS = 6
pytestmark = pytest.mark.xdist_group("export")  # one worker builds the fixture (conftest)

PROMPTS = (9, 3)  # prompt lengths: the shorter is left-padded


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{design: (arch model, the fresh process's answers)} for every design example."""
    root = tmp_path_factory.mktemp("exports")
    models, jobs = {}, {}
    for i, (name, residual) in enumerate(DESIGN_EXAMPLES):
        model = perturbed(residual, seed=i, scale=0.5).float()
        folder = write_export(model, root / name / "hf")  # one name: transformers imports the code once
        prompts = [tokens(batch=1, length=n, seed=i + n)[0] for n in PROMPTS]
        ids = torch.zeros(len(prompts), max(PROMPTS), dtype=torch.long)
        mask = torch.zeros_like(ids)
        for b, p in enumerate(prompts):
            ids[b, ids.shape[1] - len(p) :], mask[b, ids.shape[1] - len(p) :] = p, 1
        models[name] = (model, prompts)
        jobs[name] = {"folder": str(folder), "tokens": tokens(batch=2, length=12, seed=i),
                      "prompt_ids": ids, "prompt_mask": mask, "max_new_tokens": NEW_TOKENS}  # fmt: skip
    answers = run_fresh(jobs, root / "child")
    return {name: (models[name], jobs[name], answers[name]) for name in models}


@pytest.mark.parametrize("name", [n for n, _ in DESIGN_EXAMPLES])
def test_transformers_gives_archs_logits_without_the_project(exported, name):
    (model, _), job, answer = exported[name]
    with torch.no_grad():
        expected = model(job["tokens"])
    torch.testing.assert_close(answer["logits"], expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", [n for n, _ in DESIGN_EXAMPLES])
def test_greedy_generate_equals_arch_generate(exported, name):
    (model, prompts), _, answer = exported[name]
    expected = generate(model, [p.tolist() for p in prompts], NEW_TOKENS)
    assert answer["generated"].tolist() == expected

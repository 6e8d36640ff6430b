"""The lm-eval adapter's answers against the model's own forward (no training, no data). A byte
tokenizer's trial trained on a text corpus: every context starts with a line break (START)."""

import math

import pytest
import torch

pytest.importorskip("lm_eval")

from lm_eval.api.instance import Instance  # noqa: E402
from lm_eval.api.registry import get_model  # noqa: E402

from arch import build_model  # noqa: E402
from arch.generate import generate  # noqa: E402
from evals.adapter import MODEL_NAME, SatsweepLM  # noqa: E402
from trainers.data.tokenizer import ByteTokenizer  # noqa: E402

WINDOW = 24
START = ord("\n")  # the token before every line of a text corpus: each context starts with it


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = {"vocab_size": 256, "d_model": 32, "n_layers": 2, "n_heads": 2, "d_ff": 64, "max_seq_len": WINDOW,
           "residual": {"kind": "value_residual", "mode": "gated"}}  # fmt: skip
    m = build_model(cfg).eval()
    with torch.no_grad():  # gates far from their near-zero init, so the tap matters
        m.residual.mix.weight.normal_(std=0.5)
    return m


@pytest.fixture(scope="module")
def lm(model):
    return SatsweepLM.from_model(model, ByteTokenizer(), batch_size=3)


def ids(text: str) -> list[int]:
    return list(text.encode())


def own_logprob(model, context: list[int], continuation: list[int]) -> tuple[float, bool]:
    """log p(continuation | context) from one forward of the last window+1 tokens alone."""
    whole = (context + continuation)[-(WINDOW + 1) :]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([whole[:-1]]))[0].double(), -1)
    n = len(continuation)
    rows = logp[len(whole) - 1 - n :]
    target = torch.tensor(continuation)
    return rows.gather(-1, target[:, None]).sum().item(), bool((rows.argmax(-1) == target).all())


def requests(kind, args):
    return [Instance(request_type=kind, doc={}, arguments=a, idx=i) for i, a in enumerate(args)]


def test_registered_under_the_project_name():
    assert get_model(MODEL_NAME) is SatsweepLM


def test_loglikelihood_equals_the_models_own_forward_with_left_truncation(lm, model):
    pairs = [
        ("To be, or not to", " be"),
        ("x", "yz"),
        ("a long context that is cut on the left to the window", " end"),  # > WINDOW tokens
        ("", "empty context"),
        ("trailing space ", "moves"),
    ]
    got = lm.loglikelihood(requests("loglikelihood", pairs))
    for (context, continuation), (logp, greedy) in zip(pairs, got, strict=True):
        if context == "":
            ctx, cont = [START], ids(continuation)
        else:
            stripped = context.rstrip()
            ctx, cont = [START, *ids(stripped)], ids(context[len(stripped) :] + continuation)
        want, want_greedy = own_logprob(model, ctx, cont)
        assert logp == pytest.approx(want, abs=1e-4)
        assert greedy == want_greedy


def test_is_greedy_is_true_for_the_models_own_argmax_continuation(lm, model):
    context = [START, *ids("abc")]
    with torch.no_grad():
        continuation = generate(model, [context], max_new_tokens=4)[0]
    text = bytes(continuation).decode("latin-1")
    if any(b > 127 for b in continuation):
        pytest.skip("the greedy bytes are not ASCII")
    (_, greedy), (_, other) = lm.loglikelihood(requests("loglikelihood", [("abc", text), ("abc", "zzzz")]))
    assert greedy
    assert other == (continuation == ids("zzzz"))


def test_rolling_loglikelihood_predicts_every_token_once(lm, model):
    short = "hello world"
    long = "".join(chr(97 + i % 26) for i in range(WINDOW + 7))  # two windows
    got = lm.loglikelihood_rolling(requests("loglikelihood_rolling", [(short,), (long,)]))
    want_short = own_logprob(model, [START], ids(short))[0]
    tokens = ids(long)
    # window 1: the prefix then tokens[:WINDOW - 1] predict tokens[:WINDOW]; window 2: the last
    # WINDOW inputs predict the 7 tokens left
    want_long = (
        own_logprob(model, [START], tokens[:WINDOW])[0]
        + own_logprob(model, tokens[-WINDOW - 1 : -7], tokens[-7:])[0]
    )
    assert got[0] == pytest.approx(want_short, abs=1e-4)
    assert got[1] == pytest.approx(want_long, abs=1e-4)
    assert all(math.isfinite(v) for v in got)


def test_generate_until_is_greedy_decoding_cut_at_the_stop_string(lm, model):
    contexts = ["The ", "an apple a day"]
    got = lm.generate_until(
        requests("generate_until", [(c, {"until": ["e"], "max_gen_toks": 6}) for c in contexts])
    )
    for context, text in zip(contexts, got, strict=True):
        seq = [START, *ids(context)]
        prompt = len(seq)
        with torch.no_grad():
            for _ in range(6):
                seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        full = ByteTokenizer().decode(seq[prompt:])
        assert text == full.split("e", 1)[0]
        assert "e" not in text


def test_the_context_start_is_the_tokenizers_and_says_why(lm, model):
    assert lm.context_start == {"id": START, "token": "\n", "why": ByteTokenizer().start.why}
    assert lm.prefix_token_id == START and lm.tok_encode("ab") == [START, 97, 98]
    assert lm.tok_encode("ab", add_special_tokens=False) == [97, 98]
    other = SatsweepLM.from_model(model, ByteTokenizer(), prefix=" ")
    assert other.context_start == {"id": 32, "token": " ", "why": "the prefix argument"}
    with pytest.raises(ValueError, match="prefix 'ab' is 2 tokens; it must be one"):
        SatsweepLM.from_model(model, ByteTokenizer(), prefix="ab")


def test_generate_until_refuses_unknown_generation_arguments(lm):
    with pytest.raises(ValueError, match=r"\['num_beams'\] are not supported; allowed"):
        lm.generate_until(requests("generate_until", [("x", {"until": ["\n"], "num_beams": 4})]))


def test_sampled_generation_is_reproducible_for_a_seed(model):
    def sample(seed):
        lm = SatsweepLM.from_model(model, ByteTokenizer(), seed=seed)
        args = {"until": ["\n\n"], "max_gen_toks": 8, "do_sample": True, "temperature": 1.0}
        return lm.generate_until(requests("generate_until", [("abc", args)] * 2))

    assert sample(1) == sample(1)
    assert sample(1) != sample(2)

"""evals.suites: suite names, and how offline is decided (no lm-eval needed)."""

import socket

import pytest

from evals import suites


def test_suites_expand_in_order_without_duplicates():
    assert suites.expand(["piqa", "zero_shot", "my_task"]) == ["piqa"] + [
        t for t in suites.SUITES["zero_shot"] if t != "piqa"
    ] + ["my_task"]


@pytest.mark.parametrize(
    ("user", "hub_answers", "offline"),
    [
        ({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": None}, True, True),  # the user's flag wins
        ({"HF_HUB_OFFLINE": None, "HF_DATASETS_OFFLINE": None}, False, True),  # no answer: offline
        ({"HF_HUB_OFFLINE": None, "HF_DATASETS_OFFLINE": "0"}, True, False),
    ],
)
def test_offline_is_the_users_flag_or_an_unreachable_hub_and_both_flags_say_it(
    monkeypatch, user, hub_answers, offline
):
    def connect(address, timeout):
        if not hub_answers:
            raise OSError("unreachable")
        return socket.socket()

    monkeypatch.setattr(suites, "USER_FLAGS", user)
    monkeypatch.setattr(suites.socket, "create_connection", connect)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as trainers.data.tokenizer's import leaves it
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")  # both restored after the test
    assert suites.ensure_offline_mode() is offline
    for flag in suites.OFFLINE_FLAGS:
        assert suites.os.environ[flag] == ("1" if offline else "0")

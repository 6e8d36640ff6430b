"""Offline, with a private datasets cache: the evals tests never reach the hub, and a dataset found
in the user's own cache cannot make the offline refusal pass or fail."""

import os
import tempfile

os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="satsweep-hf-datasets-")


import pytest  # noqa: E402  (after the flags: nothing may import datasets before them)

from tests.evals.toy import write_tasks  # noqa: E402


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    """A folder with the toy lm-eval tasks toy_choice and toy_recall (tests.evals.toy)."""
    return write_tasks(tmp_path_factory.mktemp("tasks"))

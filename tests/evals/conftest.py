"""Offline, with a private datasets cache: the evals tests never reach the hub, and a dataset found
in the user's own cache cannot make the offline refusal pass or fail."""

import os
import tempfile

os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="satsweep-hf-datasets-")

"""Offline, with private caches: transformers' copies of an export's modeling code and the
datasets cache of the local lm-eval tasks stay out of the user's home (as tests/evals does)."""

import os
import tempfile

os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp(prefix="satsweep-hf-datasets-")
os.environ["HF_MODULES_CACHE"] = tempfile.mkdtemp(prefix="satsweep-hf-modules-")

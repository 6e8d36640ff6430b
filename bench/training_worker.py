"""One training run for `bench.training_equivalence`, inside the tree of the revision under test.

Run as a script (`python bench/training_worker.py SPEC_JSON`, cwd and PYTHONPATH the revision's
tree), not as a module: it must import that tree's `trainers`, not this checkout's. SPEC_JSON:
{"trial": the trial mapping, "patch": a Python file run first (monkeypatches) or null}.
Prints one line, `RESULT {json}`: the final metrics of `trainers.fit.fit`.
"""

import json
import os
import runpy
import sys
import time

# sys.path[0] is this script's folder (bench/): put the revision's tree there instead, so that
# nothing of this checkout shadows it.
sys.path[0] = os.getcwd()


def main(spec: dict) -> dict:
    if spec.get("patch"):
        runpy.run_path(spec["patch"], run_name="__patch__")
    # After the patch: a `from X import Y` in trainers binds what the patch put there.
    from trainers.fit import fit

    start = time.perf_counter()
    metrics = fit(spec["trial"])
    metrics["wall_s"] = time.perf_counter() - start
    return metrics


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    print("RESULT " + json.dumps(result), flush=True)

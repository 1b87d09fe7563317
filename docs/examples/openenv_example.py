"""Drive a running ``wmrl serve`` with OpenEnv's own client.

In one shell, serve the MLE-Dojo env with fused rewards (one calibrator for every session)::

    wmrl serve --env wmrl/MLEDojo-v0 --reward fused --port 8000

In another, run this file (the URL comes from argv, else ``WMRL_SERVER_URL``)::

    python docs/examples/openenv_example.py http://127.0.0.1:8000

The client needs only ``openenv`` (``pip install openenv==0.10.0``): it sends dicts and gets
dicts back. ``observation["text"]`` is the prompt or the feedback; ``metadata`` is the env's
``info`` (the stream, the world-model and real scores, the anchor weight, the cost) plus
``calibrator_pairs``, the shared calibrator's pair count after the step.
"""

import os
import sys

from openenv import GenericEnvClient

URL = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("WMRL_SERVER_URL", "http://127.0.0.1:8000")

# An agent's response: a short analysis, then one fenced python block (the script that runs).
RESPONSE = """The trivial baseline: submit the sample submission unchanged.

```python
import shutil

shutil.copy("data/sample_submission.csv", "submission.csv")
```
"""


def main() -> None:
    # A sandboxed run can take a task's whole time limit: wait longer than OpenEnv's 60 s default.
    with GenericEnvClient(base_url=URL, message_timeout_s=600).sync() as env:
        for seed in range(3):
            result = env.reset(seed=seed)  # or reset(task_id=..., group_id=...)
            print(result.observation["text"].splitlines()[0])
            result = env.step({"response": RESPONSE})
            info = result.metadata
            print(f"  reward {result.reward:.3f}, done {result.done}, stream {info['stream']}, "
                  f"world model {info['wm_score_raw']}, real {info['real_score']}, "
                  f"anchor weight {info['fusion_weight']}, calibrator pairs {info['calibrator_pairs']}")
            print("  " + result.observation["text"].strip().replace("\n", "\n  "))


if __name__ == "__main__":
    main()

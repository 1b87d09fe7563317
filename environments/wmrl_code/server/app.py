"""The Space's FastAPI app: ``wmrl serve``'s app (one scoring core for every session), configured
by the environment.

* ``WMRL_ENV``: ``wmrl/MLEDojo-v0`` (default) or ``wmrl/DSBench-v0``;
* ``WMRL_REWARD``: ``fused`` (default), ``world_model`` or ``real``;
* ``WMRL_SPLIT``: ``train`` (default) or ``heldout``;
* ``WMRL_TASKS``: a comma-separated subset of the split's tasks (default: all of them);
* ``WMRL_MAX_SESSIONS``: concurrent WebSocket sessions (default 4).

``uvicorn server.app:app --port 8000`` from this folder, or the ``server`` script.
"""

from __future__ import annotations

import argparse
import atexit
import os

import uvicorn

from wmrl_envs.integrations.openenv import MAX_MESSAGE_BYTES, WMRLServer

SERVER = WMRLServer.build(os.environ.get("WMRL_ENV", "wmrl/MLEDojo-v0"),
                          reward=os.environ.get("WMRL_REWARD", "fused"), split=os.environ.get("WMRL_SPLIT", "train"),
                          task_ids=[t for t in os.environ.get("WMRL_TASKS", "").split(",") if t] or None)
atexit.register(SERVER.close)
app = SERVER.app(int(os.environ.get("WMRL_MAX_SESSIONS", "4")))


def main() -> None:
    """Serve the app (``--host``, ``--port``; loopback and 8000 by default)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port, ws_max_size=MAX_MESSAGE_BYTES)


if __name__ == "__main__":
    main()

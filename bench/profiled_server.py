"""`streamlit run app.py` with a record of where the server's time goes; bench/profile_step.py starts it.

    PROFILE_OUT=/tmp/step .venv/bin/python bench/profiled_server.py --server.port 8600 ...

While the file PROFILE_OUT.on exists, every script run is profiled (cProfile, in the script's own thread), and each
event of a rerun is written to PROFILE_OUT.log with its wall-clock time in ms: the rerun asked for (the browser's
message), the script's start and end, and each message the script enqueues, serialises and sends on the websocket.
On SIGUSR1 the profile so far is written to PROFILE_OUT.prof (pstats). Streamlit's internals are patched here, in
a benchmark, never in the app.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
import threading
import time
from pathlib import Path

OUT = Path(os.environ.get("PROFILE_OUT", "/tmp/profile-step"))
ON = OUT.with_suffix(".on")
_log = OUT.with_suffix(".log").open("a", buffering=1)
_lock = threading.Lock()
_profile = cProfile.Profile()


def log(event: str, detail: object = "") -> None:
    if ON.exists():
        with _lock:
            _log.write(f"{time.time() * 1000:.2f} {event} {detail}\n")


def patch() -> None:
    from streamlit.runtime import app_session
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.web.server.starlette import starlette_websocket as ws

    handle_backmsg = app_session.AppSession.handle_backmsg

    def handled(self, msg):
        log("asked", msg.WhichOneof("type"))
        return handle_backmsg(self, msg)

    enqueue = app_session.AppSession._enqueue_forward_msg

    def enqueued(self, msg):
        log("enqueued", msg.WhichOneof("type"))
        return enqueue(self, msg)

    run_script = script_runner.ScriptRunner._run_script

    def run(self, *args, **kwargs):
        profiling = ON.exists()
        log("script-start")
        if profiling:
            _profile.enable()
        try:
            return run_script(self, *args, **kwargs)
        finally:
            if profiling:
                _profile.disable()
            log("script-end")

    write = ws.StarletteSessionClient.write_forward_msg

    def written(self, msg):
        started = time.perf_counter()
        try:
            return write(self, msg)
        finally:
            log("serialised", f"{(time.perf_counter() - started) * 1000:.3f}")

    sender = ws.StarletteSessionClient._sender

    async def sending(self):
        send_bytes = self._websocket.send_bytes

        async def timed(payload):
            started = time.perf_counter()
            await send_bytes(payload)
            log("sent", f"{len(payload)} {(time.perf_counter() - started) * 1000:.3f}")

        self._websocket.send_bytes = timed
        return await sender(self)

    app_session.AppSession.handle_backmsg = handled
    app_session.AppSession._enqueue_forward_msg = enqueued
    script_runner.ScriptRunner._run_script = run
    ws.StarletteSessionClient.write_forward_msg = written
    ws.StarletteSessionClient._sender = sending


def dump(*_) -> None:
    _profile.dump_stats(str(OUT.with_suffix(".prof")))


if __name__ == "__main__":
    patch()
    signal.signal(signal.SIGUSR1, dump)
    from streamlit.web.cli import main

    sys.argv = ["streamlit", "run", str(Path(__file__).resolve().parents[1] / "app.py"), *sys.argv[1:]]
    main()

"""How the server's process ends: at once, when it is stopped (Ctrl-C, `docker stop`, Kubernetes' SIGTERM).

Python's last act before it exits is a garbage collection over every object still alive, and a server that has
drawn pages holds hundreds of thousands of them (its caches, torch's and Plotly's modules): after a real model's
page that collection alone took 7 s on a 2-core Xeon, and longer on a slower machine or after a day of readers,
where Kubernetes' 30 s of grace (deploy/k8s/deployment.yaml) or a test's patience ran out. At that point nothing is
garbage worth finding: the process's memory goes back to the kernel whole. So, at exit, every object is frozen
(gc.freeze: moved where collections do not look), and the process ends in about a second (tests/test_deploy.py).
"""

from __future__ import annotations

import atexit
import functools
import gc


@functools.cache  # app.py runs on every rerun: the handler is registered once per process
def end_quickly() -> None:
    atexit.register(gc.freeze)

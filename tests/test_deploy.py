"""deploy/: the Kubernetes manifests validate against the Kubernetes API schemas (offline, kubernetes-validate),
the compose file says what a class deployment needs, HAProxy accepts its configuration, and the local
replicas behind a real HAProxy (scripts/scale_out.py) keep each browser on its replica and survive losing one."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.33.0"
sys.path.insert(0, str(ROOT / "scripts"))

needs_haproxy = pytest.mark.skipif(
    not shutil.which("haproxy") and os.environ.get("CI") != "true",
    reason="haproxy is not installed (apt-get install haproxy; .ci/run installs it, so CI runs this)",
)


def manifests(name: str = "attention-explorer") -> dict[str, dict]:
    """The manifests of one application by kind: the app's, or its Redis's ("attention-explorer-redis")."""
    found = {}
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document["metadata"]["name"] == name:
                found[document["kind"]] = document
    return found


def test_kubernetes_manifests_validate_offline():
    import kubernetes_validate

    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)  # raises on any error


def test_kubernetes_manifests_probe_health_limit_resources_and_keep_sessions_sticky():
    found = manifests()
    assert set(found) == {"Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"}
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/_stcore/health"
    assert set(container["resources"]) == {"requests", "limits"}
    assert not container.get("volumeMounts") and not pod.get("volumes")  # the models are in the image
    labels = found["Deployment"]["spec"]["selector"]["matchLabels"]
    assert found["Service"]["spec"]["selector"] == labels
    annotations = found["Ingress"]["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600  # a lecture's websocket
    assert found["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]["name"] == found["Deployment"]["metadata"]["name"]
    (secret,) = [e for e in container["env"] if e["name"] == "STREAMLIT_SERVER_COOKIE_SECRET"]  # one for all pods
    assert "secretKeyRef" in secret["valueFrom"]
    # The class store every pod shares: the Redis service's name and port
    redis = manifests("attention-explorer-redis")
    (store,) = [e for e in container["env"] if e["name"] == "ATTENTION_CLASS_STORE"]
    service = redis["Service"]
    assert store["value"] == f"redis://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/0"
    assert service["spec"]["selector"] == redis["Deployment"]["spec"]["selector"]["matchLabels"]


def test_compose_runs_replicas_of_the_image_behind_haproxy_with_health_checks():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    app, lb = compose["services"]["app"], compose["services"]["lb"]
    assert app["build"]["context"] == ".." and (DEPLOY / app["build"]["context"] / "Dockerfile").exists()
    assert app["deploy"]["replicas"] >= 2 and "/_stcore/health" in " ".join(app["healthcheck"]["test"])
    assert lb["image"].startswith("haproxy:") and lb["depends_on"]["app"]["condition"] == "service_healthy"
    (mount,) = lb["volumes"]
    assert mount.split(":")[0] == "./haproxy.cfg" and (DEPLOY / "haproxy.cfg").exists()
    assert "8080:8080" in lb["ports"]
    assert "STREAMLIT_SERVER_COOKIE_SECRET" in app["environment"]  # one for all replicas
    assert app["environment"]["ATTENTION_CLASS_STORE"] == "redis://redis:6379/0"  # the class store they share
    assert app["depends_on"]["redis"]["condition"] == "service_healthy"
    assert "healthcheck" in compose["services"]["redis"]


@needs_haproxy
def test_haproxy_accepts_the_configuration_and_its_local_variant():
    from scale_out import local_config

    subprocess.run(["haproxy", "-c", "-q", "-f", str(DEPLOY / "haproxy.cfg")], check=True)
    text = (DEPLOY / "haproxy.cfg").read_text()
    for needed in ("cookie attention_replica insert", "option redispatch", "option httpchk GET /_stcore/health",
                   "timeout tunnel"):  # fmt: skip
        assert needed in text
    local = local_config([18501, 18502], 18080)
    lines = [line.split("#")[0].strip() for line in local.splitlines()]
    assert not any(line.startswith(("server-template", "resolvers")) for line in lines)
    assert "server app1 127.0.0.1:18501 cookie app1" in local and "server app2 127.0.0.1:18502 cookie app2" in local
    assert local.replace("127.0.0.1:18080", ":8080").count("\n") < text.count("\n")  # only the replicas changed


@needs_haproxy
@pytest.mark.browser
@pytest.mark.slow
def test_two_replicas_behind_haproxy_keep_their_browsers_and_survive_losing_one():
    """Three browsers through HAProxy: each keeps its replica across a reload; after the replica of the first
    is killed, every page shows its own sentence again (reconnected, rerun from its address) on the live
    replica, and a new browser opens."""
    from scale_out import run

    from tests.browser import require_chromium

    require_chromium()
    seen = run(replicas=2, sessions=3, log=lambda line: None)
    assert all(cookie.startswith("app") for cookie in seen["cookies"]), seen
    assert len(set(seen["cookies"])) == 2, seen  # leastconn spreads three browsers over both replicas
    assert all(seen["kept"]), seen
    live = ({"app1", "app2"} - {seen["cookies"][0]}).pop()
    assert set(seen["after_kill"]) == {live}, seen
    assert seen["new_session"] == live, seen


def test_the_servers_objects_are_frozen_at_exit_where_pythons_last_collection_skips_them():
    """ui/ending.py: registered once however often the app's script calls it, its handler runs at exit (before the
    handlers registered earlier, as atexit runs them) and leaves every object frozen."""
    script = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count()))\n"
        "from ui.ending import end_quickly\n"
        "end_quickly(); end_quickly()\n"
        "print('handlers', atexit._ncallbacks())\n"
    )
    ended = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert ended.returncode == 0, ended.stderr
    (handlers, frozen) = ended.stdout.splitlines()
    assert handlers == "handlers 2", ended.stdout  # the test's and one of ui/ending.py's
    assert int(frozen.split()[1]) > 1000, ended.stdout  # every object of the process: thousands of them


def _children(pid: int) -> set[int]:
    """The processes a process has started (Linux's /proc): the app's model worker."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return {int(child) for task in tasks for child in (task / "children").read_text().split()}


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def _stopped_while(browser, script: str, path: str, under_way) -> tuple[float, set[int]]:
    """A server of `script` on a page (`path`), stopped with SIGTERM once `under_way(page)` has returned (or the
    page is idle): the seconds it took to end, and its child processes that still run 10 s after."""
    from tests.browser import SLOW, free_port, idle, start_server, stop_server, wait_healthy

    port = free_port()
    process = start_server(port, script)
    try:
        wait_healthy(f"http://127.0.0.1:{port}")
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/{path}")
        if under_way is None:
            idle(page)
        else:
            under_way(page)
        children = _children(process.pid)
    finally:
        seconds = stop_server(process)
    page.close()
    deadline = time.time() + 10 * SLOW
    while any(map(_running, children)) and time.time() < deadline:
        time.sleep(0.1)
    return seconds, set(filter(_running, children))


@pytest.mark.browser
@pytest.mark.slow
def test_a_stopped_server_ends_at_once_though_a_long_text_is_being_read(browser):
    """`docker stop` and Kubernetes stop the app with SIGTERM, then kill it after their grace. Stopped while its model
    worker reads 4,096 tokens, the server ends about as soon as a trivial Streamlit app does (the yardstick, stopped
    in the same test), and its worker with it. Two faults made it wait: a thread pool's thread waiting for the
    pass (Python joins them at exit: the rest of the pass, 25 s here), caught here; and Python's last sweep of the
    memory (3-7 s after a real model's page, too near the yardstick's own noise to be told from it on every
    machine), caught by the test above."""
    yardstick, _ = _stopped_while(browser, "bench/trivial_app.py", "", None)
    at_stop = {}

    def reading(page) -> None:
        progress = page.get_by_text("Reading 4,096 tokens: layer", exact=False).first
        progress.wait_for(timeout=600_000)
        at_stop["said"] = progress.inner_text()

    seconds, still_running = _stopped_while(
        browser, "app.py", "real_model?rm_model=smollm2&rm_long=true&rm_long_tokens=4096", reading
    )
    layer = int(re.search(r"layer (\d+) of 30", at_stop["said"]).group(1))
    assert layer < 30, at_stop  # the pass was under way when the server was stopped
    assert not still_running, f"the model worker {still_running} still runs after its server ended"
    assert seconds <= 3 * yardstick + 1, (
        f"stopped while reading, the app took {seconds:.1f} s to end; the yardstick app {yardstick:.1f} s"
    )

#!/usr/bin/env bash
# Build the Docker image, start it, and check what a class would see: the health endpoint answers
# "ok", the pages are served, and (scripts/smoke_pages.py, run inside the image with no network) every
# page draws its charts with both bundled models. Prints the image size and the seconds from start
# to healthy (targets: <= 2 GB, <= 30 s).
#
#   scripts/check-image.sh            # CPU image, tag attention-explorer:check
#
# Engine: docker when a daemon answers; else buildah (Debian's 1.28, `--isolation chroot`, as root).
# Where no registry can be reached (our CI machines), the python:3.11-slim-bookworm base is
# replaced by a stand-in made with debootstrap, and pip inside the build uses this machine's
# package sources (its CA bundle and the local torch CPU wheel in /opt/wheels), mounted read-only.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-attention-explorer:check}
BASE=python:3.11-slim-bookworm
PORT=${PORT:-8765}
CA=/etc/ssl/certs/ca-certificates.crt
WHEELS=/opt/wheels

wait_healthy() {  # $1: start time (seconds since epoch, with fractions)
    for _ in $(seq 1 120); do
        if [ "$(curl -fsS "http://127.0.0.1:$PORT/_stcore/health" 2>/dev/null)" = "ok" ]; then
            echo "healthy after $(python3 -c "import time; print(f'{time.time() - $1:.1f}')") s"
            curl -fsS "http://127.0.0.1:$PORT/" | grep -q "<title>Streamlit</title>" && echo "page served: /"
            curl -fsS "http://127.0.0.1:$PORT/real_model" | grep -q "<div id=\"root\">" && echo "page served: /real_model"
            return 0
        fi
        sleep 0.5
    done
    echo "not healthy after 60 s" >&2
    return 1
}

if docker info >/dev/null 2>&1; then
    docker build -t "$IMAGE" .
    docker image inspect -f 'image size: {{.Size}} bytes' "$IMAGE"
    start=$(date +%s.%N)
    container=$(docker run -d --network bridge -p "127.0.0.1:$PORT:8501" "$IMAGE")
    trap 'docker rm -f "$container" >/dev/null' EXIT
    wait_healthy "$start"
    docker run --rm --network none "$IMAGE" python scripts/smoke_pages.py
    exit 0
fi

command -v buildah >/dev/null || {
    echo "neither a docker engine nor buildah: apt-get install buildah (see README)" >&2
    exit 1
}
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1 && ! buildah pull --quiet "$BASE" >/dev/null 2>&1; then
    echo "no registry: making a stand-in $BASE with debootstrap (a few minutes, once)"
    root=$(mktemp -d)
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates,passwd bookworm "$root" >/dev/null
    rm -f "$root"/usr/lib/python3*/EXTERNALLY-MANAGED  # like the real image: pip installs system-wide
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
    ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    stand_in=$(buildah from scratch)
    buildah copy --quiet "$stand_in" "$root" / >/dev/null
    buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd python3 "$stand_in"
    buildah commit --quiet "$stand_in" "$BASE" >/dev/null
    buildah rm "$stand_in" >/dev/null
    rm -rf "$root"
fi

mounts=()
build_args=()
if [ -f "$CA" ]; then
    mounts+=(-v "$CA:$CA:ro")
    build_args+=(--build-arg "PIP_CERT=$CA")
fi
if [ -d "$WHEELS" ]; then  # the PyTorch index is unreachable here; this holds its CPU wheel
    mounts+=(-v "$WHEELS:$WHEELS:ro")
    build_args+=(--build-arg TORCH_INDEX_URL= --build-arg "PIP_FIND_LINKS=$WHEELS")
fi
# --format docker: buildah's default OCI format has no HEALTHCHECK, and drops the Dockerfile's (podman users then get none).
buildah bud --isolation chroot --format docker --layers=false "${mounts[@]}" "${build_args[@]}" -t "$IMAGE" .
healthcheck=$(buildah inspect --type image --format '{{.Docker.Config.Healthcheck}}' "$IMAGE")
[[ "$healthcheck" == *"_stcore/health"* ]] || { echo "the image has no HEALTHCHECK: $healthcheck" >&2; exit 1; }
buildah images --format 'image size: {{.Size}}' "$IMAGE"

# Run it as the image would (its user, environment and command); chroot isolation shares this
# machine's network, so the server listens on 127.0.0.1:$PORT here.
container=$(buildah from "$IMAGE")
trap 'kill "$server" 2>/dev/null; buildah rm "$container" >/dev/null' EXIT
start=$(date +%s.%N)
buildah run --isolation chroot --user 10001 "$container" -- \
    streamlit run app.py --server.address=127.0.0.1 "--server.port=$PORT" >/tmp/check-image.log 2>&1 &
server=$!
wait_healthy "$start"
# chroot isolation cannot cut the network; HF_HUB_OFFLINE=1 (set in the image) keeps the hub out.
buildah run --isolation chroot --user 10001 "$container" -- python scripts/smoke_pages.py

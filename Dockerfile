# Self-Attention Explorer: one image, no network at run time.
#   docker build -t attention-explorer .                                # CPU (default)
#   docker build --build-arg TORCH_INDEX_URL= -t attention-explorer:cuda .   # CUDA torch from PyPI
#   docker run -p 8501:8501 attention-explorer    (add --gpus all for the CUDA image)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

# Where torch comes from: PyTorch's CPU-only wheel index keeps the image small; an empty
# value takes PyPI's default torch build, which bundles CUDA (several GB).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
# For builds behind a proxy or without the PyTorch index (scripts/check-image.sh sets them):
# pip's CA bundle and a folder of local wheels. Unset by default; pip reads them from the environment.
ARG PIP_CERT
ARG PIP_FIND_LINKS

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    ATTENTION_MODEL_CACHE=/opt/attention-models \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none

WORKDIR /app

COPY requirements.txt requirements-nodeps.txt ./
# Install (CPU torch first), then drop what only developers of those packages use (test suites, torch's C++ tests and
# headers: ~300 MB), to keep the CPU image near 2 GB.
RUN if [ -n "$TORCH_INDEX_URL" ]; then \
        pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple torch==2.13.0; \
    fi \
    && pip install --no-cache-dir -r requirements.txt \
    && pip install --no-cache-dir --no-deps -r requirements-nodeps.txt \
    && site="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && find "$site" -depth -type d -name tests -exec rm -rf {} + \
    && rm -rf "$site/torch/test" "$site/torch/include"

COPY . .
# The app's own modules as bytecode, made once here: with PYTHONDONTWRITEBYTECODE every start of the container would
# compile them again before its first page (bench/bench_open.py measures the cold start).
RUN python -m compileall -q app.py app_pages attention_core classroom figures ui

# Bake the bundled models' fast-loading cache into the image (the GGUF it came from is then
# dropped: 98 MB), then hand the cache to the app user.
RUN python -m attention_core.models --prepare --drop-gguf \
    && useradd --uid 10001 --no-create-home --home-dir /app app \
    && chown -R 10001:10001 "$ATTENTION_MODEL_CACHE"

USER 10001
EXPOSE 8501

# The server answers within a second (models load on first use); Docker's first probe comes one interval
# after start, so a 10 s interval reports "healthy" ~10 s after start. (--start-interval would be
# quicker but older builders, e.g. buildah 1.28, reject it.)
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4); sys.exit(0 if r.read() == b'ok' else 1)"]

CMD ["streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501"]

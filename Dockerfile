# Self-Attention Explorer: one image, no network at run time.
#   docker build -t attention-explorer .                                # CPU (default)
#   docker build --build-arg TORCH_INDEX_URL= -t attention-explorer:cuda .   # CUDA torch from PyPI
#   docker run -p 8501:8501 attention-explorer    (add --gpus all for the CUDA image)
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
FROM ${PYTHON_IMAGE}

# Where torch comes from: PyTorch's CPU-only wheel index keeps the image small; an empty
# value takes PyPI's default torch build, which bundles CUDA (several GB).
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu

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
RUN if [ -n "$TORCH_INDEX_URL" ]; then \
        pip install --no-cache-dir --index-url "$TORCH_INDEX_URL" --extra-index-url https://pypi.org/simple torch==2.13.0; \
    fi \
    && pip install --no-cache-dir -r requirements.txt \
    && pip install --no-cache-dir --no-deps -r requirements-nodeps.txt

COPY . .

# Bake the bundled models' fast-loading cache into the image, then hand it to the app user.
RUN python -m attention_core.models --prepare \
    && useradd --uid 10001 --no-create-home --home-dir /app app \
    && chown -R 10001:10001 "$ATTENTION_MODEL_CACHE"

USER 10001
EXPOSE 8501

# The first start loads the models (a few seconds); the start period leaves room for it.
HEALTHCHECK --interval=30s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; r = urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4); sys.exit(0 if r.read() == b'ok' else 1)"]

CMD ["streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501"]

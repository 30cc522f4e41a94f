# A GPU worker: the CUDA runtime, torch and triton (the versions measured on the H200:
# torch 2.11.0+cu130, triton 3.6.0, Python 3.12), and the site code for the Celery task.
# `gpu-node` (the default) runs one worker process per GPU given to the container, each
# pinned with CUDA_VISIBLE_DEVICES; `worker` runs one process for a one-GPU container.
# Build from the repository root:  docker build -f docker/worker.Dockerfile -t atrex-worker .
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04
FROM ${CUDA_IMAGE}

ARG TORCH_VERSION=2.11.0
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu130
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app ATREX_APP_DIR=/app PATH=/opt/venv/bin:$PATH \
    DJANGO_SETTINGS_MODULE=atrex_site.settings.production \
    ATREX_WORKER_DEVICE=cuda TRITON_CACHE_DIR=/app/var/triton-cache
WORKDIR /app

# Triton compiles kernels at run time: it needs a C compiler and Python's headers.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 python3-venv python3-dev gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv \
    && pip install --no-cache-dir --upgrade pip \
    && pip install --no-cache-dir "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"

# The rest of the dependencies; torch (and the triton it pinned) stay as installed above.
COPY pyproject.toml docker/requirements.py /tmp/build/
RUN python /tmp/build/requirements.py --extra evaluator --without torch,triton \
       > /tmp/build/requirements.txt \
    && pip install --no-cache-dir -r /tmp/build/requirements.txt \
    && python -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"

COPY . .
RUN mkdir -p /app/var
# The worker runs as root on purpose: the evaluation sandbox (evaluator/sandbox.py, required
# in production) needs root and CAP_SYS_ADMIN to give each operator's child its own network
# and mount namespaces and to drop it to an unprivileged user (per GPU in compose:
# ATREX_SANDBOX_UID_BASE). The compose file adds the capability; submitted code itself
# never runs as root.
ENTRYPOINT ["/app/docker/entrypoint.sh"]
CMD ["gpu-node"]

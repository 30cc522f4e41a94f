# A GPU worker: CUDA, torch and triton, the site code for the Celery task, one process per
# GPU. Built from the repository root: docker build -f docker/worker.Dockerfile .
# Run with: --gpus '"device=0"' -e ATREX_WORKER_DEVICE=cuda -e CELERY_BROKER_URL=... -e DATABASE_URL=...
FROM pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=atrex_site.settings.production \
    ATREX_WORKER_DEVICE=cuda
WORKDIR /app
COPY . .
RUN pip install --no-cache-dir ".[evaluator]" && useradd --system --home /app atrex
USER atrex
CMD ["celery", "-A", "atrex_site", "worker", "-Q", "eval.h200-sxm", "--concurrency", "1", "--prefetch-multiplier", "1"]

#!/usr/bin/env bash
# The one entry point of both images; the compose file and a bare-metal GPU node run the
# same commands. Every setting comes from the environment (docs/deploying.md).
#
#   migrate        apply migrations and load the suite files and hardware profiles
#   collectstatic  gather static files for whitenoise (done at image build)
#   web            gunicorn on $ATREX_BIND (default 0.0.0.0:8000)
#   site-worker    a CPU Celery worker on the "site" queue (site work, the reaper's tasks)
#   beat           the periodic scheduler (sends the reaper's ticks to "site")
#   worker         ONE GPU worker process on queue eval.$ATREX_HARDWARE, pinned to the GPU
#                  in $CUDA_VISIBLE_DEVICES, one task at a time
#   gpu-node       one `worker` per GPU of this machine ($ATREX_GPUS, default: every GPU
#                  nvidia-smi lists), each with its own CUDA_VISIBLE_DEVICES (and, with
#                  $ATREX_SANDBOX_UID_BASE, its own sandbox uids: $ATREX_CONCURRENCY + 2,
#                  at least three, from base + that many times i); exits (for a restart) as
#                  soon as one of them exits
#   anything else is run as given (e.g. `python manage.py createsuperuser`)
set -euo pipefail

SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "${ATREX_APP_DIR:-$(dirname "$SELF")/..}"

require() {
  local name
  for name in "$@"; do
    if [ -z "${!name:-}" ]; then
      echo "entrypoint: $name must be set (see docs/deploying.md)" >&2
      exit 64
    fi
  done
}

gpu_worker() {
  require ATREX_HARDWARE
  local gpu="${CUDA_VISIBLE_DEVICES:-none}"
  exec celery -A atrex_site worker \
    -Q "eval.${ATREX_HARDWARE}" \
    -n "gpu${gpu//,/-}.${ATREX_HARDWARE}@%h" \
    --concurrency 1 --prefetch-multiplier 1 \
    --without-gossip --without-mingle \
    --loglevel "${CELERY_LOG_LEVEL:-INFO}"
}

gpu_node() {
  require ATREX_HARDWARE
  local gpus="${ATREX_GPUS:-}"
  if [ -z "$gpus" ]; then
    gpus="$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)"
  fi
  if [ -z "$gpus" ]; then
    echo "entrypoint: no GPU found (set ATREX_GPUS, e.g. 0,1,2,3)" >&2
    exit 69
  fi
  local pids=() gpu index=0
  # Children alive at once run as different sandbox users: $ATREX_CONCURRENCY operators'
  # (evaluator/concurrency.py), the next operator's started ahead and the sanitizer's.
  local concurrency="${ATREX_CONCURRENCY:-1}"
  if ! [[ "$concurrency" =~ ^[1-9][0-9]*$ ]]; then
    echo "entrypoint: ATREX_CONCURRENCY must be a whole number of at least 1, not '$concurrency'" >&2
    exit 64
  fi
  local per_gpu=$((concurrency + 2 > 3 ? concurrency + 2 : 3))
  IFS=, read -ra list <<<"$gpus"
  for gpu in "${list[@]}"; do
    (
      # Each GPU's evaluation children get sandbox users of their own, so one GPU's
      # candidate cannot signal another's.
      if [ -n "${ATREX_SANDBOX_UID_BASE:-}" ] && [ -z "${ATREX_SANDBOX_USER:-}" ]; then
        first=$((ATREX_SANDBOX_UID_BASE + per_gpu * index))
        export ATREX_SANDBOX_USER=$first
        export ATREX_SANDBOX_SECOND_USER=$((first + 1))
        export ATREX_SANDBOX_THIRD_USER=$((first + 2))
        more=""
        for ((k = 3; k < per_gpu; k++)); do more="${more:+$more,}$((first + k))"; done
        if [ -n "$more" ]; then export ATREX_SANDBOX_MORE_USERS=$more; fi
      fi
      CUDA_VISIBLE_DEVICES="$gpu" exec "$SELF" worker
    ) &
    pids+=("$!")
    index=$((index + 1))
  done
  # A warm shutdown (TERM) reaches every worker: each finishes or hands back its task.
  trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' TERM INT
  local status=0
  wait -n "${pids[@]}" || status=$?
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  echo "entrypoint: a GPU worker exited (status $status); stopping the node's workers" >&2
  exit "$status"
}

command="${1:-web}"
case "$command" in
  migrate)
    python manage.py migrate --noinput
    exec python manage.py seed_suite
    ;;
  collectstatic)
    exec python manage.py collectstatic --noinput
    ;;
  web)
    exec gunicorn atrex_site.wsgi \
      --bind "${ATREX_BIND:-0.0.0.0:8000}" \
      --workers "${GUNICORN_WORKERS:-4}" \
      --timeout "${GUNICORN_TIMEOUT_S:-60}" \
      --access-logfile - --forwarded-allow-ips "${GUNICORN_FORWARDED_ALLOW_IPS:-127.0.0.1}"
    ;;
  site-worker)
    exec celery -A atrex_site worker -Q site -n "site@%h" \
      --concurrency "${SITE_WORKER_CONCURRENCY:-2}" \
      --without-gossip --without-mingle --loglevel "${CELERY_LOG_LEVEL:-INFO}"
    ;;
  beat)
    exec celery -A atrex_site beat \
      --schedule "${CELERY_BEAT_SCHEDULE_FILE:-/tmp/celerybeat-schedule}" \
      --loglevel "${CELERY_LOG_LEVEL:-INFO}"
    ;;
  worker)
    gpu_worker
    ;;
  gpu-node)
    gpu_node
    ;;
  *)
    exec "$@"
    ;;
esac

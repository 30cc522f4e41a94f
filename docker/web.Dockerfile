# The web image: Django + gunicorn, static files served by whitenoise; no torch (the site
# never imports submission code). The same image runs migrate, the site worker and beat.
# Build from the repository root:  docker build -f docker/web.Dockerfile -t atrex-web .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app ATREX_APP_DIR=/app \
    DJANGO_SETTINGS_MODULE=atrex_site.settings.production \
    DJANGO_STATIC_ROOT=/app/staticfiles
WORKDIR /app

# Dependencies first: this layer changes only with pyproject.toml.
COPY pyproject.toml docker/requirements.py /tmp/build/
RUN python /tmp/build/requirements.py > /tmp/build/requirements.txt \
    && pip install --no-cache-dir -r /tmp/build/requirements.txt

COPY . .
# Static files gathered and compressed once, at build (whitenoise serves them).
RUN useradd --system --home /app --shell /usr/sbin/nologin atrex \
    && DJANGO_SECRET_KEY=collectstatic-only DJANGO_ALLOWED_HOSTS=localhost \
       DATABASE_URL=sqlite:////tmp/collectstatic.sqlite3 docker/entrypoint.sh collectstatic \
    && mkdir -p /app/var && chown atrex /app/var

USER atrex
EXPOSE 8000
ENTRYPOINT ["/app/docker/entrypoint.sh"]
CMD ["web"]

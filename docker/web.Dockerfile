# The web image: Django + gunicorn, no torch (the site never imports submission code).
# Built from the repository root: docker build -f docker/web.Dockerfile .
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 DJANGO_SETTINGS_MODULE=atrex_site.settings.production
WORKDIR /app
COPY pyproject.toml README.md ./
COPY atrex_site atrex_site
COPY leaderboard leaderboard
COPY submissions submissions
COPY evaluator evaluator
COPY atrex_cli atrex_cli
COPY templates templates
COPY static static
COPY manage.py ./
RUN pip install --no-cache-dir . && useradd --system --home /app atrex \
    && DJANGO_SECRET_KEY=collectstatic-only DJANGO_ALLOWED_HOSTS=localhost python manage.py collectstatic --noinput
USER atrex
EXPOSE 8000
CMD ["gunicorn", "atrex_site.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4"]

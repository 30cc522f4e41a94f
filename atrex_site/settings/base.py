"""Settings shared by every environment. Everything that varies comes from the environment.

``.env`` is read only when ``DJANGO_READ_DOT_ENV_FILE`` is true (cookiecutter-django's rule).
"""

from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[2]

env = environ.Env()
if env.bool("DJANGO_READ_DOT_ENV_FILE", default=False):
    env.read_env(str(BASE_DIR / ".env"))

# Where the site keeps its state on disk (SQLite, uploads, the embedded broker's queue).
VAR_DIR = Path(env.str("ATREX_VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "catalogue",
    "submissions",
    "leaderboard",
    "fleet",
    "accounts",
    "agents",
    "traces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "atrex_site.security.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "atrex_site.urls"
WSGI_APPLICATION = "atrex_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# The web process, the worker and the reaper write to one SQLite file. WAL lets readers
# run beside the writer; "timeout" makes a writer wait for the lock; and IMMEDIATE takes
# the write lock when a transaction begins. Without it a transaction that read first and
# then writes (an admin publish, an upload) fails at once with "database is locked" when
# another process wrote in between, since SQLite cannot wait to upgrade a stale snapshot.
SQLITE_OPTIONS = {
    "timeout": 30,
    "init_command": "PRAGMA journal_mode=WAL;",
    "transaction_mode": "IMMEDIATE",
}


def _database_from_env() -> dict:
    """``DATABASE_URL`` (PostgreSQL in production), else SQLite under ``VAR_DIR``."""
    default_sqlite = f"sqlite:///{VAR_DIR / 'atrex.sqlite3'}"
    config = env.db_url("DATABASE_URL", default=default_sqlite)
    if config["ENGINE"] == "django.db.backends.sqlite3":
        # SQLite cannot create the folder of its file; this is the one thing settings create.
        Path(config["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        config.setdefault("OPTIONS", {}).update(SQLITE_OPTIONS)
    else:
        config.setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=60))
        config.setdefault("CONN_HEALTH_CHECKS", True)
    return config


DATABASES = {"default": _database_from_env()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Django's backend, refusing every password check while a lockout is in force (accounts).
AUTHENTICATION_BACKENDS = ["accounts.backends.LockoutModelBackend"]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "leaderboard:board"
LOGOUT_REDIRECT_URL = "leaderboard:board"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
# Uploads are never served by URL: owners download them through a view that sends them
# as attachments, so user content is never rendered from the site's origin.
MEDIA_ROOT = Path(env.str("DJANGO_MEDIA_ROOT", default=str(VAR_DIR / "media")))
# Uploads are readable by the site's own user and group only: a second layer under the
# evaluation sandbox, whose user cannot read them even where its mounts are missing.
FILE_UPLOAD_PERMISSIONS = 0o640
FILE_UPLOAD_DIRECTORY_PERMISSIONS = 0o750
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Celery -------------------------------------------------------------------------------
# Default broker: kombu's filesystem transport, which needs no server (development and the
# embedded demo). Production sets CELERY_BROKER_URL=redis://...
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Like SQLite, the filesystem transport cannot create its folders.
    for _folder in ("queue", "processed", "control"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # kombu's default is "control" in the current directory
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    # Longer than the longest evaluation, so that a message is not redelivered while a
    # worker is still running it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=4 * 3600)
    }
CELERY_TASK_IGNORE_RESULT = True  # the database row is the source of truth
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Routing, one rule: an evaluation goes to the queue of the hardware profile it targets,
# "eval.<profile slug>" (catalogue.models.HardwareProfile.queue; sent by id with
# send_task(queue=...)), consumed only by that hardware's GPU workers, one worker process
# per GPU; every other task is site work (imports, scoring, exports, the reaper, the fleet
# registry's sweeps) and goes to the default queue "site", consumed by CPU workers.
CELERY_TASK_DEFAULT_QUEUE = "site"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# One evaluation per worker process at a time (one worker per GPU).
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=1)
# A broker outage must not kill a running evaluation: the database row, not the message,
# says whether it finished (the reaper re-sends what the broker lost).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
_HEARTBEAT_S = env.float("ATREX_HEARTBEAT_INTERVAL_S", default=10.0)
_REAPER_S = env.float("ATREX_REAPER_INTERVAL_S", default=30.0)
# The reaper (submissions.reaper) runs on the site queue; `celery beat` (or `worker -B`)
# sends it. A tick that nobody took before the next one is dropped, not piled up.
CELERY_BEAT_SCHEDULE = {
    "reap-runs": {
        "task": "submissions.reap_runs",
        "schedule": _REAPER_S,
        "options": {"queue": "site", "expires": _REAPER_S},
    },
    # Workers without a recent heartbeat shown as lost on the fleet page (fleet/).
    "mark-lost-workers": {
        "task": "fleet.mark_lost_workers",
        "schedule": 60.0,
        "options": {"queue": "site", "expires": 60.0},
    },
}


# --- The portal ---------------------------------------------------------------------------
def _shards_per_run(value: str) -> int | str:
    """ATREX_SHARDS_PER_RUN: a whole number of at least 1, or "auto"."""
    value = value.strip().lower()
    if value == "auto":
        return value
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise ImproperlyConfigured(
        f"ATREX_SHARDS_PER_RUN={value!r}: use a whole number of at least 1 (shards per run) "
        "or 'auto' (as many as the hardware's free workers)."
    )


ATREX = {
    # Which suite and hardware the board shows first.
    "DEFAULT_SUITE": env.str("ATREX_DEFAULT_SUITE", default="atrex-bench-v0.1"),
    "DEFAULT_HARDWARE": env.str("ATREX_DEFAULT_HARDWARE", default="cpu-dev"),
    # Seconds a copy of a public board page is kept for readers without credentials
    # (atrex_site/page_cache.py; changes retire copies at once with a shared cache).
    "PUBLIC_PAGE_CACHE_S": env.int("ATREX_PUBLIC_PAGE_CACHE_S", default=10),
    # Upload limits (bytes / archive entries).
    "MAX_UPLOAD_BYTES": env.int("ATREX_MAX_UPLOAD_BYTES", default=20 * 1024 * 1024),
    "MAX_BUNDLE_ENTRIES": env.int("ATREX_MAX_BUNDLE_ENTRIES", default=200),
    # Production traces (traces/): the largest upload and its size once decompressed.
    "TRACE_MAX_UPLOAD_BYTES": env.int("ATREX_TRACE_MAX_UPLOAD_BYTES", default=256 << 20),
    "TRACE_MAX_BYTES": env.int("ATREX_TRACE_MAX_BYTES", default=1 << 30),
    # The evaluator is run with this interpreter (a GPU node's Python with torch and triton).
    "EVALUATOR_PYTHON": env.str("ATREX_EVALUATOR_PYTHON", default=""),
    # Where a worker keeps each run's working files (bundle copy, results, logs).
    "RUNS_DIR": Path(env.str("ATREX_RUNS_DIR", default=str(VAR_DIR / "runs"))),
    # Wall-clock cap for one evaluation (seconds).
    "EVALUATION_TIMEOUT_S": env.int("ATREX_EVALUATION_TIMEOUT_S", default=3 * 3600),
    # Per-shape timing budget handed to the evaluator (seconds); None keeps its default.
    "TIME_BUDGET_S": env.float("ATREX_TIME_BUDGET_S", default=None),
    # This worker's cache of eager reference timings (evaluator/reference_timings.py): a
    # folder of the worker's own, one per GPU worker; empty: off (every run times them).
    "REFERENCE_TIMINGS_DIR": env.str("ATREX_REFERENCE_TIMINGS_DIR", default=""),
    # Which device this worker evaluates on ("cpu" or "cuda").
    "WORKER_DEVICE": env.str("ATREX_WORKER_DEVICE", default="cpu"),
    # The evaluation sandbox (evaluator/sandbox.py): "required" makes a protection this
    # machine cannot give (no root, no namespaces) a platform error; "best-effort" reports
    # it. Limits: ATREX_SANDBOX_USER, _CPU_S, _MEMORY_MB, _PROCESSES, _FILE_MB, _TMP_MB.
    "SANDBOX": env.str("ATREX_SANDBOX", default="best-effort"),
    # The worker registry (fleet): a worker writes its heartbeat this often, counts as lost
    # after FLEET_LOST_AFTER_S without one, and measures its device's ceilings at start.
    "FLEET_HEARTBEAT_S": env.float("ATREX_FLEET_HEARTBEAT_S", default=30.0),
    "FLEET_LOST_AFTER_S": env.float("ATREX_FLEET_LOST_AFTER_S", default=120.0),
    "FLEET_MEASURE_CEILINGS": env.bool("ATREX_FLEET_MEASURE_CEILINGS", default=True),
    # Agent endpoints: ports the portal calls on public addresses (any port in an
    # admin-allowed network), private networks allowed besides the admin's list, retries of
    # a timed-out or 5xx call and the first back-off, and the key that encrypts the shared
    # secrets (default: derived from SECRET_KEY).
    "AGENT_ALLOWED_PORTS": env.list(
        "ATREX_AGENT_ALLOWED_PORTS", cast=int, default=[80, 443, 8080, 8443]
    ),
    "AGENT_ALLOWED_NETWORKS": env.list("ATREX_AGENT_ALLOWED_NETWORKS", default=[]),
    "AGENT_RETRIES": env.int("ATREX_AGENT_RETRIES", default=2),
    "AGENT_BACKOFF_S": env.float("ATREX_AGENT_BACKOFF_S", default=1.0),
    "AGENT_SECRET_KEY": env.str("ATREX_AGENT_SECRET_KEY", default=""),
    # Failed log-ins (page or HTTP Basic) that lock further attempts out for a while.
    "LOGIN_LOCKOUT": {
        "FAILURES_PER_USERNAME": env.int("ATREX_LOGIN_FAILURES_PER_USERNAME", default=5),
        "FAILURES_PER_IP": env.int("ATREX_LOGIN_FAILURES_PER_IP", default=20),
        "WINDOW_S": env.int("ATREX_LOGIN_LOCKOUT_WINDOW_S", default=15 * 60),
    },
    # The request header that holds the client's address when a proxy is in front of the
    # site (e.g. HTTP_X_REAL_IP); empty: REMOTE_ADDR.
    "CLIENT_IP_HEADER": env.str("ATREX_CLIENT_IP_HEADER", default=""),
    # Reliability (submissions.reaper): a worker writes its run's heartbeat this often; a
    # run whose heartbeat is older than HEARTBEAT_STALE_S lost its worker and is re-queued.
    "HEARTBEAT_INTERVAL_S": _HEARTBEAT_S,
    "HEARTBEAT_STALE_S": env.float("ATREX_HEARTBEAT_STALE_S", default=3 * _HEARTBEAT_S),
    # A queued run that no worker took this long after its message was sent (and that is
    # not waiting behind an older running one) is sent again: the broker may have lost it.
    "QUEUED_GRACE_S": env.float("ATREX_QUEUED_GRACE_S", default=600.0),
    # A submission waiting this long while no worker serves its hardware: its history says
    # so and its owner gets an e-mail, once (submissions.reaper).
    "NO_WORKER_NOTICE_S": env.float("ATREX_NO_WORKER_NOTICE_S", default=1800.0),
    # Evaluation attempts (and sends of one run's message) before the submission fails
    # with a platform error, which does not count against its owner's quota.
    "MAX_ATTEMPTS": env.int("ATREX_MAX_ATTEMPTS", default=3),
    # Shards per run (submissions.shards): a submission's operators are split into up to
    # this many parts, balanced by measured cost, each its own task on the hardware's queue
    # (free workers take them in parallel) and merged into one run. 1: one task per run;
    # "auto": as many as the hardware's workers that are free when it is queued.
    "SHARDS_PER_RUN": _shards_per_run(env.str("ATREX_SHARDS_PER_RUN", default="1")),
    "REAPER_INTERVAL_S": _REAPER_S,
    # How long a worker keeps retrying the database (restart, failover) before giving up.
    "DB_RETRY_S": env.float("ATREX_DB_RETRY_S", default=300.0),
    # Per-user limits on new submissions (0: no limit). Staff are exempt; submissions that
    # failed on the platform's side are not counted.
    "QUOTA_PER_HOUR": env.int("ATREX_QUOTA_PER_HOUR", default=10),
    "QUOTA_PER_DAY": env.int("ATREX_QUOTA_PER_DAY", default=30),
    "QUOTA_ACTIVE": env.int("ATREX_QUOTA_ACTIVE", default=5),
}

# Counters of the API's rate limits. One process: memory; several (production): set
# DJANGO_CACHE_URL=redis://127.0.0.1:6379/1 so that every process counts together.
CACHES = {"default": env.cache_url("DJANGO_CACHE_URL", default="locmemcache://")}
for _option in ("key_prefix", "timeout", "version", "key_function"):
    # django-environ spells these in lower case for Django's Redis backend, which reads
    # them in upper case only (?key_prefix=… was ignored).
    if _option in CACHES["default"]:
        CACHES["default"][_option.upper()] = CACHES["default"].pop(_option)
if CACHES["default"]["BACKEND"] == "django.core.cache.backends.redis.RedisCache":
    # The same, without a new client object per operation (atrex_site/redis_cache.py).
    CACHES["default"]["BACKEND"] = "atrex_site.redis_cache.RedisCache"
# With a cache every process shares (Redis, memcached), sessions are read through it: one
# database query less on each signed-in request (atrex_site/page_cache.py serves the rest
# of a public page from the cache). A per-process cache would go on accepting a session
# that another process ended (a log-out), so there the database alone.
if CACHES["default"]["BACKEND"].endswith(("RedisCache", "PyMemcacheCache", "PyLibMCCache")):
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

REST_FRAMEWORK = {
    # Token first: an unauthenticated API call answers 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "atrex_site.api.authentication.ApiTokenAuthentication",
        "atrex_site.api.authentication.ReaderSessionAuthentication",
    ],
    # Requests per client address (anonymous) or per user; 429 with Retry-After beyond.
    "DEFAULT_THROTTLE_CLASSES": [
        "atrex_site.api.throttling.AnonThrottle",
        "atrex_site.api.throttling.UserThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env.str("ATREX_API_RATE_ANON", default="120/min"),
        "user": env.str("ATREX_API_RATE_USER", default="600/min"),
    },
    # Proxies in front of the site whose X-Forwarded-For entries are trusted.
    "NUM_PROXIES": env.int("ATREX_NUM_PROXIES", default=None),
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticatedOrReadOnly"],
    "DEFAULT_PAGINATION_CLASS": "atrex_site.api.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "atrex_site.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Atrex-Bench Portal API",
    "DESCRIPTION": (
        "Boards, suites, hardware profiles and submissions of the Atrex-Bench portal. "
        "Authenticate writes with `Authorization: Token <token>` (`POST /api/tokens/`). "
        'Errors answer {"detail", "code"}. See docs/api.md.'
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # The staff curation API is not part of the public, documented interface.
    "PREPROCESSING_HOOKS": ["atrex_site.api.schema.public_endpoints_only"],
    # Served from the installed drf-spectacular-sidecar package: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="INFO")},
}

# Mail to users (the reaper's "no worker serves your submission" notice). The console
# backend prints to the log; production sets an SMTP backend and its host.
EMAIL_BACKEND = env.str(
    "DJANGO_EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend"
)
EMAIL_HOST = env.str("DJANGO_EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("DJANGO_EMAIL_PORT", default=25)
DEFAULT_FROM_EMAIL = env.str("DJANGO_DEFAULT_FROM_EMAIL", default="atrex-bench@localhost")

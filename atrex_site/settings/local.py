"""Development and the embedded demo: SQLite and the filesystem broker unless told otherwise."""

from .base import *  # noqa: F403
from .base import env

DEBUG = env.bool("DJANGO_DEBUG", default=True)
# A development key, only ever used on a developer's machine: production has no default.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="dev-only-insecure-key-never-used-in-production")
# Serve static files straight from the source folders (no collectstatic in development).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

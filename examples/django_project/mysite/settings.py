"""The example shop's settings: what a project adds for chongming-task is marked."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-0c8f4e2a9b7d41f6a3e5c1b9d7f2a4e6")
DEBUG = True
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "mysite.urls"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "chongming_task.contrib.django",  # chongming-task: the app (checks, commands)
    "orders",  # its tasks.py is found by itself
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

# The tasks live in this database, next to the orders: SQLite here, PostgreSQL
# (ENGINE django.db.backends.postgresql, psycopg 3) works the same way.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("ORDERS_DB", str(BASE_DIR / "db.sqlite3")),
        # Take the write lock at BEGIN: a transaction that reads, then enqueues, never
        # fails to upgrade its lock while a worker writes (Django 5.1+).
        "OPTIONS": {"transaction_mode": "IMMEDIATE"},
    }
}

# chongming-task: every key is optional (docs/django.md lists them).
CHONGMING_TASK = {
    "DATABASE": "default",
    "NUM_BUCKETS": 64,
}

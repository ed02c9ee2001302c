"""Settings of the test project: its databases come from the environment.

``SHOP_SQLITE``: the SQLite file of the ``default`` database. ``SHOP_POSTGRES`` (a
libpq URL) and ``SHOP_PG_SCHEMA``: a ``pg`` database in that schema, when set.
``SHOP_TASK_DATABASE``: the alias the tasks are kept in (``CHONGMING_TASK['DATABASE']``).
"""

import os
from typing import Any

from psycopg.conninfo import conninfo_to_dict

SECRET_KEY = "tests-only-not-a-secret-5b1f0c2e9d7a4b3c8e6f1a0d2c4b6e8f"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "shopsite.urls"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "chongming_task.contrib.django",
    "shop",
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

DATABASES: dict[str, dict[str, Any]] = {
    "default": {"ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["SHOP_SQLITE"]},
}
if os.environ.get("SHOP_POSTGRES"):
    _pg = conninfo_to_dict(os.environ["SHOP_POSTGRES"])
    DATABASES["pg"] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": _pg.get("dbname", ""),
        "USER": _pg.get("user", ""),
        "PASSWORD": _pg.get("password", ""),
        "HOST": _pg.get("host", ""),
        "PORT": _pg.get("port", ""),
        "OPTIONS": {"options": f"-c search_path={os.environ['SHOP_PG_SCHEMA']}"},
    }

CHONGMING_TASK = {"DATABASE": os.environ.get("SHOP_TASK_DATABASE", "default")}

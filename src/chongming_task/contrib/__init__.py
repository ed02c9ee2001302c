"""Integrations with application frameworks, each an optional extra imported on use.

``chongming_task.contrib.django``: the Django integration (``pip install
"chongming-task[django]"``, docs/django.md).
"""

from typing import ClassVar

from django.db import models


class Order(models.Model):
    email: "models.EmailField[str, str]" = models.EmailField()
    confirmation_sent: "models.BooleanField[bool, bool]" = models.BooleanField(default=False)

    objects: ClassVar[models.Manager["Order"]] = models.Manager()

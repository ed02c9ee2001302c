"""The shop's tasks: found by the integration because ``shop`` is an installed app."""

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from chongming_task import CronTrigger, Schedule, TaskContext, task
from shop.models import Order

#: The Django connection each run of confirm_order used, in the process that ran it
#: (the tests check that the worker closed it once the task ended).
USED: list[BaseDatabaseWrapper] = []


@task(tags=["mail"])
def confirm_order(ctx: TaskContext, order_id: int, using: str = "default") -> str:
    """Mark the order confirmed (as a confirmation e-mail would); returns its address."""
    USED.append(connections[using])
    orders = Order.objects.using(using)
    if not orders.filter(pk=order_id).update(confirmed=True):
        raise LookupError(f"order {order_id} does not exist (yet)")
    return orders.get(pk=order_id).email


#: A worker of the project runs these (yearly: never due while the tests run).
SCHEDULES = [
    Schedule(
        name="yearly-reconfirm",
        task="confirm_order",
        trigger=CronTrigger("0 3 1 1 *", "UTC"),
        kwargs={"order_id": 1},
    ),
]

"""The shop's background work: ``manage.py chongming_worker`` runs it."""

from chongming_task import RetryPolicy, TaskContext, task
from orders.models import Order


@task(retry=RetryPolicy(max_attempts=3))
def send_confirmation(ctx: TaskContext, order_id: int) -> str:
    """Send the order's confirmation (here: mark it sent) and return the address.

    The order is there: the task was enqueued in the transaction that wrote it.
    """
    order = Order.objects.get(pk=order_id)
    # A real shop sends the mail here: django.core.mail.send_mail(...)
    order.confirmation_sent = True
    order.save(update_fields=["confirmation_sent"])
    return order.email

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from chongming_task.contrib.django import get_client
from orders.models import Order
from orders.tasks import send_confirmation


@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """``POST /orders/ email=...``: the order and its confirmation task, in one transaction."""
    email = request.POST.get("email", "")
    try:
        validate_email(email)
    except ValidationError:
        return JsonResponse({"error": f"not an e-mail address: {email!r}"}, status=400)
    with transaction.atomic():
        order = Order.objects.create(email=email)
        handle = get_client().enqueue(send_confirmation, order.pk)  # commits with the order
    return JsonResponse({"order": order.pk, "task_id": handle.task_id}, status=201)

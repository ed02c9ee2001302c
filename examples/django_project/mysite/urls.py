from django.contrib import admin
from django.urls import include, path
from orders.views import place_order

urlpatterns = [
    path("admin/tasks/", include("chongming_task.contrib.django.urls")),  # staff only
    path("admin/", admin.site.urls),
    path("orders/", place_order, name="place-order"),
]

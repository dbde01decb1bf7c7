from django.urls import path

from usage.budget_pages import task_budget_view

# The card panel's budget box (composition/board_pages serves the panel; usage its budget part).
urlpatterns = [
    path("tasks/<int64:task_id>/budget/", task_budget_view, name="task_budget"),
]

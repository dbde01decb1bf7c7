from django.db.models import Count, Q, QuerySet

from board.models import Campaign, Task
from config.api.errors import DomainError


def task_get(*, task_id: int) -> Task:
    task = Task.objects.select_related("assignee", "campaign", "repository").filter(pk=task_id).first()
    if task is None:
        raise DomainError(f"Task {task_id} not found.", code="not_found")
    return task


def task_list() -> QuerySet[Task]:
    """Tasks are visible to every agent: they are the shared queue of work."""
    return Task.objects.select_related("assignee", "campaign", "repository").order_by("priority", "rank", "id")


def campaign_get(*, campaign_id: int) -> Campaign:
    campaign = campaign_list().filter(pk=campaign_id).first()
    if campaign is None:
        raise DomainError(f"Campaign {campaign_id} not found.", code="not_found")
    return campaign


def campaign_list() -> QuerySet[Campaign]:
    return Campaign.objects.annotate(
        tasks_total=Count("tasks", distinct=True),
        tasks_done=Count("tasks", filter=Q(tasks__status=Task.Status.DONE), distinct=True),
        leads_total=Count("leads", distinct=True),
    ).order_by("-created_at", "-id")

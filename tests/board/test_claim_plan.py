"""claim-next costs the same however long the ready queue is (PostgreSQL's plan for it)."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from board import services
from board.models import Task
from config.actors import Actor
from tests.factories import AgentFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the plan of PostgreSQL's claim statement"),
]


def test_the_claim_updates_its_task_by_primary_key_whatever_the_statistics_say():
    # given a long ready queue that PostgreSQL has not analysed (as after a big import)
    Task.objects.bulk_create([Task(title=f"task {i}", status=Task.Status.READY, rank=i) for i in range(3000)])
    agent = AgentFactory(slug="claude-1")
    # when an agent claims the best task
    with CaptureQueriesContext(connection) as queries:
        task = services.task_claim_next(actor=Actor(agent=agent), agent=agent)
    claim_sql = next(q["sql"] for q in queries.captured_queries if "UPDATE" in q["sql"])
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + claim_sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    # then it got the first task, and the UPDATE found its row by primary key, not by scanning
    # every ready task's index entry and filtering by id
    assert task.title == "task 0" and task.status == Task.Status.IN_PROGRESS
    update_scan = plan.split("InitPlan")[0] + plan.split("Index Scan using task_ready_queue")[-1]
    assert "board_task_pkey" in update_scan, plan
    assert "task_column" not in plan, plan

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from board.models import Campaign, Task
from ledger.models import ToolInvocation
from sessions_app.models import Agent, AgentSession, StreamEvent


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"person{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.django.Password("pass-word-123")


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"agent-{n}")
    display_name = factory.LazyAttribute(lambda o: o.slug.title())


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AgentSession

    id = factory.Sequence(lambda n: f"session_test_{n:05d}")
    agent = factory.SubFactory(AgentFactory)
    status = AgentSession.Status.RUNNING
    intent = "Fix the flaky test"
    started_at = factory.LazyFunction(timezone.now)


class StreamEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StreamEvent

    session = factory.SubFactory(SessionFactory)
    seq = factory.Sequence(lambda n: n + 1)
    type = StreamEvent.Type.LOG
    payload = factory.LazyFunction(dict)
    timestamp = factory.LazyFunction(timezone.now)


class ToolCallFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ToolInvocation

    session = factory.SubFactory(SessionFactory)
    agent = factory.LazyAttribute(lambda o: o.session.agent)
    tool_name = "Bash"
    started_at = factory.LazyFunction(timezone.now)


class CampaignFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Campaign

    name = factory.Sequence(lambda n: f"Campaign {n}")
    type = "marketing-campaign"


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task

    title = factory.Sequence(lambda n: f"Task {n}")
    status = Task.Status.READY
    priority = Task.Priority.P2
    rank = factory.Sequence(lambda n: (n + 1) * 1024)

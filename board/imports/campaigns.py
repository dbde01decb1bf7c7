"""Campaign definitions (TASK_DEFS_DIR/*.json) into a campaign, its deliverable tasks and leads.

The file is the campaign's identity (``Campaign.source_file``, unique), so importing again
updates the campaign's fields, adds deliverables and leads that are new and never duplicates.
Re-importing never removes anything: a deliverable dropped from the file keeps its task, and
leads already known (by email, else by name and company) keep the status and score people gave
them on the way.

``board.services.campaign_create`` is not used: its tasks carry no identity, so a second import
could not find them; the task shape (title, labels, priority, ready) is the same.
"""

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from board.imports.access import import_authorise
from board.imports.campaign_parse import CampaignDef, LeadDef, campaign_definition_parse
from board.imports.files import ImportFile, import_file_read, import_files_list
from board.live import board_push_tasks
from board.models import Campaign, Lead, Task
from board.services import RANK_STEP
from config.actors import Actor
from config.api.errors import DomainError
from ledger.events import event_record
from workspaces.models import Repository
from workspaces.worktrees.selectors import repository_find, repository_names

SUFFIX = ".json"
CAMPAIGN_FIELDS = ("name", "type", "priority", "deliverables", "target_audience", "goal", "starts_on", "ends_on")


@dataclass(frozen=True)
class CampaignImportResult:
    campaign: Campaign
    created: bool  # True when this import made the campaign, False when it updated it
    campaign_fields: list[str]  # fields the import changed on an existing campaign
    tasks_created: list[int]
    tasks_updated: list[int]
    leads_created: int

    @property
    def changed_anything(self) -> bool:
        return self.created or bool(self.campaign_fields or self.tasks_created or self.tasks_updated)


def campaign_files() -> list[ImportFile]:
    return import_files_list(root=settings.TASK_DEFS_DIR, suffix=SUFFIX)


def deliverable_key(*, file_name: str, deliverable: str) -> str:
    """A deliverable task's identity: the definition file and the deliverable, case-folded."""
    text = f"campaign\x1f{file_name}\x1f{' '.join(deliverable.split()).casefold()}"
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class DeliverablePreview:
    title: str
    priority: str
    labels: list[str]


@dataclass(frozen=True)
class DeliverableChange:
    task_id: int
    title: str
    status: str
    changes: dict[str, tuple[Any, Any]]  # field -> (now, after the import), as a priority file's preview


@dataclass(frozen=True)
class CampaignPreview:
    """What importing a definition would do now, shown before anything is written (as priority files)."""

    file_name: str
    name: str
    type: str
    priority: str
    campaign: Campaign | None  # the campaign this file made before; None: the import creates it
    campaign_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    new: list[DeliverablePreview] = field(default_factory=list)
    changed: list[DeliverableChange] = field(default_factory=list)
    unchanged: int = 0
    leads_new: int = 0
    repository: str = ""

    @property
    def changes_anything(self) -> bool:
        return self.campaign is None or bool(self.campaign_changes or self.new or self.changed or self.leads_new)


def campaign_preview(*, file_name: object) -> CampaignPreview:
    """What ``campaign_import`` of ``file_name`` would create and change; reads only. A bad file or
    an unknown repository is the same 400 the import gives."""
    text = import_file_read(root=settings.TASK_DEFS_DIR, name=file_name, suffix=SUFFIX, folder="TASK_DEFS_DIR")
    name = str(file_name)
    definition = campaign_definition_parse(text, file_name=name)
    repository = _repository(definition, file_name=name)
    values = _campaign_values(definition)
    campaign = Campaign.objects.filter(source_file=name).first()
    changes = {}
    if campaign is not None:
        changes = {f: (getattr(campaign, f), values[f]) for f in CAMPAIGN_FIELDS if getattr(campaign, f) != values[f]}
    # Tasks are named after the campaign as the file names it (the import renames them with it).
    shaped = Campaign(name=values["name"], type=values["type"], priority=values["priority"], goal=values["goal"])
    keys = {deliverable_key(file_name=name, deliverable=d): d for d in values["deliverables"]}
    existing = {task.source_key: task for task in Task.objects.filter(source_key__in=keys).order_by("pk")}
    new, changed, unchanged = [], [], 0
    for key, deliverable in keys.items():
        wanted = _task_fields(shaped, deliverable)
        task = existing.get(key)
        if task is None:
            new.append(DeliverablePreview(title=wanted["title"], priority=wanted["priority"], labels=wanted["labels"]))
            continue
        diff = {f: (getattr(task, f), v) for f, v in wanted.items() if getattr(task, f) != v and f != "description"}
        if wanted["description"] != task.description:
            diff["description"] = ("", "")  # shown as "updated"
        if repository is not None and task.repository_id != repository.pk:
            diff["repository"] = (task.repository.name if task.repository else "", repository.name)
        if diff:
            changed.append(DeliverableChange(task_id=task.pk, title=task.title, status=task.status, changes=diff))
        else:
            unchanged += 1
    return CampaignPreview(
        file_name=name,
        name=values["name"],
        type=values["type"],
        priority=values["priority"],
        campaign=campaign,
        campaign_changes=changes,
        new=new,
        changed=changed,
        unchanged=unchanged,
        leads_new=_leads_new(campaign=campaign, leads=definition.leads),
        repository=repository.name if repository is not None else "",
    )


def _leads_new(*, campaign: Campaign | None, leads: tuple[LeadDef, ...]) -> int:
    known = set()
    if campaign is not None:
        rows = Lead.objects.filter(campaign=campaign).values_list("name", "company", "email")
        known = {lead_identity(name=n, company=c, email=e) for n, c, e in rows}
    new = 0
    for lead in leads:
        identity = lead_identity(name=lead.name, company=lead.company, email=lead.email)
        if identity not in known:
            known.add(identity)
            new += 1
    return new


def campaign_import(*, actor: Actor, file_name: object) -> CampaignImportResult:
    """Create or update the campaign defined by ``file_name``; idempotent."""
    import_authorise(actor=actor, what="Importing campaigns")
    text = import_file_read(root=settings.TASK_DEFS_DIR, name=file_name, suffix=SUFFIX, folder="TASK_DEFS_DIR")
    name = str(file_name)
    definition = campaign_definition_parse(text, file_name=name)
    repository = _repository(definition, file_name=name)
    try:
        with transaction.atomic():
            return _import(actor=actor, name=name, definition=definition, repository=repository)
    except IntegrityError:
        # Two imports of one new file at once: the unique source_file lets one create it.
        raise DomainError(f"Another import of {name!r} ran at the same time; run it again.", code="conflict") from None


def _repository(definition: CampaignDef, *, file_name: str) -> Repository | None:
    """The repository the definition names; an unknown name is a 400 like any other bad field."""
    if not definition.repository:
        return None
    repository = repository_find(name=definition.repository)
    if repository is None:
        known = repository_names()
        message = f"is not a registered repository; known: {', '.join(known) if known else 'none registered'}."
        raise DomainError(
            f"{file_name!r}: repository {definition.repository!r} {message}",
            extra={"errors": {"repository": [message]}, "known": known},
        )
    return repository


def _campaign_values(definition: CampaignDef) -> dict:
    return {
        "name": definition.name or definition.type,
        "type": definition.type,
        "priority": definition.priority,
        "deliverables": list(definition.deliverables),
        "target_audience": definition.target_audience,
        "goal": definition.goal,
        "starts_on": definition.starts_on,
        "ends_on": definition.ends_on,
    }


def _import(*, actor: Actor, name: str, definition: CampaignDef, repository: Repository | None) -> CampaignImportResult:
    values = _campaign_values(definition)
    campaign = Campaign.objects.select_for_update().filter(source_file=name).first()
    created = campaign is None
    if created:
        campaign = Campaign.objects.create(source_file=name, **values)
        changed_fields = []
        _campaign_event("campaign.created", campaign, actor, deliverables=len(definition.deliverables))
    else:
        changed_fields = [field for field in CAMPAIGN_FIELDS if getattr(campaign, field) != values[field]]
        if changed_fields:
            for field in changed_fields:
                setattr(campaign, field, values[field])
            campaign.save(update_fields=[*changed_fields, "updated_at"])
            _campaign_event("campaign.updated", campaign, actor, fields=changed_fields)
    tasks_created, tasks_updated = _deliverable_tasks(actor=actor, campaign=campaign, name=name, repository=repository)
    leads_created = _leads_add(campaign=campaign, leads=definition.leads)
    result = CampaignImportResult(campaign, created, changed_fields, tasks_created, tasks_updated, leads_created)
    if tasks_created or tasks_updated:
        board_push_tasks(task_ids=tasks_created + tasks_updated)
    return result


def _campaign_event(event: str, campaign: Campaign, actor: Actor, **payload) -> None:
    event_record(
        name=event,
        subject_type="campaign",
        subject_id=campaign.pk,
        actor=actor.label,
        payload={"name": campaign.name, "source_file": campaign.source_file, **payload},
    )


def _task_fields(campaign: Campaign, deliverable: str) -> dict:
    # The same shape campaign_create gives a deliverable's task.
    return {
        "title": f"{campaign.name}: {deliverable}",
        "description": campaign.goal,
        "priority": campaign.priority,
        "labels": [campaign.type, deliverable],
    }


def _deliverable_tasks(
    *, actor: Actor, campaign: Campaign, name: str, repository: Repository | None
) -> tuple[list[int], list[int]]:
    keys = {deliverable_key(file_name=name, deliverable=d): d for d in campaign.deliverables}
    existing = {task.source_key: task for task in Task.objects.filter(source_key__in=keys).order_by("pk")}
    top = Task.objects.filter(status=Task.Status.READY).aggregate(top=Max("rank"))["top"] or 0
    rows, updated = [], []
    for key, deliverable in keys.items():
        wanted = _task_fields(campaign, deliverable)
        task = existing.get(key)
        if task is None:
            top += RANK_STEP
            rows.append(
                Task(
                    status=Task.Status.READY,
                    rank=top,
                    campaign=campaign,
                    repository=repository,
                    source_file=name,
                    source_key=key,
                    **wanted,
                )
            )
            continue
        # Title, priority and labels follow the file; status and holder stay with the board. The
        # repository follows it when the file names one (without one, a card's own choice stays).
        changes = {field: value for field, value in wanted.items() if getattr(task, field) != value}
        if repository is not None and task.repository_id != repository.pk:
            changes["repository"] = repository
        if changes:
            Task.objects.filter(pk=task.pk).update(**changes, updated_at=timezone.now())
            _task_event("task.updated", task.pk, actor, title=wanted["title"], fields=sorted(changes))
            updated.append(task.pk)
    tasks = Task.objects.bulk_create(rows)
    for task in tasks:
        _task_event("task.created", task.pk, actor, title=task.title, status=task.status, campaign=campaign.pk)
    return [task.pk for task in tasks], updated


def _task_event(event: str, task_id: int, actor: Actor, *, title: str, **payload) -> None:
    event_record(
        name=event,
        subject_type="task",
        subject_id=task_id,
        actor=actor.label,
        payload={"title": title[:200], **payload},
    )


def lead_identity(*, name: str, company: str, email: str) -> tuple[str, ...]:
    if email:
        return ("email", email.casefold())
    return ("name", " ".join(name.split()).casefold(), " ".join(company.split()).casefold())


def _leads_add(*, campaign: Campaign, leads: tuple[LeadDef, ...]) -> int:
    known = {
        lead_identity(name=n, company=c, email=e)
        for n, c, e in Lead.objects.filter(campaign=campaign).values_list("name", "company", "email")
    }
    rows = []
    for lead in leads:
        identity = lead_identity(name=lead.name, company=lead.company, email=lead.email)
        if identity in known:
            continue
        known.add(identity)
        rows.append(
            Lead(
                campaign=campaign,
                name=lead.name,
                company=lead.company,
                email=lead.email,
                status=lead.status,
                score=lead.score,
            )
        )
    Lead.objects.bulk_create(rows)
    return len(rows)

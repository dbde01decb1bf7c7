"""Reads the import pages share."""

from django.db.models import Prefetch, QuerySet

from board.models import Campaign, Lead
from board.selectors import campaign_list


def campaign_progress_list() -> QuerySet[Campaign]:
    """Campaigns with deliverables done / total (``tasks_done`` / ``tasks_total``) and their leads.

    Two queries whatever the number of campaigns: the annotated list and one for all leads.
    """
    return campaign_list().prefetch_related(Prefetch("leads", queryset=Lead.objects.order_by("-score", "name")))

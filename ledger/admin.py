"""Admin for the tool-call ledger and the domain event log (both append-only: view only), and
for outbound webhooks: subscriptions, and their delivery log (view only, with "Retry now")."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html
from django.utils.text import Truncator

from config.api.errors import DomainError
from ledger.models import Event, ToolInvocation, WebhookDelivery, WebhookSubscription
from ledger.webhooks import (
    webhook_deliveries_retry_now,
    webhook_subscription_check,
    webhook_subscription_save,
    webhook_subscriptions_delete,
)
from sessions_app.admin import ReadOnlyAdmin, changelist_link, json_preview, pretty_json, report_counts


@admin.register(ToolInvocation)
class ToolInvocationAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "tool_name",
        "session",
        "agent",
        "status",
        "started_at",
        "duration_ms",
        "input_preview",
        "client_id",
    )
    list_select_related = ("session", "agent")
    list_filter = ("status", "agent")
    search_fields = ("tool_name", "=session__id", "=client_id", "=input_sha256")
    ordering = ("-started_at", "-id")
    date_hierarchy = "started_at"
    # a big table: no second COUNT(*) for the unfiltered total, no per-filter counts
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fieldsets = (
        (None, {"fields": ("tool_name", "session", "agent", "status", "client_id")}),
        ("Input and output (redacted)", {"fields": ("input_summary", "input_sha256", "output_summary", "error")}),
        ("Times", {"fields": ("started_at", "finished_at", "duration_ms", "created_at", "body_sha256")}),
    )

    @admin.display(description="input")
    def input_preview(self, obj):
        return Truncator(obj.input_summary).chars(60)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "subject_type", "subject_id", "actor", "payload_preview", "created_at")
    list_filter = ("name", "subject_type")
    search_fields = ("name", "=subject_id", "actor")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    fields = ("name", "subject_type", "subject_id", "actor", "created_at", "payload_pretty")
    readonly_fields = ("payload_pretty",)

    @admin.display(description="payload")
    def payload_preview(self, obj):
        return json_preview(obj.payload)

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        return pretty_json(obj.payload)


# --- Outbound webhooks -------------------------------------------------------------------------


class WebhookSubscriptionForm(forms.ModelForm):
    url = forms.URLField(max_length=500, assume_scheme="https")
    # The secret is write-only: typed in to replace it, never rendered back.
    new_secret = forms.CharField(
        label="Secret",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave blank to keep the current one; a new subscription left blank "
        "gets a generated secret, shown once after saving.",
    )
    # Optional: a form (or a script) that does not send it keeps Switchyard's own format.
    format = forms.ChoiceField(
        choices=WebhookSubscription.Format.choices,
        required=False,
        help_text=WebhookSubscription._meta.get_field("format").help_text,
    )

    class Meta:
        model = WebhookSubscription
        fields = ("url", "event_names", "format", "active", "description")

    def clean_format(self) -> str:
        return self.cleaned_data.get("format") or self.instance.format or WebhookSubscription.Format.SWITCHYARD

    def clean(self):
        data = super().clean()
        if "url" in data and "event_names" in data:
            try:
                webhook_subscription_check(url=data["url"], event_names=data["event_names"])
            except DomainError as exc:
                for field, errors in exc.extra.get("errors", {}).items():
                    self.add_error(field, errors)
        return data


@admin.register(WebhookSubscription)
class WebhookSubscriptionAdmin(admin.ModelAdmin):
    form = WebhookSubscriptionForm
    list_display = ("id", "url", "description", "events", "active", "deliveries", "created_at")
    list_filter = ("active",)
    search_fields = ("url", "description")
    ordering = ("url", "id")
    fields = ("url", "event_names", "format", "new_secret", "active", "description")

    @admin.display(description="events")
    def events(self, obj):
        return ", ".join(obj.event_names) or "all"

    @admin.display(description="delivery log")
    def deliveries(self, obj):
        return changelist_link(WebhookDelivery, "deliveries", subscription__id__exact=obj.pk)

    def save_model(self, request, obj, form, change):
        generated = webhook_subscription_save(subscription=obj, new_secret=form.cleaned_data.get("new_secret", ""))
        if generated:
            messages.warning(
                request,
                format_html(
                    "Secret for {}: <code>{}</code> Copy it to the receiver now: it is never shown again.",
                    obj.url,
                    generated,
                ),
            )

    def delete_model(self, request, obj):
        webhook_subscriptions_delete(subscriptions=WebhookSubscription.objects.filter(pk=obj.pk))

    def delete_queryset(self, request, queryset):
        webhook_subscriptions_delete(subscriptions=queryset)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "event_name",
        "subscription",
        "status",
        "attempts",
        "last_status_code",
        "next_attempt_at",
        "last_attempt_at",
        "delivered_at",
    )
    list_select_related = ("event", "subscription")
    list_filter = ("status", "subscription", "event__name")
    search_fields = ("=event__id", "event__name", "subscription__url")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    actions = ("retry_now",)
    fields = (
        "subscription",
        "event",
        "event_name",
        "status",
        "attempts",
        "next_attempt_at",
        "claimed_until",
        "last_attempt_at",
        "delivered_at",
        "last_status_code",
        "last_error",
        "response_excerpt",
        "created_at",
        "updated_at",
    )

    @admin.display(description="event", ordering="event__name")
    def event_name(self, obj):
        return obj.event.name

    def has_retry_permission(self, request) -> bool:
        return request.user.has_perm("ledger.change_webhookdelivery")

    @admin.action(description="Retry now", permissions=["retry"])
    def retry_now(self, request, queryset):
        queued = webhook_deliveries_retry_now(deliveries=queryset)
        report_counts(request, f"{queued} delivery(ies) queued to send now", skipped=queryset.count() - queued)

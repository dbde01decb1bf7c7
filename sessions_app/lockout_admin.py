"""Axes' admin for failed logins, with an "Unlock" action engineers can find.

Axes lists the attempts and can delete them, but nothing there says that deleting is how a locked
person gets back in; the action says so and goes through ``login_unlock``.
"""

from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.contrib import admin, messages

from config.login_lockout import login_unlock


class LockoutAccessAttemptAdmin(AccessAttemptAdmin):
    actions = ["unlock", "cleanup_expired_attempts"]

    @admin.action(description="Unlock: forget these failed attempts", permissions=["delete"])
    def unlock(self, request, queryset):
        count = login_unlock(attempts=queryset)
        self.message_user(request, f"{count} login(s) unlocked: they may log in again now.", messages.SUCCESS)


if admin.site.is_registered(AccessAttempt):
    admin.site.unregister(AccessAttempt)
admin.site.register(AccessAttempt, LockoutAccessAttemptAdmin)

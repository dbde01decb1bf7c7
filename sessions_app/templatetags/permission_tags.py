"""The permission request's display (sessions_app/permission_display.py) for the answer forms."""

from django import template

from sessions_app import permission_display

register = template.Library()

register.filter("permission_subject", permission_display.permission_subject)
register.filter("permission_description", permission_display.permission_description)
register.filter("permission_suggestions", permission_display.permission_suggestions)

"""The two groups the pages know (config/pages.py): product owners and engineers."""

from django.db import migrations

GROUPS = ("product owners", "engineers")


def create_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in GROUPS:
        Group.objects.get_or_create(name=name)


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("sessions_app", "0003_stream_event_drop_redundant_index"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]

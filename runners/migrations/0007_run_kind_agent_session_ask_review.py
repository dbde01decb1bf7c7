# Runs of a kind (work, continue, review), the provider's own session id, and the ask_review decision (issue 25).

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('board', '0004_task_repository'),
        ('runners', '0006_ship_pull_requests'),
        ('sessions_app', '0006_tool_policy'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='taskreview',
            name='task_review_decision_valid',
        ),
        migrations.AddField(
            model_name='run',
            name='agent_session',
            field=models.CharField(blank=True, help_text="The provider's own session id (Claude Code's session, Codex's thread), as the runner saw it: what a run continuing this one resumes.", max_length=200),
        ),
        migrations.AddField(
            model_name='run',
            name='kind',
            field=models.CharField(choices=[('work', 'Work'), ('continue', 'Continue'), ('review', 'Review')], default='work', max_length=16),
        ),
        migrations.AlterField(
            model_name='taskreview',
            name='decision',
            field=models.CharField(choices=[('approve', 'Approved'), ('request_changes', 'Changes requested'), ('ask_review', 'Review asked of an agent')], max_length=16),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(('kind__in', ['work', 'continue', 'review'])), name='run_kind_valid'),
        ),
        migrations.AddConstraint(
            model_name='taskreview',
            constraint=models.CheckConstraint(condition=models.Q(('decision__in', ['approve', 'request_changes', 'ask_review'])), name='task_review_decision_valid'),
        ),
    ]

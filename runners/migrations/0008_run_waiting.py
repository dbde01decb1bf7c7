# A run that waits for a person holds no process (issue 26 §2): status waiting, what it waits for, the answer.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('board', '0004_task_repository'),
        ('runners', '0007_run_kind_agent_session_ask_review'),
        ('sessions_app', '0006_tool_policy'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='run',
            name='run_one_active_per_task',
        ),
        migrations.RemoveConstraint(
            model_name='run',
            name='run_status_valid',
        ),
        migrations.RemoveConstraint(
            model_name='run',
            name='run_active_has_runner',
        ),
        migrations.AddField(
            model_name='run',
            name='answer',
            field=models.JSONField(blank=True, default=dict, help_text="The person's answer to it: decision (allow, deny), message, answered_by."),
        ),
        migrations.AddField(
            model_name='run',
            name='answered_at',
            field=models.DateTimeField(blank=True, help_text='When it was answered; it resumes then.', null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='waiting_for',
            field=models.JSONField(blank=True, default=dict, help_text='What a waiting run waits for: kind (permission, policy, budget), question, question_seq, tool_use_id, tool_name, runner (the one holding its worktree).'),
        ),
        migrations.AlterField(
            model_name='run',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('assigned', 'Assigned'), ('starting', 'Starting'), ('running', 'Running'), ('waiting', 'Waiting'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled'), ('lost', 'Lost')], default='queued', max_length=16),
        ),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(condition=models.Q(('answered_at__isnull', False), ('status', 'waiting')), fields=['runner', 'answered_at'], name='run_answered_waiting'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.UniqueConstraint(condition=models.Q(('status__in', ['queued', 'assigned', 'starting', 'running', 'waiting'])), fields=('task',), name='run_one_active_per_task'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['queued', 'assigned', 'starting', 'running', 'waiting', 'succeeded', 'failed', 'cancelled', 'lost'])), name='run_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status__in', ['assigned', 'starting', 'running', 'waiting']), _negated=True), ('runner__isnull', False), _connector='OR'), name='run_active_has_runner'),
        ),
    ]

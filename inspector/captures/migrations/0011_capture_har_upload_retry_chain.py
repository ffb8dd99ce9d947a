"""One name per concept: a capture's `group` (the captures of one HAR upload)
is `har_upload`, and its `attempt_group` (the attempts of one retried
request) is `retry_chain`, as the API and the list filters already say.  The
unique attempt number per chain is re-created under a name that says so."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("captures", "0010_lens_results"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="capture",
            name="attempt_number_unique",
        ),
        migrations.RenameField(
            model_name="capture",
            old_name="group",
            new_name="har_upload",
        ),
        migrations.RenameField(
            model_name="capture",
            old_name="attempt_group",
            new_name="retry_chain",
        ),
        migrations.AddConstraint(
            model_name="capture",
            constraint=models.UniqueConstraint(
                condition=models.Q(("attempt__isnull", False)),
                fields=("retry_chain", "attempt"),
                name="retry_chain_attempt_unique",
            ),
        ),
    ]

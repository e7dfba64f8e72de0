"""awa-beat's schedules in a Django project's admin.

Add ``"awa_beat.contrib.django"`` to ``INSTALLED_APPS``: the admin lists
``awa.cron_jobs`` with the dashboard's columns and pauses, resumes and triggers through
awa-beat's operations layer, recording each action in awa-beat's audit log. The models
are unmanaged (``managed = False``): the app has no migration and never creates,
alters or drops anything in ``awa.*``.

Settings: ``AWA_BEAT_DATABASE_URL`` (default: the connection of the database alias
``AWA_BEAT_DATABASE``, itself ``"default"``).
"""

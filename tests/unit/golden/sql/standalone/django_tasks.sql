SELECT * FROM django_celery_beat_periodictask ORDER BY id;

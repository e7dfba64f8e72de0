SELECT * FROM django_celery_beat_solarschedule ORDER BY id;

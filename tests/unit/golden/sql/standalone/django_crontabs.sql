SELECT * FROM django_celery_beat_crontabschedule ORDER BY id;

SELECT * FROM django_celery_beat_clockedschedule ORDER BY id;

SELECT * FROM django_celery_beat_intervalschedule ORDER BY id;

"""The Celery adapter: the beat scheduler class and the ``celery awa`` command.
"""

"""One replica's runtime: the node that syncs, elects and fires, its probe server and metrics.

Nothing here imports Celery.
"""

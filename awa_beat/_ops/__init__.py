"""The operations layer: what the CLI, the API, the dashboard and the Django admin do to schedules.
"""

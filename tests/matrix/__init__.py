"""The matrix suite: every schedule type through every surface that shows or changes it.

One schedule of every type (:mod:`tests.matrix.catalogue`) goes through beat, the Python
API, the CLI, the dashboard, the Django admin, the metrics and import/export, on both
table layouts. A new schedule type or surface is added here, not beside it.
"""

"""The evaluator: which schedules are due, and the fire requests that follow from them.
"""

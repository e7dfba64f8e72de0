"""Pure schedule code: parsing, validation and fire-time arithmetic, with time passed in.

Nothing here opens a connection or reads the clock, and every layer above may import it.
"""

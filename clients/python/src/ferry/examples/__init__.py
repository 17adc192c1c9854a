"""Runnable examples: ``python -m ferry.examples.hello`` and ``python -m ferry.examples.worker``."""

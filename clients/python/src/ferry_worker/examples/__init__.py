"""Runnable examples: ``python -m ferry_worker.examples.hello`` and ``python -m ferry_worker.examples.worker``."""

"""Helpers that know nothing of judging.

Atomic writes, credentials in URLs, rate limiters, progress, stopping on a signal, invisible
Unicode.
"""

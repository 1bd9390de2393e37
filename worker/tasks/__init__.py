"""Celery: the app factory and the thin task shims over plain functions."""

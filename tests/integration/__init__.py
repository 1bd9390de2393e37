"""Integration tests: against real services (Redis, PostgreSQL, RabbitMQ, Celery, LangGraph,
browsers)."""

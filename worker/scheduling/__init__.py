"""Scheduled consolidation: cron ticks and lookback windows (``cron``), schedule files
(``schedules``), running one tick once (``runner``), Celery beat glue (``beat``) and beat's
heartbeat (``heartbeat``). Import from the submodules; only ``beat`` pulls in Celery.
"""

# Load Celery when Django starts so that @shared_task binds to this app.
from config.celery_app import app as celery_app

__all__ = ("celery_app",)

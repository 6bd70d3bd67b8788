"""Database access: engines per dialect (`engine`), tables (`schema`), migrations, and the
dialect-specific SQL that cannot be written portably (`dialect`)."""

from services.common.db.engine import Database

__all__ = ["Database"]

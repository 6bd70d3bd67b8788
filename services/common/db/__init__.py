"""Database access: engines per dialect (`engine`), tables (`schema`), migrations, the
dialect-specific SQL that cannot be written portably (`dialect`), and one module per table or
aggregate holding all of that table's SQL (`batches`, `items`, `files`, …; README
"Architecture" maps who may call what). Nothing outside this package builds SQL: services call
these named operations, and see only the row and connection types re-exported here.
"""

from sqlalchemy.exc import DBAPIError as DatabaseError
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection as Connection

from batchgate.services.common.db.engine import AnyRow, Database

__all__ = ["AnyRow", "Connection", "Database", "DatabaseError", "IntegrityError"]

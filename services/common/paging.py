"""The paging parameters every list shares: `limit` and the `after` cursor.

`limit` is a presence-aware field (`optional int32`), so a `limit=0` is refused instead of
read as "not given". `after` must name an object the caller can see: a cursor that names
nothing (a typo, another project's id) would otherwise page from an arbitrary point, and
the client could not tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from batchgate.services.common import errors
from batchgate.services.common import proto_values as pv


def page_limit(request: Message, default: int, maximum: int) -> int:
    """The request's `limit`, `default` when it is not set; 400 `invalid_limit` outside 1..maximum."""
    if not request.HasField("limit"):
        return default
    limit: int = request.limit
    if not 1 <= limit <= maximum:
        raise errors.invalid(
            f"'limit' must be between 1 and {maximum}; got {limit}.", "invalid_limit", "limit"
        )
    return limit


def unknown_cursor(kind: str, after: str) -> errors.ApiError:
    """400 `invalid_after`: `after` is not one of the caller's objects."""
    return errors.invalid(
        f"'after' must be the id of a {kind} from a previous page; there is no {kind} '{after}' "
        f"of yours to page after.",
        "invalid_after",
        "after",
    )


def page_fields(page: Sequence[Any], has_more: bool) -> dict[str, Any]:
    """The fields of a list answer around `page` (messages with an `id`): `object`, `data`,
    `has_more`, and the `first_id`/`last_id` cursors (null on an empty page)."""
    return {
        "object": "list",
        "data": page,
        "has_more": has_more,
        "first_id": pv.string_or_null(page[0].id if page else None),
        "last_id": pv.string_or_null(page[-1].id if page else None),
    }

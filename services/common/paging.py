"""The paging parameters every list shares: `limit` and the `after` cursor.

`limit` is a presence-aware field (`optional int32`), so a `limit=0` is refused instead of
read as "not given". `after` must be an id of the listed kind (`cursor_id`): lists page in id
order, which is creation order, so an id whose object was deleted since still marks its place
(a list-and-delete loop, the SDKs' auto-paging with a delete per item, had failed on its second
page), while a string that is no such id is refused rather than paged from an arbitrary point.
Another project's id only says where in time to start: the page holds the caller's objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from batchgate.services.common import errors, ids
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


def cursor_id(kind: str, prefix: str, after: str, param: str = "after", code: str = "invalid_after") -> None:
    """400 (`code`, naming `param`) unless `after` is an id of the listed kind (prefix and shape)."""
    if not ids.well_formed(after, prefix):
        raise errors.invalid(
            f"'{param}' must be the id of a {kind} from a previous page; '{after[:80]}' is not one.",
            code,
            param,
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

"""List cursors: any id of the listed kind marks a place, deleted or not; anything else is 400."""

from __future__ import annotations

import pytest

from batchgate.services.common import errors, ids, paging


def test_an_id_of_the_kind_is_well_formed_whether_or_not_its_object_exists() -> None:
    made = ids.file_id()
    assert ids.well_formed(made, ids.FILE_ID_PREFIX)
    assert ids.well_formed("file-01zzzzzzzzzzzzzzzzzzzzzzzz", ids.FILE_ID_PREFIX)  # never made: fine
    for wrong in ("file-nope", made + "x", made.upper(), ids.batch_id(), "file-01zzzzzzzzzzzzzzzzzzzzzzzi"):
        assert not ids.well_formed(wrong, ids.FILE_ID_PREFIX), wrong  # `i`: not in Crockford's alphabet


@pytest.mark.parametrize("cursor", ["msgbatch_nope", "batch_01zzzzzzzzzzzzzzzzzzzzzzzz", ""])
def test_a_cursor_of_another_shape_is_400_naming_its_parameter(cursor: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        paging.cursor_id("message batch", "msgbatch_", cursor or "x", "before_id", "invalid_cursor")
    assert (caught.value.status, caught.value.code, caught.value.param) == (
        400,
        "invalid_cursor",
        "before_id",
    )
    paging.cursor_id("message batch", "msgbatch_", ids.message_batch_id())  # a real one passes

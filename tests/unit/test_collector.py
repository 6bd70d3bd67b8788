"""`freeze_startup_objects`: what startup built leaves the collector's reach, what startup left
as garbage is freed first, and what is made afterwards is collected as before. Run in a child
interpreter: freezing pytest's own heap would keep every test's garbage."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    import gc, weakref
    from batchgate.services.common.collector import freeze_startup_objects

    class Node:
        def __init__(self):
            self.me = self  # a cycle: only the collector frees it

    kept = [Node() for _ in range(3)]
    dropped = Node()
    dropped_ref = weakref.ref(dropped)
    del dropped

    frozen = freeze_startup_objects()
    assert frozen > 1000, frozen  # the modules, classes and functions imported so far
    assert dropped_ref() is None, "startup garbage was frozen instead of freed"
    assert not any(o is kept for o in gc.get_objects()), "a startup object is still scanned"

    later = Node()
    later_ref = weakref.ref(later)
    del later
    gc.collect()
    assert later_ref() is None, "garbage made after the freeze was not collected"
    print("ok", frozen)
    """
)


def test_startup_objects_are_frozen_and_later_garbage_is_still_collected() -> None:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok ")

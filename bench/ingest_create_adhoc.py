"""Ad hoc (until the benchmark issue formalizes it): batch create time and peak RSS of each
process for a large input file, next to a bare orjson loop over the same lines.

    PYTHONPATH=. .venv/bin/python bench/ingest_create_adhoc.py sqlite 12500 50000
    BATCHGATE_TEST_DATABASE_URL=postgresql+asyncpg://postgres@127.0.0.1:5432/test \
        PYTHONPATH=. .venv/bin/python bench/ingest_create_adhoc.py postgres 12500 50000

Starts a private stack without executors (items stay queued, so only the create is measured),
uploads a generated file of N lines of ~3.95 kB, then times POST /v1/batches. Inputs are cached
under /tmp/batchgate-bench. Prints figures; never part of the tests.
"""

import os
import shutil
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson
import psutil

from tests.support import fresh_database, running_stack

LINE_BYTES = 3_950
kind = sys.argv[1] if len(sys.argv) > 1 else "sqlite"
sizes = [int(a) for a in sys.argv[2:]] or [12_500, 50_000]
root = Path("/tmp/batchgate-bench")
root.mkdir(parents=True, exist_ok=True)


def make_input(n: int) -> Path:
    path = root / f"in-{n}.jsonl"
    if path.exists():
        return path
    pad = "lorem ipsum dolor sit amet " * 100
    with open(path, "wb") as out:
        for i in range(n):
            rec = {
                "custom_id": f"req-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {
                    "model": "gpt-4o-mini",
                    "max_tokens": 16,
                    "messages": [
                        {"role": "system", "content": "You are terse."},
                        {"role": "user", "content": f"{i} " + pad},
                    ],
                },
            }
            line = orjson.dumps(rec)
            rec["body"]["messages"][1]["content"] += "x" * (LINE_BYTES - len(line) - 1)
            out.write(orjson.dumps(rec) + b"\n")
    return path


def bare_parse(path: Path) -> tuple[float, float]:
    t = time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            orjson.loads(line)
    parse = time.perf_counter() - t
    t = time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            orjson.dumps(orjson.loads(line)["body"])
    return parse, time.perf_counter() - t


class PeakRss(threading.Thread):
    def __init__(self, pids: dict[str, int]) -> None:
        super().__init__(daemon=True)
        self.procs = {n: psutil.Process(p) for n, p in pids.items()}
        self.base = {n: p.memory_info().rss for n, p in self.procs.items()}
        self.peak = dict(self.base)
        self.stop = False

    def run(self) -> None:
        while not self.stop:
            for n, p in self.procs.items():
                try:
                    self.peak[n] = max(self.peak[n], p.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.02)


MB = 1024 * 1024
for n in sizes:
    path = make_input(n)
    size = path.stat().st_size
    parse_s, roundtrip_s = bare_parse(path)
    print(
        f"\n== {kind}: {n} lines, {size / 1e6:.1f} MB; bare orjson.loads loop {parse_s:.2f} s; "
        f"loads+dumps(body) loop {roundtrip_s:.2f} s",
        flush=True,
    )
    tmp = root / f"stack-{kind}-{n}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    with fresh_database(kind, tmp) as url, running_stack(tmp, url, BATCHGATE_EXECUTORS="0") as s:
        pids = {c.name: c.process.pid for c in s.stack.children if c.process}
        auth = {"Authorization": f"Bearer {s.key}"}
        watch = PeakRss(pids)
        watch.start()
        t = time.perf_counter()
        with open(path, "rb") as f:
            up = httpx.post(
                f"{s.base_url}/files",
                data={"purpose": "batch"},
                files={"file": ("in.jsonl", f)},
                headers=auth,
                timeout=600,
            )
        upload_s = time.perf_counter() - t
        assert up.status_code == 200, up.text
        upload_peak = dict(watch.peak)
        watch.peak = {k: watch.procs[k].memory_info().rss for k in watch.procs}
        before = dict(watch.peak)
        t = time.perf_counter()
        r = httpx.post(
            f"{s.base_url}/batches",
            headers=auth,
            timeout=600,
            json={
                "input_file_id": up.json()["id"],
                "endpoint": "/v1/chat/completions",
                "completion_window": "24h",
            },
        )
        create_s = time.perf_counter() - t
        watch.stop = True
        watch.join()
        assert r.status_code == 200, r.text[:500]
        print(
            f"upload {upload_s:.2f} s; create {create_s:.2f} s (total={r.json()['request_counts']['total']})"
        )
        for name in pids:
            grew = (watch.peak[name] - before[name]) / MB
            print(
                f"  {name:12s} upload peak {upload_peak[name] / MB:7.1f} MB | create: before "
                f"{before[name] / MB:7.1f} MB, peak {watch.peak[name] / MB:7.1f} MB (+{grew:.1f})"
            )
print("load average:", os.getloadavg())

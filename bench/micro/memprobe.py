"""Peak memory of one export, measured in a fresh process.

``python -m bench.micro.memprobe IMPL MODE DB OUT [--tracemalloc]`` where MODE is
``iter`` (iter_export, one JSON line per session as it comes) or ``all``
(export_all: the whole list first, then the lines). Prints one JSON line:
peak RSS (VmHWM, or ``ru_maxrss`` off Linux) before the export (interpreter,
imports, open database) and after it, and with ``--tracemalloc`` the peak of
Python allocations during the export (tracemalloc's own bookkeeping inflates
RSS, hence two runs).
"""

from __future__ import annotations

import gc
import json
import resource
import sys
import time
import tracemalloc
from pathlib import Path

from .impls import IMPLS


def _maxrss_mb() -> float:
    """Peak RSS of this process image: VmHWM (reset by exec, unlike ru_maxrss, which
    Linux carries over from the parent that forked us)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def main(argv: list[str]) -> int:
    trace = "--tracemalloc" in argv
    impl_name, mode, db_path, out_path = [a for a in argv if not a.startswith("--")]
    db = IMPLS[impl_name].open(Path(db_path))
    db.get_session("sess_long")
    gc.collect()
    before = _maxrss_mb()
    if trace:
        tracemalloc.start()
    started = time.perf_counter()
    lines = 0
    with open(out_path, "w", encoding="utf-8") as out:
        sessions = db.iter_export() if mode == "iter" else db.export_all()
        for session in sessions:
            out.write(json.dumps(session) + "\n")
            lines += 1
    seconds = time.perf_counter() - started
    py_peak = tracemalloc.get_traced_memory()[1] / 2**20 if trace else None
    if trace:
        tracemalloc.stop()
    db.close()
    result = {
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(_maxrss_mb(), 1),
        "py_peak_mb": None if py_peak is None else round(py_peak, 1),
        "lines": lines,
        "seconds": round(seconds, 3),
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

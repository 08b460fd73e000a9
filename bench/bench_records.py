"""How long a sentence dataset's records take to build again, as a report asks for them dozens of times:
`python bench/bench_records.py DATA_DIR` (a folder holding sst2/ and agnews/)."""
import sys
import time

from icl_helpers.data.setting import MAIN

d = sys.argv[1]
for name in ("sst2", "agnews"):
    MAIN.records(name, 500, 0, d)
    t = time.perf_counter()
    for _ in range(10):
        MAIN.records(name, 500, 0, d)
    print(name, f"{(time.perf_counter() - t) / 10 * 1000:.0f} ms a call")

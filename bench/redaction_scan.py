"""Where redaction's time goes on a 64 KiB text answer: the text's encoding, Hyperscan's one
pass over it with every rule, and the whole of `redact_text` (what remains is Python around the
pass). CPU on this thread, the minimum of 7 repeats of 100 scans.

    .venv/bin/python bench/redaction_scan.py        # prints a Markdown table
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import hyperscan

sys.path.insert(0, str(Path(__file__).parent))

from content_overhead import _prose

from strictcall.core.redact import Redaction, _detector, hyperscan_database, redact_text


def _per_scan(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(7):
        start = time.thread_time()
        for _ in range(100):
            run()
        best = min(best, (time.thread_time() - start) / 100)
    return best * 1e6


def main() -> None:
    text = _prose(64 * 1024)
    data = text.encode()
    rules = _detector().rules

    def scan(database: hyperscan.Database) -> float:
        return _per_scan(lambda: database.scan(data, match_event_handler=lambda *_: None))

    whole = scan(hyperscan_database(rules))
    print("| step on a 64 KiB text | CPU µs |")
    print("|---|---:|")
    print(f"| encode to UTF-8 | {_per_scan(lambda: text.encode('utf-8', 'surrogatepass')):.1f} |")
    print(f"| Hyperscan pass, all {len(rules)} rules | {whole:.1f} |")
    redacted = _per_scan(lambda: redact_text(text, Redaction(), {}))
    print(f"| redact_text, all of it | {redacted:.1f} |")


if __name__ == "__main__":
    main()

"""Reliability and security harnesses for strictcall (issue 7).

    fuzz.py     grammar-aware and schema-derived fuzzing of handle(), the gateway, POST /rpc,
                the MCP stdio server and MCP over HTTP, invariants checked on every input
                (mutate.py makes the inputs, oracle.py checks the answers)
    load.py     a real server under 64 concurrent connections: errors, latency, RSS, audit
    crash.py    kill -9 during a burst of writes, restart, check nothing acknowledged was lost
                and no retry wrote twice
    faults.py   store faults under a real server (locked, read-only, full disk, deleted)
    procs.py    the real processes: `strictcall serve` and `strictcall serve --mcp-stdio`
    timing.py   refused reads of another owner's note against missing notes, by medians

The modules are importable (the tests under tests/ run bounded versions of each) and the ones
with a `main` are scripts: `python reliability/fuzz.py --inputs 20000` (`make fuzz`). The
figures they gave are in docs/RELIABILITY.md.
"""

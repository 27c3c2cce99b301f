"""The pids cgroup a sandboxed upstream is counted by is gone once it has stopped: what is left
in it is killed, and a cgroup the kernel holds busy for a moment after its last process left
is removed once it may be (never left behind empty)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from strictcall.services.proxy.spawn import Launch, Spawn, bwrap_works, launch, release


def _launched(tmp_path: Path) -> Launch:
    """A sandboxed launch with a pids cgroup of its own, else skip (none may be made here)."""
    if not bwrap_works():
        pytest.skip("bubblewrap cannot run here")
    started = launch([sys.executable, "-c", "pass"], Spawn(sandbox="bwrap"), {}, str(tmp_path))
    if started.cgroup is None:
        pytest.skip("no pids cgroup may be made here (not root, or no pids controller)")
    return started


def test_a_cgroup_busy_for_a_moment_after_its_last_process_is_still_removed(
    tmp_path: Path,
) -> None:
    started = _launched(tmp_path)
    assert started.cgroup is not None
    busy = Path(started.cgroup, "held")  # a child cgroup: the kernel answers EBUSY, as it does
    busy.mkdir()  # while the last process is still leaving

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(release, started)
            await anyio.sleep(0.2)  # release has met EBUSY by now and must try again
            assert Path(started.cgroup or "").is_dir()
            busy.rmdir()

    anyio.run(main)
    assert not Path(started.cgroup).exists()


def test_what_is_left_running_in_the_cgroup_is_killed_and_the_cgroup_removed(
    tmp_path: Path,
) -> None:
    started = _launched(tmp_path)
    assert started.cgroup is not None
    procs = os.path.join(started.cgroup, "cgroup.procs")
    left = subprocess.Popen(["/bin/sh", "-c", 'echo $$ > "$0" && exec sleep 60', procs])
    try:

        async def joined() -> None:
            with anyio.fail_after(5):  # it has joined its cgroup
                while not Path(procs).read_text().split():
                    await anyio.sleep(0.01)

        anyio.run(joined)

        async def reap_and_release() -> None:
            async with anyio.create_task_group() as group:
                group.start_soon(release, started)
                # the killed process is our child: reap it so the kernel lets its cgroup go
                await anyio.to_thread.run_sync(left.wait)

        anyio.run(reap_and_release)
        assert left.returncode == -9
        assert not Path(started.cgroup).exists()
    finally:
        if left.poll() is None:
            left.kill()
            left.wait()

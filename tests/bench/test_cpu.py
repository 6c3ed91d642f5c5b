"""bench/run's CPU of the database server counts what a process spent after it has exited."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from bench.run import database_cpu_seconds

# A parent that starts a child, which spends 0.3 s of CPU and waits; told to, the parent lets the
# child end, reaps it, and says so. Each step waits on a line, never on time.
PARENT = textwrap.dedent(
    """
    import subprocess, sys
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\\n"
         "while time.process_time() < 0.3: pass\\n"
         "print('spent', flush=True); sys.stdin.readline()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    child.stdout.readline()
    print("child spent", flush=True)
    sys.stdin.readline()
    child.stdin.write("end\\n"); child.stdin.flush()
    child.wait()
    print("child reaped", flush=True)
    sys.stdin.readline()  # kept alive until the test is done
    """
)


def test_a_child_that_exits_still_counts() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdin is not None and parent.stdout is not None
    try:
        assert parent.stdout.readline() == "child spent\n"
        alive = database_cpu_seconds(parent.pid)
        assert alive >= 0.25  # /proc counts whole clock ticks: a little under the child's 0.3 s
        parent.stdin.write("go\n")
        parent.stdin.flush()
        assert parent.stdout.readline() == "child reaped\n"
        assert database_cpu_seconds(parent.pid) >= alive  # the child's time moved to the parent's
    finally:
        parent.kill()  # its child reads end-of-file then, and ends too
        parent.wait(30)
    assert database_cpu_seconds(None) == 0.0

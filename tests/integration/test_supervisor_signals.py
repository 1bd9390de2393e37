"""A stop asked for while a supervisor starts up is never lost: ``StopSignals`` records it
before the first step, so even a library that swallows the ``KeyboardInterrupt`` cannot keep
the children from being left unstarted; once children run, each signal reaches each of them
once. Each supervisor runs in a real subprocess, signalled as a terminal would."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

#: Bounds every wait on a subprocess.
DEADLINE_SECONDS = 30.0


def _supervisor(body: str, marker: Path) -> subprocess.CompletedProcess[bytes]:
    code = textwrap.dedent(
        """
        import os, signal, sys
        from worker.runtime.processes import Child, StopSignals, supervise
        marker = sys.argv[1]
        # A child that would leave proof of its start behind.
        child = Child("lane", [sys.executable, "-c", f"open({marker!r}, 'w').close()"])
        """
    ) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code, str(marker)],
        capture_output=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )


def test_a_ctrl_c_swallowed_during_start_up_still_stops_before_any_child_starts(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    done = _supervisor(
        """
        with StopSignals() as signals:
            try:  # a start-up step in a library that swallows KeyboardInterrupt
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
            except BaseException:
                pass
            sys.exit(supervise([child], signals=signals))
        """,
        marker,
    )
    assert done.returncode == 130, done.stderr.decode()
    assert not marker.exists()


def test_a_ctrl_c_during_start_up_interrupts_the_step_under_way(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    done = _supervisor(
        """
        import time
        with StopSignals() as signals:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(30)  # a slow check: the Ctrl-C must not wait for it
            except KeyboardInterrupt:
                print("interrupted")
            sys.exit(supervise([child], signals=signals))
        """,
        marker,
    )
    assert done.returncode == 130, done.stderr.decode()
    assert done.stdout.decode().strip() == "interrupted"
    assert not marker.exists()


def test_a_ctrl_c_inside_generated_code_during_start_up_exits_130_under_python_m(
    tmp_path: Path,
) -> None:
    # Run as `python -m`, as `memworker run` and its lanes are: after a plain KeyboardInterrupt
    # crossed code run from a string, CPython 3.11 ends such a process by SIGINT (-2) although
    # the command exited 130.
    (tmp_path / "startup_step.py").write_text(
        textwrap.dedent(
            """
            import sys
            from worker.runtime.processes import Child, StopSignals, supervise
            child = Child("lane", [sys.executable, "-c", f"open({sys.argv[1]!r}, 'w').close()"])
            with StopSignals() as signals:
                try:  # a library building a class from source text when Ctrl-C comes
                    exec("import os, signal, time\\nos.kill(os.getpid(), signal.SIGINT)\\n"
                         "time.sleep(30)")
                except KeyboardInterrupt:
                    print("interrupted")
                sys.exit(supervise([child], signals=signals))
            """
        )
    )
    marker = tmp_path / "started"
    done = subprocess.run(
        [sys.executable, "-m", "startup_step", str(marker)],
        capture_output=True,
        timeout=DEADLINE_SECONDS,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 130, done.stderr.decode()
    assert done.stdout.decode().strip() == "interrupted"
    assert not marker.exists()


def test_a_second_ctrl_c_interrupts_when_the_first_was_swallowed(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    done = _supervisor(
        """
        import time
        with StopSignals() as signals:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):
                    pass
            except BaseException:
                pass  # the first is swallowed by a library
            try:
                os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C again
                time.sleep(30)
            except KeyboardInterrupt:
                print("interrupted")
            sys.exit(supervise([child], signals=signals))
        """,
        marker,
    )
    assert done.returncode == 130, done.stderr.decode()
    assert done.stdout.decode().strip() == "interrupted"
    assert not marker.exists()


def test_a_sigterm_during_start_up_lets_the_step_finish_and_starts_no_child(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    done = _supervisor(
        """
        with StopSignals() as signals:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass
            print("step finished")
            sys.exit(supervise([child], signals=signals))
        """,
        marker,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "step finished"
    assert not marker.exists()


#: A child that counts the SIGTERMs it gets until its stdin closes, then prints the count.
COUNTING_CHILD = textwrap.dedent(
    """
    import signal, sys
    got = []
    signal.signal(signal.SIGTERM, lambda *_: got.append(1))
    print("ready", flush=True)
    sys.stdin.read()
    print(len(got), flush=True)
    """
)


def test_a_signal_that_came_while_a_child_started_reaches_it_once() -> None:
    from worker.runtime.processes import StopSignals

    signals = StopSignals()
    signals.received.append(signal.SIGTERM)
    child = subprocess.Popen(
        [sys.executable, "-c", COUNTING_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"ready"
        signals.tell(child)
        signals.tell(child)  # a second look sends nothing more
        out, _ = child.communicate(timeout=DEADLINE_SECONDS)
        assert out.strip() == b"1"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()

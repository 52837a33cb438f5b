"""A real pseudo-terminal for the live view's tests: a program drawn on it, read from its master side."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import termios
import time

__all__ = ["CURSOR_ESCAPES", "DEADLINE", "Terminal"]

DEADLINE = 90.0
"""Seconds a test waits for what it expects before failing: the run itself goes on meanwhile."""

CURSOR_ESCAPES = re.compile(rb"\x1b\[\?(25|1049|1047|47)([hl])")
"""Showing or hiding the cursor, entering or leaving an alternate screen: what must be undone."""


class Terminal:
    """A real pseudo-terminal whose slave is a program's stdin, stdout, stderr and controlling
    terminal; the test reads what the program draws from the master side."""

    def __init__(self, command: list[str], rows: int = 50, columns: int = 130) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.modes_before = termios.tcgetattr(self.slave)
        environment = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(rows)}
        self.process = subprocess.Popen(command, stdin=self.slave, stdout=self.slave, stderr=self.slave,
                                        env=environment, preexec_fn=self._take_terminal)
        self.output = b""

    def _take_terminal(self) -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    def read_until(self, pattern: bytes, count: int = 1) -> bytes:
        """Read until ``pattern`` has appeared ``count`` times, or the deadline passes."""
        end = time.monotonic() + DEADLINE
        while self.output.count(pattern) < count and time.monotonic() < end:
            self.read_available(0.2)
        assert self.output.count(pattern) >= count, f"{pattern!r} not drawn {count} times: {self.output[-3000:]!r}"
        return self.output

    def read_available(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if ready:
            try:
                self.output += os.read(self.master, 65536)
            except OSError:
                pass

    def wait_for_exit(self) -> int:
        end = time.monotonic() + DEADLINE
        while self.process.poll() is None and time.monotonic() < end:
            self.read_available(0.2)
        self.read_available(0.2)
        return self.process.wait(timeout=5)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        os.close(self.master)
        os.close(self.slave)

"""Progress of long work (generating, compiling) on stderr: one line, rewritten in place.

Every ``progress=`` keyword (:func:`rbdgen.build`, :func:`rbdgen.package.load_package`, a
generated package's ``load``/``build``) takes

* ``None`` (the default): a line on stderr, rewritten as the work goes on, when stderr is a
  terminal (``rbdgen: compiling 7/23: rbd_iiwa14_aba_f64.cpp``) and cleared when the work is
  done; nothing otherwise (tests, pipes, notebooks and logs stay quiet);
* ``True``: the same line on a terminal, one plain line per message elsewhere (what the CLI
  shows; ``--quiet`` is ``False``);
* ``False``: nothing;
* a callable of one string: called with each message as it is (possibly from several threads:
  translation units compile in parallel).

The messages say what is being done and, where that is known, how far it is:
``compiling 7/23: <source>`` (started in that order, the longest first), ``linking <lib>.so``,
``waiting for another process building <lib>.so``, ``tracing <kernel>``.

No dependency: a terminal line needs a carriage return and padding, not tqdm or rich.
"""
from __future__ import annotations

import contextlib
import shutil
import sys
import threading

PREFIX = "rbdgen: "


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed, or not a file
        return False


class Line:
    """A progress callback: on a terminal, one line rewritten in place (each message replaces the
    last, cut to the terminal's width so that it never wraps); elsewhere one line per message
    when ``plain``, else nothing. :meth:`close` clears a drawn line. Thread-safe."""

    def __init__(self, stream=None, *, plain: bool = False, prefix: str = PREFIX):
        self.stream = stream if stream is not None else sys.stderr
        self.tty = _isatty(self.stream)
        self.plain = plain
        self.prefix = prefix
        self._drawn = 0  # characters on the terminal line now
        self._lock = threading.Lock()

    @property
    def shows(self) -> bool:
        """Whether messages reach the stream at all."""
        return self.tty or self.plain

    def __call__(self, msg) -> None:
        text = self.prefix + " ".join(str(msg).split())
        with self._lock:
            try:
                if self.tty:
                    width = max(shutil.get_terminal_size((80, 24)).columns - 1, 20)
                    if len(text) > width:
                        text = text[: width - 1] + "…"
                    pad = " " * max(self._drawn - len(text), 0)  # what is left of a longer line
                    self.stream.write("\r" + text + pad)
                    self._drawn = len(text)
                elif self.plain:
                    self.stream.write(text + "\n")
                else:
                    return
                self.stream.flush()
            except (OSError, ValueError):  # a closed or broken stream: progress is not worth an error
                pass

    def close(self) -> None:
        """Clear the line drawn on the terminal (the cursor back at its start)."""
        with self._lock:
            if self._drawn:
                try:
                    self.stream.write("\r" + " " * self._drawn + "\r")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
                self._drawn = 0


def callback(progress):
    """``progress`` (see the module docstring) as a callable of one message, or None where
    nothing is shown; a :class:`Line` it makes is the caller's to :meth:`~Line.close`."""
    if progress is False:
        return None
    if progress is None or progress is True:
        line = Line(plain=progress is True)
        return line if line.shows else None
    if not callable(progress):
        raise TypeError(f"progress must be None, True, False or a callable of one string, "
                        f"got {type(progress).__name__}")
    return progress


@contextlib.contextmanager
def reporting(progress):
    """``with reporting(progress) as p:`` the work, calling ``p(message)`` where ``p`` is not None;
    a line drawn on the terminal is cleared when the block ends."""
    p = callback(progress)
    try:
        yield p
    finally:
        if isinstance(p, Line) and p is not progress:
            p.close()


def labelled(progress, label: str):
    """``progress`` with each message prefixed by ``label: `` (None stays None)."""
    if progress is None:
        return None
    return lambda msg: progress(f"{label}: {msg}")

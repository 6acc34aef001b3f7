"""Progress where a person reads it: redrawn on a terminal, whole lines in a log file."""

from __future__ import annotations

import io

from lstmstudy import terminal


class Log(io.StringIO):
    def isatty(self) -> bool:
        return False


def test_a_bar_into_a_file_writes_whole_lines_at_its_rate_not_carriage_returns(monkeypatch):
    log = Log()
    monkeypatch.setattr("sys.stderr", log)
    bar = terminal.progress(total=1000, desc="01_cudnn_fallback on cpu-x", unit="config")
    for _ in range(1000):
        bar.update(1)
    bar.close()
    text = log.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    # one at the start and one at the end: the thousand updates came within one interval (LINE_EVERY_S)
    assert len(lines) == 2 and lines[0].startswith("01_cudnn_fallback on cpu-x:   0%")
    assert "100%" in lines[-1] and "1000/1000" in lines[-1]


def test_a_bar_on_a_terminal_is_redrawn_in_place(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    with terminal.progress(total=3, desc="demo", mininterval=0) as bar:
        for _ in range(3):
            bar.update(1)
    assert screen.getvalue().count("\r") >= 3

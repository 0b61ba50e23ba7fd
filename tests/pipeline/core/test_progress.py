"""Progress displays: plain lines for logs and pipes, live rows on a terminal, nothing when
none is installed."""

from __future__ import annotations

import io
import re

from rich.console import Console

from pipeline.core import progress


def test_plain_lines_say_each_step_and_long_work_about_every_interval():
    stream = io.StringIO()
    display = progress.LineDisplay(stream, every=0.0)  # every advance is "long" here
    with progress.shown(display):
        progress.start("quality", 100)
        progress.advance("quality", 40, "part 2/5")
        with progress.progress("quality: language", 3) as advance:  # a loop inside the step
            advance(3)
        progress.finish("quality", "99 records out")
        progress.start("gate")
        progress.finish("gate", "12 checks, 0 failed")
    lines = [re.sub(r"^\[\s*[\d.]+ s\] ", "", line) for line in stream.getvalue().splitlines()]
    assert lines[0] == "quality: started (100 records)"
    assert re.fullmatch(
        r"quality: part 2/5, 40 of 100 records \(40%\), ETA \d+ s, [\d,]+ records/s, 0 s elapsed",
        lines[1],
    ), lines[1]
    assert lines[2].startswith("quality: language: 3") and "items/s" in lines[2]
    assert re.fullmatch(r"quality: done in [\d.]+ s; 99 records out", lines[-3])
    assert lines[-2:] == ["gate: started", lines[-1]]
    assert re.fullmatch(r"gate: done in [\d.]+ s; 12 checks, 0 failed", lines[-1])
    assert not any("language: started" in line for line in lines)  # short inner loops: silent


def test_plain_lines_wait_for_the_interval_and_a_total_learnt_late():
    stream = io.StringIO()
    display = progress.LineDisplay(stream, every=3600.0)
    with progress.shown(display):
        progress.start("ingest", None, "parts")
        progress.start("ingest", 8, "parts")  # its total became known: not said again
        for _ in range(8):
            progress.advance("ingest", 1)
        progress.finish("ingest")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].endswith("ingest: started")
    assert display.steps == {}


def test_live_rows_show_done_of_total_and_end_ticked():
    console = Console(file=io.StringIO(), force_terminal=True, width=140, record=True)
    with progress.LiveDisplay(console) as display, progress.shown(display):
        progress.start("near_dedup", 200)
        progress.advance("near_dedup", 50, "keys 1/4")
        with progress.progress("embedding", 10) as advance:
            advance(10)
        progress.finish("near_dedup", "180 records out")
    text = console.export_text()
    assert "✓ near_dedup (180 records out)" in text and "200/200" in text
    assert "records/s" in text
    # an inner loop's row goes when it ends
    assert [task.description for task in display.bars.tasks] == ["✓ near_dedup (180 records out)"]


def test_without_a_display_progress_is_silent_and_free(capfd):
    assert not progress.shown_anywhere()
    progress.start("x", 3)
    progress.advance("x", 1)
    progress.finish("x")
    with progress.progress("loop", 2) as advance:
        advance(2)
    assert capfd.readouterr() == ("", "")  # silent
    assert not progress.shown_anywhere()  # and nothing was set up to say it later

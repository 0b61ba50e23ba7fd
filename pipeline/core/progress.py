"""Progress of long work, shown by the display the command line installs: live rows on a
terminal (`LiveDisplay`), a plain line per step start and end and about every 10 s of long
work elsewhere (`LineDisplay`). With none installed (`--quiet`, a deployment's flow run,
tests) progress costs nothing and says nothing: the Prefect log tells those runs' story.

Work reports to it by step name: the curate flow for its steps (records of the step's input
done as its parts finish), and long loops inside a step (embedding batches, training steps)
through `progress(description, total)`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TextIO


class Display(Protocol):
    def start(self, step: str, total: int | None, unit: str, inner: bool = False) -> None: ...
    def advance(self, step: str, done: int, phase: str | None = None) -> None: ...
    def finish(self, step: str, note: str = "") -> None: ...


_display: Display | None = None


@contextmanager
def shown(display: Display | None) -> Iterator[None]:
    """Report this process's progress to `display` while the block runs."""
    global _display
    previous, _display = _display, display
    try:
        yield
    finally:
        _display = previous


def shown_anywhere() -> bool:
    """Whether a display shows progress (else what it would say need not be computed)."""
    return _display is not None


def start(step: str, total: int | None = None, unit: str = "records") -> None:
    """`step` began (again: its total became known)."""
    if _display is not None:
        _display.start(step, total, unit)


def advance(step: str, done: int = 0, phase: str | None = None) -> None:
    """`done` more units of `step` finished; `phase` names what it does now."""
    if _display is not None:
        _display.advance(step, done, phase)


def finish(step: str, note: str = "") -> None:
    if _display is not None:
        _display.finish(step, note)


@contextmanager
def progress(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yield `advance(n)` for a loop of `total` units inside a step."""
    if _display is None:
        yield lambda n=1: None
        return
    display = _display
    display.start(description, total, "", inner=True)
    try:
        yield lambda n=1: display.advance(description, n)
    finally:
        display.finish(description)


def _rate(done: int, seconds: float, unit: str) -> str:
    return f"{done / seconds:,.0f} {unit or 'items'}/s" if seconds > 0 and done else ""


class LineDisplay:
    """One plain line per step start and end, and one about every `every` seconds of a long
    step: for logs and pipes."""

    def __init__(self, stream: TextIO, every: float = 10.0):
        self.stream, self.every = stream, every
        self.began = time.monotonic()
        self.steps: dict[str, dict] = {}
        self.lock = threading.Lock()

    def _say(self, text: str) -> None:
        self.stream.write(f"[{time.monotonic() - self.began:7.1f} s] {text}\n")
        self.stream.flush()

    def start(self, step: str, total: int | None, unit: str, inner: bool = False) -> None:
        """A step's start is said; a loop inside one (`inner`) is said only if it is long."""
        with self.lock:
            if step in self.steps:  # its total became known
                self.steps[step] |= {"total": total, "unit": unit}
                return
            now = time.monotonic()
            self.steps[step] = {
                "total": total, "unit": unit, "done": 0, "at": now, "said": now, "inner": inner
            }  # fmt: skip
            if not inner:
                self._say(f"{step}: started" + (f" ({total:,} {unit})" if total and unit else ""))

    def advance(self, step: str, done: int, phase: str | None = None) -> None:
        with self.lock:
            state = self.steps.get(step)
            if state is None:
                return
            state["done"] += done
            now = time.monotonic()
            if now - state["said"] < self.every:
                return
            state["said"] = now
            self._say(f"{step}: " + _where(state, now, phase))

    def finish(self, step: str, note: str = "") -> None:
        with self.lock:
            state = self.steps.pop(step, None)
            if state is None:
                return
            seconds = time.monotonic() - state["at"]
            if not state["inner"] or seconds >= self.every:
                self._say(f"{step}: done in {seconds:.1f} s" + (f"; {note}" if note else ""))


def _where(state: dict, now: float, phase: str | None) -> str:
    total, done, unit = state["total"], state["done"], state["unit"]
    seconds = now - state["at"]
    parts = [phase] if phase else []
    if total:
        parts.append(
            " ".join(filter(None, [f"{done:,} of {total:,}", unit, f"({done / total:.0%})"]))
        )
        if done and done < total:
            parts.append(f"ETA {(total - done) * seconds / done:.0f} s")
    elif done:
        parts.append(f"{done:,} {unit}".strip())
    if rate := _rate(done, seconds, unit):
        parts.append(rate)
    parts.append(f"{seconds:.0f} s elapsed")
    return ", ".join(parts)


class LiveDisplay:
    """A live row per step on a terminal: done of total, rate, elapsed and time left."""

    def __init__(self, console):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bars = Progress(
            TextColumn("{task.description:<28}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]:>16}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            refresh_per_second=5,
        )
        self.tasks: dict[str, tuple] = {}  # step -> (task id, started, unit)
        self.inner: set[str] = set()  # loops inside a step: their rows go when they end
        self.lock = threading.Lock()

    def __enter__(self) -> LiveDisplay:
        self.bars.start()
        return self

    def __exit__(self, *exc) -> None:
        self.bars.stop()

    def start(self, step: str, total: int | None, unit: str, inner: bool = False) -> None:
        with self.lock:
            if step in self.tasks:  # its total became known
                task, began, _ = self.tasks[step]
                self.bars.update(task, total=total, unit=unit)
                self.tasks[step] = (task, began, unit)
                return
            task = self.bars.add_task(step, total=total, unit=unit, rate="")
            self.tasks[step] = (task, time.monotonic(), unit)
            if inner:
                self.inner.add(step)

    def advance(self, step: str, done: int, phase: str | None = None) -> None:
        with self.lock:
            if step not in self.tasks:
                return
            task, began, unit = self.tasks[step]
            self.bars.advance(task, done)
            completed = self.bars.tasks[self._index(task)].completed
            description = f"{step} ({phase})" if phase else step
            rate = _rate(int(completed), time.monotonic() - began, unit)
            self.bars.update(task, description=description, rate=rate)

    def finish(self, step: str, note: str = "") -> None:
        with self.lock:
            if step not in self.tasks:
                return
            task, began, unit = self.tasks.pop(step)
            if step in self.inner:
                self.inner.discard(step)
                self.bars.remove_task(task)
                return
            current = self.bars.tasks[self._index(task)]
            if current.total is None:
                self.bars.update(task, total=max(current.completed, 1))
            self.bars.update(
                task,
                completed=current.total or current.completed,
                description=f"✓ {step}" + (f" ({note})" if note else ""),
                rate=_rate(int(current.completed), time.monotonic() - began, unit),
            )
            self.bars.stop_task(task)

    def _index(self, task) -> int:
        return next(i for i, t in enumerate(self.bars.tasks) if t.id == task)

"""Progress lines for long jobs: rate, items/s, ETA, then a summary.

One object serves every long job (data creation, training, eval, feature extraction), so all of
them report in the same format:
    [train] 1200/10000 steps (12.0%)  3.41 steps/s  109.1 examples/s  ETA 43m01s  loss=6.21
and `log`, where a run's and a data job's other lines go by default (stderr, flushed).
"""
import sys
import time


def log(message):
    print(message, file=sys.stderr, flush=True)


def format_duration(seconds):
    seconds = int(round(max(seconds, 0)))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    if minutes:
        return f"{minutes}m{seconds:02d}s"
    return f"{seconds}s"


class Progress:
    """Counts work done and prints a progress line at most every `interval` seconds.

    Args:
      name: shown in brackets at the start of each line.
      total: total number of units, or None when unknown (then no ETA).
      unit: name of the counted unit ("steps", "documents", ...).
      secondary_unit: optional second rate (e.g. "examples" while counting steps), or a tuple
        of them ("sequences", "tokens"); pass their increments to `update(..., secondary=n)`
        (a tuple of as many for a tuple).
      interval: minimum seconds between lines.
      stream: where to print (stderr by default, so stdout stays clean for results).
      start: units already done before this run (a resumed job); rates count only new work.
    """

    def __init__(self, name, total=None, unit="items", secondary_unit=None, interval=10.0,
                 stream=None, start=0):
        self.name = name
        self.total = total
        self.unit = unit
        self.secondary_units = ((secondary_unit,) if isinstance(secondary_unit, str)
                                else tuple(secondary_unit or ()))
        self.interval = interval
        self.stream = stream or sys.stderr
        self.start_count = start
        self.count = start
        self.secondary = [0] * len(self.secondary_units)
        self.start_time = time.monotonic()
        self.last_print = self.start_time

    @property
    def elapsed(self):
        return time.monotonic() - self.start_time

    def rate(self):
        elapsed = self.elapsed
        return (self.count - self.start_count) / elapsed if elapsed > 0 else 0.0

    def line(self, **metrics):
        rate = self.rate()
        parts = []
        if self.total:
            parts.append(f"{self.count}/{self.total} {self.unit} ({100.0 * self.count / self.total:.1f}%)")
        else:
            parts.append(f"{self.count} {self.unit}")
        parts.append(f"{rate:.2f} {self.unit}/s")
        parts += self._secondary_rates()
        if self.total and rate > 0:
            parts.append(f"ETA {format_duration((self.total - self.count) / rate)}")
        for key, value in metrics.items():
            parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
        return f"[{self.name}] " + "  ".join(parts)

    def _secondary_rates(self):
        elapsed = self.elapsed
        return [f"{total / elapsed if elapsed > 0 else 0.0:.1f} {unit}/s"
                for unit, total in zip(self.secondary_units, self.secondary)]

    def update(self, n=1, secondary=0, force=False, **metrics):
        """Adds `n` units; prints a line if `interval` seconds passed (or `force`)."""
        self.count += n
        values = secondary if isinstance(secondary, (tuple, list)) else (secondary,)
        for i, value in enumerate(values[:len(self.secondary)]):
            self.secondary[i] += value
        now = time.monotonic()
        if force or now - self.last_print >= self.interval:
            self.last_print = now
            print(self.line(**metrics), file=self.stream, flush=True)

    def summary(self, **totals):
        """Prints the closing line: units done, wall time, mean rate and any totals given."""
        parts = [f"[{self.name}] done: {self.count - self.start_count} {self.unit} in "
                 f"{format_duration(self.elapsed)} ({self.rate():.2f} {self.unit}/s)"]
        parts += self._secondary_rates()
        for key, value in totals.items():
            parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
        print("  ".join(parts), file=self.stream, flush=True)

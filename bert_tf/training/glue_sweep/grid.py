"""The grid of a sweep's runs: learning rates x batch sizes x epochs x restarts (the paper's
section 4.1 protocol by default), each point's run folder name, and the check that every
point makes training steps."""
import dataclasses
import math

from bert_tf.errors import argument_error
from bert_tf.tasks.steps import train_steps

# The paper's section 4.1 protocol.
PAPER_LEARNING_RATES = (5e-5, 4e-5, 3e-5, 2e-5)
PAPER_BATCH_SIZES = (32,)
PAPER_EPOCHS = (3.0,)


@dataclasses.dataclass(frozen=True)
class GridPoint:
    learning_rate: float
    batch_size: int
    epochs: float
    restart: int = 0

    @property
    def name(self):
        """Its run folder's name."""
        return (f"lr{self.learning_rate:g}_bs{self.batch_size}_ep{self.epochs:g}"
                f"_r{self.restart}")

    @property
    def setting(self):
        return (f"lr {self.learning_rate:g}, batch {self.batch_size}, {self.epochs:g} epochs"
                + (f", restart {self.restart}" if self.restart else ""))


def make_grid(learning_rates=PAPER_LEARNING_RATES, batch_sizes=PAPER_BATCH_SIZES,
              epochs=PAPER_EPOCHS, restarts=1):
    """Every (learning rate, batch size, epochs, restart) in that nesting order; InputError
    naming the argument of a value out of range or given twice (or two values that the run
    folders' names, 6 significant digits, would not tell apart)."""
    checks = (("learning_rates", learning_rates, float, lambda v: 0 < v < 1, "in (0, 1)"),
              ("batch_sizes", batch_sizes, int, lambda v: v >= 1, "positive integers"),
              ("epochs", epochs, float, lambda v: 0 < v <= 1000, "in (0, 1000]"))
    values = {}
    for name, given, kind, in_range, what in checks:
        if not given:
            raise argument_error(name, "needs at least one value")
        parsed = []
        for value in given:
            try:
                number = kind(value)
            except (TypeError, ValueError):
                raise argument_error(name, f"must be {what}, got {value!r}") from None
            if kind is int and number != float(value):
                raise argument_error(name, f"must be {what}, got {value!r}")
            if not (math.isfinite(number) and in_range(number)):
                raise argument_error(name, f"must be {what}, got {value!r}")
            # Its runs' folder names (GridPoint.name) must tell it from the others.
            shown = f"{number:g}" if kind is float else str(number)
            if any(shown == (f"{other:g}" if kind is float else str(other)) for other in parsed):
                raise argument_error(name, f"gives {value!r} twice (as {shown} in its runs' "
                                           f"folder names)")
            parsed.append(number)
        values[name] = parsed
    if isinstance(restarts, bool) or not isinstance(restarts, int) or not 1 <= restarts <= 100:
        raise argument_error("restarts", f"must be an integer in [1, 100], got {restarts!r}")
    return [GridPoint(lr, bs, ep, r) for lr in values["learning_rates"]
            for bs in values["batch_sizes"] for ep in values["epochs"] for r in range(restarts)]


def check_steps(task_name, num_train, grid):
    """Every grid point makes training steps of the task's `num_train` examples: otherwise an
    InputError naming the grid's argument."""
    for point in grid:
        train_steps(num_train, point.batch_size, point.epochs, "epochs",
                    f"{point.epochs:g} epochs of the {num_train} {task_name} training examples "
                    f"at batch size {point.batch_size}")

"""The training steps a training split makes: the original's int(examples / batch size x
epochs), and the rule that a run must make at least one."""
from bert_tf.errors import argument_error


def train_steps(num_examples, batch_size, num_train_epochs, argument, described):
    """int(num_examples / batch_size * num_train_epochs); an InputError naming `argument`
    when that is no step: "`described` is no training step"."""
    num_train_steps = int(num_examples / batch_size * num_train_epochs)
    if num_train_steps < 1:
        raise argument_error(argument, f"{described} is no training step")
    return num_train_steps


def epoch_steps(num_examples, batch_size, num_train_epochs, warmup_proportion,
                what="examples"):
    """(num_train_steps, num_warmup_steps) as the original: int(examples / batch size *
    epochs), warmup_proportion of them; InputError naming the argument that makes no
    training step or cannot be meant."""
    if batch_size <= 0:
        raise argument_error("train_batch_size", f"must be positive, got {batch_size}")
    if not 0 <= warmup_proportion <= 1:
        raise argument_error("warmup_proportion", f"must be in [0, 1], got {warmup_proportion}")
    num_train_steps = train_steps(num_examples, batch_size, num_train_epochs, "num_train_epochs",
                                  f"{num_train_epochs} epochs of {num_examples} {what} at batch "
                                  f"size {batch_size}")
    return num_train_steps, int(num_train_steps * warmup_proportion)

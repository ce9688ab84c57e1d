"""Eval and predict outputs: each step's per-example outputs (the task's eval_outputs or
predict_outputs) gathered across replicas and workers, and over the steps in record order,
with the compiled step kept while its model lives."""
import weakref

import numpy as np
import tensorflow as tf

from bert_tf.data.input_pipeline import EXAMPLE_INDEX
from bert_tf.progress import Progress
from bert_tf.training.loops import input_iterator


def gather_outputs(strategy, model, task, dataset_fn, num_steps, mode="eval"):
    """Runs `num_steps` eval or predict steps; returns the per-example outputs, gathered.

    mode "eval" collects `task.eval_outputs`, "predict" `task.predict_outputs`: dicts of
    [B, ...] tensors per replica, concatenated over replicas (strategy.gather, in global-batch
    order, across workers too) and over steps, as numpy arrays in record order.
    """
    progress = Progress(mode, total=num_steps, unit="steps", interval=30.0)
    pieces = {}
    for outputs in iterate_outputs(strategy, model, task, dataset_fn, num_steps, mode):
        for name, value in outputs.items():
            pieces.setdefault(name, []).append(value)
        progress.update(1)
    progress.summary()
    outputs = {name: np.concatenate(values, axis=0) for name, values in pieces.items()}
    if EXAMPLE_INDEX in outputs:  # batches were sorted by length: back to record order
        order = np.argsort(outputs.pop(EXAMPLE_INDEX), kind="stable")
        outputs = {name: values[order] for name, values in outputs.items()}
    return outputs


def iterate_outputs(strategy, model, task, dataset_fn, num_steps, mode="predict"):
    """`gather_outputs` one step at a time (a task that writes as the model runs:
    `Task.streams_predictions`): yields each step's outputs, numpy arrays gathered across
    replicas in global-batch order, in the dataset's order (not put back in record order by
    EXAMPLE_INDEX); no progress lines. Each step runs when the next item is asked for."""
    step = _gather_step(strategy, model, task, mode)
    iterator = input_iterator(strategy, dataset_fn)
    for _ in range(num_steps):
        yield {name: value.numpy() for name, value in step(iterator).items()}


# model -> {(task, strategy, mode): compiled step}; an entry goes with its model. The steps
# hold the model weakly: a value that held its own key would keep it, and every model an
# eval or predict ran (each run of a sweep), for good.
_GATHER_STEPS = weakref.WeakKeyDictionary()


def _gather_step(strategy, model, task, mode):
    """The compiled eval/predict step, kept while the model lives: a second call (eval during
    training, the Python API's predictions on one model) does not trace again."""
    # A task that runs no model (model None) gets a step of its own each time.
    cache = {} if model is None else _GATHER_STEPS.setdefault(model, {})
    key = (task, strategy, mode)
    if key in cache:
        return cache[key]
    outputs_of = task.eval_outputs if mode == "eval" else task.predict_outputs
    model_ref = (lambda: None) if model is None else weakref.ref(model)

    def replica_step(batch):
        outputs = outputs_of(batch, task.outputs(model_ref(), batch, training=False))
        if EXAMPLE_INDEX in batch:
            outputs = dict(outputs, **{EXAMPLE_INDEX: batch[EXAMPLE_INDEX]})
        return outputs

    @tf.function(autograph=False)  # no data-dependent Python control flow: spare the AST rewrite
    def step(iterator):
        per_replica = strategy.run(replica_step, args=(next(iterator),))
        return tf.nest.map_structure(lambda v: strategy.gather(v, axis=0), per_replica)

    cache[key] = step
    return step

"""The generic training loop on tf.distribute, reused by every task.

The task-specific part is a `bert_tf.tasks.base.Task` (its train methods: outputs, normalizers,
train_metrics, train_metric_names; restore_foreign). `bert_tf.training.runner.run` drives this
loop for the command lines (and eval and predict, `bert_tf.training.gathering`). Here, once:

- `iterations_per_loop` steps per tf.function call (strategy.run in a tf.range loop), so the host
  is out of the way (the original's TPUEstimator iterations_per_loop).
- The loss of a step is the loss of the *global* batch: the task returns each shard's share (sums
  divided by normalizers summed over replicas and micro-batches), the loop sums the shares. So one
  device, N replicas and gradient accumulation give the same loss and gradients for the same
  global batch.
- Gradient accumulation (`gradient_accumulation_steps` micro-batches per optimizer step, in a
  tf.while_loop), gradients all-reduced across replicas before clipping (global norm of the global
  gradient), mixed precision (bfloat16; float16 with dynamic loss scaling through
  keras.optimizers.LossScaleOptimizer), XLA (`jit_compile` on the forward/backward pass).
- float16: a step whose loss or gradients are not finite is skipped (no update, the loss scale
  halves) and does not count: the global step (optimizer.iterations, which num_train_steps, the
  learning-rate schedule and the checkpoint numbers count) is the number of updates applied, as
  in NVIDIA's float16 BERT (its global_step only grows when all gradients are finite); a run
  reads num_train_steps + skipped batches. The scale, its growth count and the skipped steps
  are saved in the checkpoints (`loss_scale`) and restored on resuming.
- Checkpoints (model, optimizer slots, step = optimizer.iterations) every `save_checkpoints_steps`
  through tf.train.CheckpointManager, keeping `keep_checkpoint_max`; TF writes the data and index
  under temporary names and replaces the `checkpoint` state file atomically, so a crash never
  leaves a half-written latest checkpoint; what such a crash leaves (`model.ckpt-<step>_temp/`)
  is removed when training starts again (`bert_tf.training.checkpoint_files`). Rerunning resumes
  from the latest one, which may also be one the task continues (the original's
  run_pretraining: weights, Adam moments, step).
- TensorBoard summaries (every metric, learning rate, steps/s, examples/s) in model_dir/train,
  progress lines (bert_tf.progress) with steps/s, examples/s (packed pretraining rows: sequences/s
  and real tokens/s, `Task.throughput`) and ETA (float16: the loss scale and
  the steps skipped), and a stop with a message naming the step when the loss is not finite
  (float16: when a step is skipped with the scale at its minimum, MIN_LOSS_SCALE).
"""
import math
import os
import time

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

from bert_tf.model.checkpoints import naming_damaged_checkpoint
from bert_tf.model.layers import set_dropout
from bert_tf.progress import Progress
from bert_tf.training import optimization
from bert_tf.training.checkpoint_files import (CHECKPOINT_NAME, remove_dead_checkpoint_writes,
                                               remove_worker_checkpoints, worker_checkpoint_dir)
from bert_tf.training.distribution import is_chief
from bert_tf.training.settings import INITIAL_LOSS_SCALE, LOSS_SCALE_GROWTH_STEPS, MIN_LOSS_SCALE


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or Inf; the run stops (the last checkpoint is intact)."""


def set_mixed_precision(mode):
    """Sets the global Keras dtype policy: off | bfloat16 | float16. Call before building models."""
    policies = {"off": "float32", None: "float32", "bfloat16": "mixed_bfloat16",
                "float16": "mixed_float16"}
    keras.mixed_precision.set_global_policy(policies[mode])


def wrap_optimizer(optimizer, mixed_precision, initial_loss_scale=INITIAL_LOSS_SCALE,
                   loss_scale_growth_steps=LOSS_SCALE_GROWTH_STEPS):
    """float16 needs dynamic loss scaling (keras.optimizers.LossScaleOptimizer, whose rule
    `train` follows: see bert_tf.training.settings.INITIAL_LOSS_SCALE); bfloat16 has float32's
    range and does not."""
    if mixed_precision == "float16":
        return keras.optimizers.LossScaleOptimizer(
            optimizer, initial_scale=initial_loss_scale,
            dynamic_growth_steps=loss_scale_growth_steps)
    return optimizer


def scales_loss(optimizer):
    """Whether `optimizer` scales the loss (float16): its steps may be skipped."""
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def _scalar_metadata():
    metadata = summary_pb2.SummaryMetadata()
    metadata.plugin_data.plugin_name = "scalars"  # what TensorBoard's scalars dashboard reads
    return metadata.SerializeToString()


def write_scalar(name, value, step):
    """tf.summary.scalar without needing the tensorboard package installed."""
    tf.summary.write(name, tf.constant(float(value), tf.float32), step=step,
                     metadata=_scalar_metadata())


def global_step(optimizer):
    return int(optimizer.iterations.numpy())


def inner_optimizer(optimizer):
    """The optimizer that updates the weights (inside a LossScaleOptimizer, its inner one)."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def checkpoint_objects(model, optimizer):
    """What our checkpoints hold under `tf.train.Checkpoint(**...)`: the model and the optimizer
    (slots, step). The optimizer is the inner one under float16 too, so a checkpoint has the
    same keys whatever the precision: eval, predict or a resumed run may use another
    mixed_precision than the training that wrote it (the loss scale is saved beside it,
    `train`'s `loss_scale` entry)."""
    return {"model": model, "optimizer": inner_optimizer(optimizer)}


def make_replica_train_step(model, optimizer, task, gradient_accumulation_steps=1,
                            jit_compile=False):
    """The per-replica step: forward/backward (maybe accumulated), all-reduce, optimizer update.

    Returns this replica's shares of the task's train metrics, and its `task.throughput`
    counts.
    """
    scaled = scales_loss(optimizer)
    # Our optimizers take gradients summed here, before the loss-scale check and clipping see
    # them (Keras' own optimizers sum inside `apply`).
    sums_here = isinstance(inner_optimizer(optimizer),
                           optimization.DecoupledWeightDecayOptimizer)
    names = tuple(task.train_metric_names)

    def forward_backward(batch, normalizers):
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = task.outputs(model, batch, training=True)
            metrics = task.train_metrics(batch, outputs, normalizers)
            loss = optimizer.scale_loss(metrics["loss"]) if scaled else metrics["loss"]
        grads = tape.gradient(loss, variables)
        grads = [tf.convert_to_tensor(g) if g is not None else tf.zeros_like(v)
                 for g, v in zip(grads, variables)]
        return [metrics[n] for n in names], grads

    if jit_compile:
        forward_backward = tf.function(forward_backward, jit_compile=True)

    def replica_step(batch):
        context = tf.distribute.get_replica_context()
        normalizers = task.normalizers(batch)
        if context.num_replicas_in_sync > 1:
            normalizers = context.all_reduce(tf.distribute.ReduceOp.SUM, normalizers)
        k = gradient_accumulation_steps
        if k == 1:
            metrics, grads = forward_backward(batch, normalizers)
        else:
            micro = {name: tf.reshape(t, [k, -1] + t.shape[1:].as_list())
                     for name, t in batch.items()}
            metrics, grads = forward_backward({n: t[0] for n, t in micro.items()}, normalizers)

            def body(i, metrics, grads):
                m, g = forward_backward({n: t[i] for n, t in micro.items()}, normalizers)
                return (i + 1, [a + b for a, b in zip(metrics, m)],
                        [a + b for a, b in zip(grads, g)])

            _, metrics, grads = tf.while_loop(lambda i, *_: i < k, body,
                                              (tf.constant(1), metrics, grads))
        if scaled:
            grads = _poisoned_by_loss(grads, metrics[names.index("loss")])
        if sums_here:
            grads = optimization.sum_across_replicas(grads)
            with optimization.gradients_summed_across_replicas(optimizer):
                optimizer.apply(grads, model.trainable_variables)
        else:
            optimizer.apply(grads, model.trainable_variables)
        return dict(zip(names, metrics), **task.throughput(batch))

    # Its Python ifs are on Python values; AutoGraph's rewrite of it and of every function it
    # calls (model, task, optimizer) would slow the first step.
    return tf.autograph.experimental.do_not_convert(replica_step)


def _poisoned_by_loss(grads, loss):
    """`grads`, not finite if `loss` is not: LossScaleOptimizer skips a step on its gradients
    alone, and a float16 overflow in the forward pass (an inf loss) must be skipped too. Adds
    loss - loss (0, or NaN) to the smallest gradient: one scalar's worth of work."""
    smallest = min(range(len(grads)), key=lambda i: grads[i].shape.num_elements() or 0)
    grads = list(grads)
    grads[smallest] = grads[smallest] + tf.cast(loss - loss, grads[smallest].dtype)
    return grads


def _skipping_steps(dataset_fn, steps):
    """dataset_fn without the batches of the first `steps` steps (one per replica each)."""

    def skipping(input_context=None):
        context = input_context or tf.distribute.InputContext()
        replicas_per_pipeline = context.num_replicas_in_sync // context.num_input_pipelines
        return dataset_fn(input_context).skip(steps * replicas_per_pipeline)

    return skipping


def input_iterator(strategy, dataset_fn):
    """An iterator over `dataset_fn`'s batches for the loops of `strategy`.

    One device that is the host CPU reads the dataset itself: tf.distribute's iterator would
    add a copy to the same device, and deleting it (the end of every eval and predict pass)
    waits for its tf.data autotuning thread, which on CPU can take longer than the pass itself.
    Every other strategy (several replicas, workers, a GPU or TPU, where prefetching to the
    device pays) gets strategy.distribute_datasets_from_function.
    """
    if (isinstance(strategy, tf.distribute.OneDeviceStrategy) and tf.DeviceSpec.from_string(
            strategy.extended.worker_devices[0]).device_type == "CPU"):
        return iter(dataset_fn(tf.distribute.InputContext()))
    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def make_train_loop(strategy, replica_step, metric_names, optimizer=None):
    """tf.function running up to `num_steps` steps.

    Returns (steps run, {metric: sum over the applied steps}, loss of the last step run, steps
    applied). Every step is applied, and the loop stops early at a non-finite loss, unless
    `optimizer` scales the loss (float16): then a step whose loss or gradients are not finite is
    skipped (no update: weights, slots and optimizer.iterations stay; the scale halves), its
    metrics are left out of the sums, and the loop stops early only when the loss scale falls
    below MIN_LOSS_SCALE.
    """
    scaled = optimizer is not None and scales_loss(optimizer)

    def reduced(per_replica):
        return {name: strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica[name], axis=None)
                for name in metric_names}

    @tf.function
    def train_loop(iterator, num_steps):
        totals = {name: tf.constant(0.0) for name in metric_names}
        last_loss = tf.constant(0.0)
        steps = tf.constant(0)
        applied = tf.constant(0)
        for _ in tf.range(num_steps):
            before = tf.identity(optimizer.iterations.value) if scaled else None
            metrics = reduced(strategy.run(replica_step, args=(next(iterator),)))
            last_loss = metrics["loss"]
            done = optimizer.iterations.value > before if scaled else tf.constant(True)
            if scaled:  # a skipped step (the iterations did not move) is left out of the sums
                metrics = {name: tf.where(done, metrics[name], 0.0) for name in metric_names}
            totals = {name: totals[name] + metrics[name] for name in metric_names}
            steps += 1
            applied += tf.cast(done, tf.int32)
            if (optimizer.dynamic_scale.value < MIN_LOSS_SCALE if scaled
                    else not tf.math.is_finite(last_loss)):
                break
        return steps, totals, last_loss, applied

    return train_loop


def restore_latest(checkpoint, manager, model, optimizer, task=None, optional=None):
    """Restores the latest checkpoint of `manager`; returns its path or None.

    The latest may be ours, or one the task knows how to continue (`Task.restore_foreign`: the
    original run_pretraining's, whose later checkpoints, being ours and newer, win on reruns).
    `optional`: a tf.train.Checkpoint of entries restored where the checkpoint has them (the
    loss scale: a float32 run's checkpoint has none) and left as they are where it does not.
    """
    latest = manager.latest_checkpoint
    with naming_damaged_checkpoint(latest):
        if latest and not (task is not None and task.restore_foreign(model, optimizer, latest)):
            checkpoint.restore(latest).assert_existing_objects_matched()
            if optional is not None:
                optional.restore(latest).expect_partial()
    return latest


class _TrainingCheckpoints:
    """What a training run saves and resumes from: the model, the optimizer (slots, step),
    the dropout layers' seed states (Keras keeps them out of the model's checkpoint: a resumed
    run then draws the masks an uninterrupted one would) and, under float16, the loss scale,
    its count of finite steps since it last changed, and the steps skipped so far (batches
    read but not counted in the global step; a resumed run replays them)."""

    def __init__(self, strategy, model, optimizer, settings):
        self.scaled = scales_loss(optimizer)
        self.dropout_seeds = [v.value for v in model.variables
                              if v.path.endswith("seed_generator_state")]
        self.skipped_steps = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.loss_scale = tf.train.Checkpoint(skipped_steps=self.skipped_steps)
        if self.scaled:
            self.loss_scale.scale = optimizer.dynamic_scale.value
            self.loss_scale.finite_steps = optimizer.step_counter.value
        self.checkpoint = tf.train.Checkpoint(**checkpoint_objects(model, optimizer))
        self.manager = tf.train.CheckpointManager(self.checkpoint, settings.output_dir,
                                                  max_to_keep=settings.keep_checkpoint_max,
                                                  checkpoint_name=CHECKPOINT_NAME)
        self.strategy, self.output_dir = strategy, settings.output_dir

    def restore(self, model, optimizer, task):
        """Restores the latest checkpoint (the loss scale where it has one: not from a float32
        run's); returns its path or None. Then the non-chief workers save into their own
        throwaway directories."""
        # The dropout seeds are optional: a run continued with another dropout (run_pretraining
        # --dropout) has other dropout layers (none at rate 0). They are restored by position,
        # so a changed set of layers only changes which masks are drawn.
        restored = restore_latest(self.checkpoint, self.manager, model, optimizer, task,
                                  optional=tf.train.Checkpoint(loss_scale=self.loss_scale,
                                                               dropout_seeds=self.dropout_seeds))
        self.checkpoint.dropout_seeds = self.dropout_seeds
        if self.scaled:
            # Saved from now on; attached after the restore, whose check that every object has
            # an entry would refuse a float32 run's checkpoint. One Checkpoint object restores
            # and saves, so its save_counter goes on from the restored one.
            self.checkpoint.loss_scale = self.loss_scale
        if not is_chief(self.strategy):
            self.manager = tf.train.CheckpointManager(
                self.checkpoint, worker_checkpoint_dir(self.output_dir, self.strategy),
                max_to_keep=1, checkpoint_name=CHECKPOINT_NAME)
        return restored

    @property
    def skipped(self):
        return int(self.skipped_steps.numpy())

    def save(self, step, skipped):
        self.skipped_steps.assign(skipped)
        self.manager.save(checkpoint_number=step)

    @property
    def latest(self):
        return self.manager.latest_checkpoint or "none"


def _steps_to_run(settings, step):
    """The steps of the next train_loop call: up to iterations_per_loop, stopping at the next
    checkpoint, log line or the end."""

    def distance_to_multiple(every):
        return every - step % every if every and every > 0 else math.inf

    to_dropout = (settings.dropout_from_step - step if step < settings.dropout_from_step
                  else math.inf)
    return int(min(settings.iterations_per_loop, settings.num_train_steps - step,
                   distance_to_multiple(settings.save_checkpoints_steps),
                   distance_to_multiple(settings.log_steps), to_dropout))


def _check_finite(optimizer, scaled, step, steps_run, last_loss, latest):
    """NonFiniteLossError when the loss is not finite (float16: when a step was skipped with
    the loss scale at its minimum)."""
    if scaled and _loss_scale(optimizer) < MIN_LOSS_SCALE:
        raise NonFiniteLossError(
            f"loss or gradients not finite at step {global_step(optimizer) + 1} (loss "
            f"{float(last_loss)}) with the float16 loss scale at its minimum "
            f"{MIN_LOSS_SCALE:g}; stopping (last checkpoint: {latest})")
    if not scaled and not math.isfinite(float(last_loss)):
        raise NonFiniteLossError(
            f"loss is {float(last_loss)} at step {step + steps_run}; stopping (last checkpoint: "
            f"{latest})")


def _write_summaries(writer, step, optimizer, metrics, steps_run, elapsed, batch_size):
    """The train metrics (`metrics`: each metric and the loss-scale report) and the rates at
    `step`, for TensorBoard."""
    with writer.as_default():
        for name, value in metrics.items():
            write_scalar(name, value, step)
        write_scalar("learning_rate", inner_optimizer(optimizer).learning_rate, step)
        write_scalar("steps_per_second", steps_run / elapsed, step)
        write_scalar("examples_per_second", steps_run * batch_size / elapsed, step)


def train(strategy, model, optimizer, task, dataset_fn, settings, init_fn=None, log=print,
          on_checkpoint=None, deterministic_input=False, should_stop=None, on_resume=None):
    """Trains until optimizer.iterations == settings.num_train_steps; returns the last metrics.

    `settings`: the run's RunSettings (bert_tf.training.settings; output_dir, num_train_steps,
    train_batch_size, iterations_per_loop, save_checkpoints_steps, keep_checkpoint_max,
    log_steps, gradient_accumulation_steps, jit_compile, dropout_from_step: the model's dropout
    layers drop nothing before that step). `model` and `optimizer` must have been
    created under `strategy.scope()`. `dataset_fn(ctx)` returns per-replica batches of
    train_batch_size / replicas examples. If output_dir has a checkpoint (ours, or one
    `task.restore_foreign` continues), training resumes from it; otherwise `init_fn()` (if
    given) initialises the model (e.g. from --init_checkpoint). `on_checkpoint(step)` runs
    after each checkpoint is saved (eval during training), `on_resume(step)` after a checkpoint
    is restored; `should_stop()`, asked after the restore and after each `on_checkpoint`, ends
    training early when True (early stopping).
    `deterministic_input`: the input
    order is a function of the seed (or file order), so a resumed run replays its input up
    to the restored step and trains on what an uninterrupted run would (float16: to the
    restored step plus the steps skipped before it).
    """
    chief = is_chief(strategy)
    if chief:
        for path in remove_dead_checkpoint_writes(settings.output_dir):
            log(f"removed {path}: left by a checkpoint write that did not finish")
    with strategy.scope():
        optimizer.build(model.trainable_variables)
    saved = _TrainingCheckpoints(strategy, model, optimizer, settings)
    restored = saved.restore(model, optimizer, task)
    scaled, skipped = saved.scaled, saved.skipped
    if restored:
        log(f"resuming from {restored} at step {global_step(optimizer)}"
            + (f" (loss scale {_loss_scale(optimizer):g}, {skipped} steps skipped so far)"
               if scaled else ""))
        if on_resume is not None:
            on_resume(global_step(optimizer))
    elif init_fn is not None:
        init_fn()

    step = global_step(optimizer)
    if step >= settings.num_train_steps:
        log(f"step {step} >= num_train_steps {settings.num_train_steps}: nothing to train")
        return {}
    if should_stop is not None and should_stop():
        return {}
    names, units = tuple(task.train_metric_names), tuple(task.throughput_units)

    def traced_train_loop(dropout):
        # A new function, traced with the model's dropout layers as they are now.
        set_dropout(model, dropout)
        replica_step = make_replica_train_step(model, optimizer, task,
                                               settings.gradient_accumulation_steps,
                                               settings.jit_compile)
        return make_train_loop(strategy, replica_step, names + units, optimizer)

    dropout = step >= settings.dropout_from_step
    if not dropout:
        log(f"dropout off until step {settings.dropout_from_step}")
    train_loop = traced_train_loop(dropout)
    if restored and deterministic_input:
        dataset_fn = _skipping_steps(dataset_fn, step + skipped)
    iterator = input_iterator(strategy, dataset_fn)
    writer = (tf.summary.create_file_writer(os.path.join(settings.output_dir, "train"))
              if chief else tf.summary.create_noop_writer())
    progress = Progress("train", total=settings.num_train_steps, unit="steps",
                        secondary_unit=units or "examples", interval=30.0, start=step)

    last_metrics, scale_report = {}, {}
    try:
        while step < settings.num_train_steps:
            if not dropout and step >= settings.dropout_from_step:
                dropout = True
                log(f"dropout on from step {step}")
                train_loop = traced_train_loop(dropout)
            start = time.monotonic()
            steps_run, totals, last_loss, applied = train_loop(
                iterator, tf.constant(_steps_to_run(settings, step)))
            steps_run, applied = int(steps_run), int(applied)
            elapsed = time.monotonic() - start
            _check_finite(optimizer, scaled, step, steps_run, last_loss, saved.latest)
            previous_step = step
            step = global_step(optimizer)
            skipped += steps_run - applied
            if applied:
                last_metrics = {n: float(totals[n]) / applied for n in names}
            if scaled:
                scale_report = {"loss_scale": _loss_scale(optimizer), "skipped_steps": skipped}
            _write_summaries(writer, step, optimizer,
                             dict(last_metrics if applied else {}, **scale_report), steps_run,
                             elapsed, settings.train_batch_size)
            if step == previous_step:  # every step skipped (float16): nothing to log or save
                continue
            at_log = bool(settings.log_steps) and step % settings.log_steps == 0
            progress.update(step - previous_step,
                            secondary=(tuple(float(totals[unit]) for unit in units) if units
                                       else steps_run * settings.train_batch_size),
                            force=at_log or step >= settings.num_train_steps, **last_metrics,
                            **scale_report)
            if (settings.save_checkpoints_steps and step % settings.save_checkpoints_steps == 0
                    or step >= settings.num_train_steps):
                saved.save(step, skipped)
                if on_checkpoint is not None:
                    on_checkpoint(step)
                if should_stop is not None and should_stop():
                    break
    finally:  # the layers as built, also when training stops on an error
        set_dropout(model, True)
    writer.flush()
    progress.summary(**last_metrics, **scale_report)
    if not chief:
        remove_worker_checkpoints(worker_checkpoint_dir(settings.output_dir, strategy))
    return last_metrics


def _loss_scale(optimizer):
    """The float16 loss scale now (an int when it is one: 32768, not 3.277e+04, in the logs)."""
    scale = float(optimizer.dynamic_scale.numpy())
    return int(scale) if scale.is_integer() else scale

"""Optimizers and learning-rate schedule of the original BERT, as Keras 3 optimizers.

The original (`optimization.py` of google-research/bert) trains with `AdamWeightDecayOptimizer`:
Adam without bias correction, epsilon 1e-6, and weight decay 0.01 added to the update
("decoupled", so it does not pass through the m/v moments) except for variables whose name matches
"LayerNorm", "layer_norm" or "bias"; gradients clipped to global norm 1.0; learning rate warmed up
linearly from 0 for `num_warmup_steps`, then decayed linearly to 0 at `num_train_steps`.

`AdamWeightDecay` (the original's, the default), `Adam` (the same with Adam's bias correction) and
`Lamb` here are `keras.optimizers.Optimizer` subclasses, so they checkpoint
through `tf.train.Checkpoint`, work under every tf.distribute strategy and inside
`keras.optimizers.LossScaleOptimizer` for float16 mixed precision.

Step counting: the original computes the learning rate of an update from `global_step` *before*
that update increments it, so the very first update under warmup has learning rate 0 (the moments
still move). Keras evaluates a schedule at `optimizer.iterations` before incrementing it, which is
the same thing; `optimizer.iterations` is our global_step.

Variable names: the exclusion patterns are matched against each variable's name in the original
checkpoint naming (`bert/encoder/layer_0/attention/output/LayerNorm/gamma`, `cls/predictions/
output_bias`, ...). Pass `variable_name_fn` to map a Keras variable to that name; by default the
Keras variable path is used, which for our models follows the original naming.
"""
import contextlib
import re
import threading

import keras
import numpy as np
import tensorflow as tf

# The original's exclusion list (run_pretraining / run_classifier / run_squad all use it).
ORIGINAL_EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """The original's schedule: linear warmup from 0, then linear decay to 0.

    lr(step) = init_lr * step / num_warmup_steps              if step < num_warmup_steps
             = init_lr * (1 - min(step, num_train_steps) / num_train_steps)   otherwise
    (the decay counts from step 0, not from the end of warmup, exactly as the original).
    """

    def __init__(self, init_lr, num_train_steps, num_warmup_steps=0):
        self.init_lr = float(init_lr)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps or 0)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        decay_steps = float(max(self.num_train_steps, 1))
        # tf.compat.v1.train.polynomial_decay(power=1, end_learning_rate=0, cycle=False) with the
        # float32 ops the original's graph really runs: TF's graph optimizer rewrites division by
        # a constant into multiplication by its reciprocal, and pow(x, 1.0) is not bit-exact x.
        decayed = self.init_lr * tf.pow(
            1.0 - tf.minimum(step, decay_steps) * np.float32(1.0 / decay_steps), 1.0)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * (step * np.float32(1.0 / self.num_warmup_steps))
        return tf.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


_CALLER_SUMMED_LOCK = threading.Lock()


@contextlib.contextmanager
def gradients_summed_across_replicas(optimizer):
    """While active (at trace time), `optimizer` (ours, or a LossScaleOptimizer around ours)
    takes the gradients given to `apply` as already summed across replicas (see
    `DecoupledWeightDecayOptimizer._backend_update_step`).

    The mark is on the optimizer, not on the thread: under MirroredStrategy, Keras'
    LossScaleOptimizer applies the update from threads of its own (merge_call, then
    call_for_each_replica starts one per replica), which a thread-local mark did not reach, and
    float16 training on N replicas summed the gradients a second time (N times the gradient).
    Every replica thread enters it, hence a count under a lock.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    with _CALLER_SUMMED_LOCK:
        inner._summed_by_caller += 1
    try:
        yield
    finally:
        with _CALLER_SUMMED_LOCK:
            inner._summed_by_caller -= 1


def sum_across_replicas(grads):
    """All-reduce (sum) of per-replica gradients; unchanged outside a multi-replica context."""
    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return grads
    present = [i for i, g in enumerate(grads) if g is not None]
    summed = context.all_reduce(tf.distribute.ReduceOp.SUM, [grads[i] for i in present])
    grads = list(grads)
    for i, g in zip(present, summed):
        grads[i] = g
    return grads


def default_variable_name(variable):
    """The name used for exclusion matching: the Keras variable path (original naming)."""
    return getattr(variable, "path", None) or variable.name


class DecoupledWeightDecayOptimizer(keras.optimizers.Optimizer):
    """Shared part of AdamWeightDecay and Lamb: Adam moments (slots named `slot_names`) and
    per-variable exclusion from weight decay by original name. `name` None: the class's name.
    """

    slot_names = ("m", "v")
    # Whether a training checkpoint of the original run_pretraining continues with this
    # optimizer (bert_tf.tasks.pretraining.task.load_original_training_state): the original's
    # update on the same slots.
    continues_original_run = False

    def __init__(self, learning_rate, weight_decay_rate=0.01, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=ORIGINAL_EXCLUDE_FROM_WEIGHT_DECAY,
                 variable_name_fn=None, global_clipnorm=1.0, name=None, **kwargs):
        super().__init__(learning_rate=learning_rate, global_clipnorm=global_clipnorm,
                         name=name or type(self).__name__, **kwargs)
        self.weight_decay_rate = float(weight_decay_rate)
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_patterns = tuple(exclude_from_weight_decay or ())
        self.variable_name_fn = variable_name_fn or default_variable_name
        self._decay_flags = []
        self._summed_by_caller = 0  # see gradients_summed_across_replicas

    def is_excluded(self, variable_name):
        """True if any exclusion pattern (LayerNorm, bias, ...) is found in the name."""
        return any(re.search(pattern, variable_name) for pattern in self.exclude_patterns)

    def uses_weight_decay(self, variable_name):
        """The original's `_do_use_weight_decay`: False if any pattern is found in the name."""
        return bool(self.weight_decay_rate) and not self.is_excluded(variable_name)

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._decay_flags = [self.uses_weight_decay(self.variable_name_fn(v)) for v in var_list]
        self._m, self._v = self.add_optimizer_variables(var_list, list(self.slot_names))

    def _all_reduce_sum_gradients(self, grads_and_vars):
        """Identity: `_backend_update_step` has summed the gradients across replicas already.

        Keras would sum them here, i.e. *after* the global-norm clipping, which would then see
        one replica's gradient only; we sum first, so clipping uses the norm of the global
        gradient, as the original on one device.
        """
        return list(grads_and_vars)

    def _clip_gradients(self, grads):
        """No copy here: `_backend_update_step` folds the global-norm clipping into the update."""
        return grads

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        """Sums gradients across replicas, then hands (learning_rate, clip scale) to every
        `update_step`.

        Under a multi-replica strategy, a caller that has summed the gradients itself (the
        training loop of bert_tf.training.loops, which must also show the loss-scale check the global
        gradient) says so with `gradients_summed_across_replicas(optimizer)`; otherwise (plain
        `model.fit`, `optimizer.apply`) they are summed here, as Keras does for its optimizers.
        Keras would clip with one Square, one Sum and one Multiply writing a clipped copy of every
        gradient (four passes over 110M floats for BERT-Base); here the global norm is one read
        of each gradient and each update multiplies its gradient by the scale as it reads it.
        """
        if not self._summed_by_caller:
            grads = sum_across_replicas(grads)
        scale = (global_norm_clip_scale([g for g in grads if g is not None],
                                        self.global_clipnorm)
                 if self.global_clipnorm else tf.constant(1.0))
        super()._backend_update_step(grads, trainable_variables, (learning_rate, scale))

    def update_step(self, gradient, variable, learning_rate):
        learning_rate, clip_scale = learning_rate  # see _backend_update_step
        index = self._get_variable_index(variable)
        self._update(tf.cast(gradient, variable.dtype), variable, index,
                     tf.cast(learning_rate, variable.dtype), tf.cast(clip_scale, variable.dtype))

    def _update(self, gradient, variable, index, lr, clip_scale):
        """Updates `variable` (index `index`) from its unclipped `gradient` times `clip_scale`."""
        raise NotImplementedError

    def _decay_rate(self, index):
        """The weight decay of the variable of index `index` (0 when it is excluded)."""
        return self.weight_decay_rate if self._decay_flags[index] else 0.0

    def _fused_update(self, in_place, xla, variable, index, *args):
        """Updates `variable` and its moments by `in_place(param, m, v, *args)`, written into
        their buffers, where each is a plain tf.Variable on this device; else by assigning
        what `xla(param, m, v, *args)` returns (`_in_place`)."""
        m, v = self._m[index], self._v[index]
        local = [_local_variable(x, variable) for x in (variable, m, v)]
        if all(x is not None for x in local):
            in_place(*local, *args)
            return
        next_param, next_m, next_v = xla(_read(variable), _read(m), _read(v), *args)
        self.assign(variable, next_param)
        self.assign(m, next_m)
        self.assign(v, next_v)

    def decayed_variable_names(self):
        """Names (as matched) of the variables that get weight decay; for logs and tests."""
        return [self.variable_name_fn(v) for v, flag in
                zip(self._trainable_variables, self._decay_flags) if flag]

    def get_config(self):
        config = super().get_config()
        config.update({"weight_decay_rate": self.weight_decay_rate,
                       "exclude_from_weight_decay": list(self.exclude_patterns),
                       "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon})
        return config


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamWeightDecay(DecoupledWeightDecayOptimizer):
    """The original's AdamWeightDecayOptimizer (no bias correction), as a Keras optimizer.

        m = beta_1 * m + (1 - beta_1) * g
        v = beta_2 * v + (1 - beta_2) * g^2
        update = m / (sqrt(v) + epsilon) + weight_decay_rate * w    (decay only if not excluded)
        w = w - lr * update

    Slots are named `adam_m` / `adam_v` as in the original checkpoints.
    """

    slot_names = ("adam_m", "adam_v")
    continues_original_run = True

    def _update(self, gradient, variable, index, lr, clip_scale):
        self._fused_update(_adam_weight_decay_in_place, _adam_weight_decay_xla, variable, index,
                           gradient, clip_scale, lr, self.beta_1, self.beta_2, self.epsilon,
                           self._decay_rate(index))


@keras.saving.register_keras_serializable(package="bert_tf")
class Adam(DecoupledWeightDecayOptimizer):
    """Adam with bias correction and decoupled weight decay (AdamW, Loshchilov & Hutter; the
    update of `torch.optim.AdamW`), with the original's exclusions, epsilon and clipping:

        m, v as AdamWeightDecay;  m_hat = m / (1 - beta_1^t),  v_hat = v / (1 - beta_2^t)
        update = m_hat / (sqrt(v_hat) + epsilon) + weight_decay_rate * w   (decay if not excluded)
        w = w - lr * update                                   (t = global step after the update)

    The original's AdamWeightDecay drops the two corrections: for a steady gradient its update
    m / sqrt(v) is (1 - beta_1^t) / sqrt(1 - beta_2^t) times Adam's: 3.2x at step 1, 6.6x at
    step 12, 3.2x at 100, 1.7x at 400, 1.3x at 1,000, within 3% from 3,000 on; a warmup of
    10,000 steps (the original's) hides it, a short one does not.
    Its slots have AdamWeightDecay's names (`adam_m` / `adam_v`: the same moments). Not a
    subclass of AdamWeightDecay: a run of the original continues with that one only
    (bert_tf.tasks.pretraining.task.load_original_training_state).
    """

    slot_names = ("adam_m", "adam_v")

    def _update(self, gradient, variable, index, lr, clip_scale):
        local_step = tf.cast(self.iterations + 1, variable.dtype)
        correction_1 = 1.0 - tf.pow(tf.cast(self.beta_1, variable.dtype), local_step)
        correction_2 = 1.0 - tf.pow(tf.cast(self.beta_2, variable.dtype), local_step)
        self._fused_update(_adam_in_place, _adam_xla, variable, index, gradient, clip_scale, lr,
                           correction_1, correction_2, self.beta_1, self.beta_2, self.epsilon,
                           self._decay_rate(index))


@keras.saving.register_keras_serializable(package="bert_tf")
class Lamb(DecoupledWeightDecayOptimizer):
    """LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"), for large batches.

        m, v as Adam with bias correction;  r = m_hat / (sqrt(v_hat) + epsilon) + wd * w
        w = w - lr * trust_ratio * r,  trust_ratio = ||w|| / ||r|| (1 where either norm is 0)

    Variables excluded from weight decay (LayerNorm, bias) are also excluded from the layer-wise
    adaptation (trust_ratio = 1), as in the LAMB used to pretrain BERT in the paper. With
    weight_decay_rate=0 and no exclusions this is exactly `keras.optimizers.Lamb`.
    """

    slot_names = ("lamb_m", "lamb_v")

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._adapt_flags = [not self.is_excluded(self.variable_name_fn(v)) for v in var_list]

    def _update(self, gradient, variable, index, lr, clip_scale):
        m, v = self._m[index], self._v[index]
        gradient = gradient * clip_scale
        local_step = tf.cast(self.iterations + 1, variable.dtype)
        next_m = self.beta_1 * m + (1.0 - self.beta_1) * gradient
        next_v = self.beta_2 * v + (1.0 - self.beta_2) * tf.square(gradient)
        m_hat = next_m / (1.0 - tf.pow(tf.cast(self.beta_1, variable.dtype), local_step))
        v_hat = next_v / (1.0 - tf.pow(tf.cast(self.beta_2, variable.dtype), local_step))
        update = m_hat / (tf.sqrt(v_hat) + self.epsilon)
        if self._decay_flags[index]:
            update += self.weight_decay_rate * variable
        if self._adapt_flags[index]:
            w_norm = tf.norm(variable)
            u_norm = tf.norm(update)
            trust_ratio = tf.where(w_norm > 0.0,
                                   tf.where(u_norm > 0.0, w_norm / u_norm, 1.0), 1.0)
            update = trust_ratio * update
        self.assign_sub(variable, lr * update)
        self.assign(m, next_m)
        self.assign(v, next_v)


def _read(variable):
    """The value of a Keras or tf.Variable (the local copy under tf.distribute)."""
    if isinstance(variable, keras.Variable):
        variable = variable.value
    return tf.convert_to_tensor(variable)


def global_norm_clip_scale(grads, clip_norm):
    """The factor that clips `grads` to global norm `clip_norm`, as the original's
    `tf.clip_by_global_norm` (sqrt(2 * sum of l2_loss); NaN if the norm is not finite, so that
    the update shows it). l2_loss reads each gradient once and writes nothing (faster than
    Keras' square + sum, and than the same in XLA, whose CPU reductions are slow)."""
    half_squared_norms = tf.stack([tf.nn.l2_loss(tf.cast(g, tf.float32)) for g in grads])
    use_norm = tf.sqrt(tf.reduce_sum(half_squared_norms) * 2.0)
    scale = clip_norm * tf.minimum(1.0 / use_norm, 1.0 / clip_norm)
    return scale + (use_norm - use_norm)


def _local_variable(variable, component):
    """The plain tf.Variable of `variable` (Keras, tf or mirrored) on the device of `component`,
    the per-device variable being updated; None where that is itself replicated (TPU)."""
    if isinstance(component, tf.distribute.DistributedValues):
        return None
    if isinstance(variable, keras.Variable):
        variable = variable.value
    if isinstance(variable, tf.distribute.DistributedValues):
        variable = next((local for local in variable.values if local.device == component.device),
                        None)
    return variable if isinstance(variable, tf.Variable) else None


def _adam_weight_decay_math(param, m, v, grad, clip_scale, lr, beta_1, beta_2, epsilon, decay):
    """The original's AdamWeightDecayOptimizer update, op for op, on the clipped gradient (XLA
    keeps the float32 op order)."""
    grad = grad * clip_scale
    next_m = beta_1 * m + (1.0 - beta_1) * grad
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(grad)
    update = next_m / (tf.sqrt(next_v) + epsilon)
    if decay:
        update += decay * param
    return param - lr * update, next_m, next_v


def _in_place(math):
    """`math(param, m, v, ...)`'s update fused by XLA and written into the variables' own
    buffers: XLA aliases a variable's update to its input buffer, where assigning returned
    tensors would allocate three fresh ones."""

    @tf.function(jit_compile=True, reduce_retracing=True)
    def update(param, m, v, *args):
        next_param, next_m, next_v = math(param.read_value(), m.read_value(), v.read_value(),
                                          *args)
        param.assign(next_param)
        m.assign(next_m)
        v.assign(next_v)

    return update


_adam_weight_decay_xla = tf.function(_adam_weight_decay_math, jit_compile=True,
                                     reduce_retracing=True)
_adam_weight_decay_in_place = _in_place(_adam_weight_decay_math)


def _adam_math(param, m, v, grad, clip_scale, lr, correction_1, correction_2, beta_1, beta_2,
               epsilon, decay):
    """Adam's update with bias correction and decoupled decay (`Adam`), on the clipped gradient."""
    grad = grad * clip_scale
    next_m = beta_1 * m + (1.0 - beta_1) * grad
    next_v = beta_2 * v + (1.0 - beta_2) * tf.square(grad)
    update = (next_m / correction_1) / (tf.sqrt(next_v / correction_2) + epsilon)
    if decay:
        update += decay * param
    return param - lr * update, next_m, next_v


_adam_xla = tf.function(_adam_math, jit_compile=True, reduce_retracing=True)
_adam_in_place = _in_place(_adam_math)


OPTIMIZERS = {"adamw": AdamWeightDecay, "adam": Adam, "lamb": Lamb}


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer_type="adamw",
                     variable_name_fn=None, weight_decay_rate=0.01, global_clipnorm=1.0,
                     exclude_from_weight_decay=ORIGINAL_EXCLUDE_FROM_WEIGHT_DECAY):
    """The original's `create_optimizer` minus the graph plumbing: schedule + optimizer.

    Returns a Keras optimizer; `optimizer.apply(grads, variables)` does clipping to global norm
    `global_clipnorm` (1.0 as the original), the update and the step increment.
    """
    if optimizer_type not in OPTIMIZERS:
        raise ValueError(f"optimizer_type must be one of {sorted(OPTIMIZERS)}, got {optimizer_type!r}")
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    return OPTIMIZERS[optimizer_type](
        learning_rate=schedule, weight_decay_rate=weight_decay_rate,
        variable_name_fn=variable_name_fn, global_clipnorm=global_clipnorm,
        exclude_from_weight_decay=exclude_from_weight_decay)

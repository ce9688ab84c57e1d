"""bert_tf.training.optimization against the reference release's optimization.create_optimizer.

The oracle: the same variables (same original names, including LayerNorm / bias ones that are
excluded from weight decay), the same batches and the same loss, trained N steps by the reference's
`create_optimizer` in a v1 graph session and by ours eagerly; the weights must agree after every
step. The loss is scaled so that some steps are clipped (global norm > 1) and some are not, and
the run covers warmup, decay and the step where the learning rate reaches 0.
"""
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import optimization

# Variable names as in an original checkpoint: kernels and embeddings decay, the others do not.
SHAPES = {
    "bert/embeddings/word_embeddings": (7, 4),
    "bert/encoder/layer_0/attention/self/query/kernel": (4, 4),
    "bert/encoder/layer_0/attention/self/query/bias": (4,),
    "bert/encoder/layer_0/output/LayerNorm/gamma": (4,),
    "bert/encoder/layer_0/output/LayerNorm/beta": (4,),
    "cls/predictions/output_bias": (7,),
}
STEPS = 9


def initial_values(seed=0):
    rng = np.random.RandomState(seed)
    return {name: rng.normal(0, 0.5, shape).astype(np.float32) for name, shape in SHAPES.items()}


def batches(seed=1):
    rng = np.random.RandomState(seed)
    # Alternate big and small scales: big ones get clipped, small ones do not.
    return [(rng.randint(0, 7, size=(3,)).astype(np.int32),
             np.float32(5.0 if step % 2 == 0 else 0.02)) for step in range(STEPS)]


def loss_fn(ops, w, ids, scale):
    """A small loss touching every variable; `ops` is tf (both graph and eager)."""
    x = ops.gather(w["bert/embeddings/word_embeddings"], ids)
    h = ops.matmul(x, w["bert/encoder/layer_0/attention/self/query/kernel"])
    h = h + w["bert/encoder/layer_0/attention/self/query/bias"]
    mean, var = ops.nn.moments(h, [-1], keepdims=True)
    h = (h - mean) * ops.math.rsqrt(var + 1e-3) * w["bert/encoder/layer_0/output/LayerNorm/gamma"]
    h = h + w["bert/encoder/layer_0/output/LayerNorm/beta"]
    logits = ops.matmul(h, w["bert/embeddings/word_embeddings"], transpose_b=True)
    logits = logits + w["cls/predictions/output_bias"]
    return scale * ops.reduce_mean(ops.square(logits - 1.0))


def run_reference(refbert, lr, num_train_steps, num_warmup_steps):
    from bert import optimization as ref_optimization
    v1 = refbert.v1
    values = initial_values()
    trajectory = []
    with v1.Graph().as_default():
        w = {name: v1.get_variable(name, initializer=value) for name, value in values.items()}
        ids = v1.placeholder(tf.int32, [None])
        scale = v1.placeholder(tf.float32, [])
        loss = loss_fn(tf, w, ids, scale)
        train_op = ref_optimization.create_optimizer(loss, lr, num_train_steps, num_warmup_steps,
                                                     use_tpu=False)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for batch_ids, batch_scale in batches():
                sess.run(train_op, {ids: batch_ids, scale: batch_scale})
                trajectory.append(sess.run(w))
            global_step = sess.run(v1.train.get_global_step())
    return trajectory, global_step


def run_ours(optimizer_type, lr, num_train_steps, num_warmup_steps, **kwargs):
    values = initial_values()
    w = {name: tf.Variable(value, name=name) for name, value in values.items()}
    names = {id(v): name for name, v in w.items()}
    optimizer = optimization.create_optimizer(
        lr, num_train_steps, num_warmup_steps, optimizer_type=optimizer_type,
        variable_name_fn=lambda v: names[id(v)], **kwargs)
    variables = list(w.values())
    trajectory = []
    for batch_ids, batch_scale in batches():
        with tf.GradientTape() as tape:
            loss = loss_fn(tf, w, tf.constant(batch_ids), tf.constant(batch_scale))
        optimizer.apply(tape.gradient(loss, variables), variables)
        trajectory.append({name: v.numpy() for name, v in w.items()})
    return trajectory, optimizer


@pytest.mark.parametrize("num_train_steps,num_warmup_steps", [(7, 3), (20, 0)])
def test_adamw_matches_reference_create_optimizer(refbert, num_train_steps, num_warmup_steps):
    lr = 0.1
    reference, ref_global_step = run_reference(refbert, lr, num_train_steps, num_warmup_steps)
    ours, optimizer = run_ours("adamw", lr, num_train_steps, num_warmup_steps)
    assert int(optimizer.iterations.numpy()) == ref_global_step == STEPS
    moved = False
    for step, (ref_w, our_w) in enumerate(zip(reference, ours)):
        for name in SHAPES:
            np.testing.assert_allclose(our_w[name], ref_w[name], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{name} after step {step + 1}")
            moved |= not np.allclose(ref_w[name], initial_values()[name])
    assert moved
    assert sorted(optimizer.decayed_variable_names()) == [
        "bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel"]


def test_schedule_matches_reference_formula(refbert):
    """The schedule alone, against the original's ops (polynomial_decay + warmup blend)."""
    v1 = refbert.v1
    init_lr, num_train_steps, num_warmup_steps = 5e-5, 100, 10
    steps = [0, 1, 5, 9, 10, 11, 50, 99, 100, 150]
    with v1.Graph().as_default():
        global_step = v1.placeholder(tf.int64, [])
        lr = v1.train.polynomial_decay(tf.constant(init_lr), global_step, num_train_steps,
                                       end_learning_rate=0.0, power=1.0, cycle=False)
        steps_float = tf.cast(tf.cast(global_step, tf.int32), tf.float32)
        is_warmup = tf.cast(tf.cast(global_step, tf.int32) < num_warmup_steps, tf.float32)
        lr = (1.0 - is_warmup) * lr + is_warmup * (init_lr * steps_float / num_warmup_steps)
        with v1.Session() as sess:
            expected = [sess.run(lr, {global_step: s}) for s in steps]
    schedule = optimization.WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    np.testing.assert_allclose([float(schedule(s)) for s in steps], expected, rtol=1e-6, atol=1e-12)
    assert float(schedule(0)) == 0.0  # the first update of a warmup run has learning rate 0


def test_lamb_without_decay_is_keras_lamb():
    import keras
    ours, _ = run_ours("lamb", 0.01, 1000, 0, weight_decay_rate=0.0, global_clipnorm=None,
                       exclude_from_weight_decay=())
    # Our LAMB minus weight decay and exclusions must be Keras' LAMB.
    values = initial_values()
    w = {name: tf.Variable(value) for name, value in values.items()}
    variables = list(w.values())
    schedule = optimization.WarmupLinearDecay(0.01, 1000, 0)
    keras_lamb = keras.optimizers.Lamb(learning_rate=schedule, epsilon=1e-6)
    for step, (batch_ids, batch_scale) in enumerate(batches()):
        with tf.GradientTape() as tape:
            loss = loss_fn(tf, w, tf.constant(batch_ids), tf.constant(batch_scale))
        keras_lamb.apply(tape.gradient(loss, variables), variables)
        for name, v in w.items():
            np.testing.assert_allclose(ours[step][name], v.numpy(), rtol=2e-5, atol=1e-6,
                                       err_msg=f"{name} after step {step + 1}")


def test_lamb_one_step_against_numpy():
    """One step of LAMB with decay and exclusions, against the formula written in numpy."""
    lr, wd = 0.01, 0.01
    values = initial_values()
    ids, scale = batches()[1]
    w = {name: tf.Variable(value) for name, value in values.items()}
    with tf.GradientTape() as tape:
        loss = loss_fn(tf, w, tf.constant(ids), tf.constant(scale))
    grads = {name: g.numpy() for name, g in zip(w, tape.gradient(loss, list(w.values())))}
    names = {id(v): n for n, v in w.items()}
    optimizer = optimization.Lamb(lr, weight_decay_rate=wd, global_clipnorm=None,
                                  variable_name_fn=lambda v: names[id(v)])
    optimizer.apply([tf.constant(grads[n]) for n in w], list(w.values()))
    for name, value in values.items():
        g = grads[name]
        m, v = 0.1 * g, 0.001 * g * g
        update = (m / 0.1) / (np.sqrt(v / 0.001) + 1e-6)
        excluded = "LayerNorm" in name or "bias" in name
        if not excluded:
            update = update + wd * value
            ratio = np.linalg.norm(value) / np.linalg.norm(update)
            update = ratio * update
        np.testing.assert_allclose(w[name].numpy(), value - lr * update, rtol=1e-5, atol=1e-7,
                                   err_msg=name)


def torch_adamw_numpy(values, grads_per_step, lr_per_step, wd, clipnorm, beta_1=0.9, beta_2=0.999,
                      epsilon=1e-6, excluded=("LayerNorm", "bias")):
    """The oracle: torch.optim.AdamW's step (decoupled decay w *= 1 - lr * wd, then Adam with
    bias correction, denominator sqrt(v) / sqrt(1 - beta_2^t) + eps), written from its
    documented algorithm in float64, after tf.clip_by_global_norm's clipping; the original's
    exclusions. Yields the weights after each step."""
    w = {n: v.astype(np.float64) for n, v in values.items()}
    m = {n: np.zeros_like(v) for n, v in w.items()}
    v2 = {n: np.zeros_like(v) for n, v in w.items()}
    for t, (grads, lr) in enumerate(zip(grads_per_step, lr_per_step), start=1):
        norm = np.sqrt(sum(np.sum(np.square(g.astype(np.float64))) for g in grads.values()))
        clip = clipnorm / max(norm, clipnorm)
        for n in w:
            g = grads[n].astype(np.float64) * clip
            if not any(pattern in n for pattern in excluded):
                w[n] = w[n] * (1.0 - lr * wd)
            m[n] = beta_1 * m[n] + (1.0 - beta_1) * g
            v2[n] = beta_2 * v2[n] + (1.0 - beta_2) * g * g
            denom = np.sqrt(v2[n]) / np.sqrt(1.0 - beta_2 ** t) + epsilon
            w[n] = w[n] - lr / (1.0 - beta_1 ** t) * m[n] / denom
        yield {n: x.copy() for n, x in w.items()}


def schedule_numpy(init_lr, num_train_steps, num_warmup_steps, step):
    if step < num_warmup_steps:
        return init_lr * step / num_warmup_steps
    return init_lr * (1.0 - min(step, num_train_steps) / num_train_steps)


@pytest.mark.parametrize("optimizer_type,num_warmup_steps", [("adam", 3), ("adam", 0),
                                                             ("adamw", 3)])
def test_adam_is_torch_adamw_with_the_originals_exclusions_and_clipping(optimizer_type,
                                                                         num_warmup_steps):
    """--optimizer=adam = torch.optim.AdamW's math (numpy oracle) with the original's
    exclusions, clipping to global norm 1.0 and schedule: the same update at every step within
    1e-6 (clipped and unclipped steps, warmup and decay). The control: the original's
    AdamWeightDecay (no bias correction) is far from it."""
    lr, wd, num_train_steps = 0.01, 0.1, 12  # a large decay so that a wrong exclusion shows
    values = initial_values()
    w = {name: tf.Variable(value, name=name) for name, value in values.items()}
    names = {id(v): name for name, v in w.items()}
    optimizer = optimization.create_optimizer(
        lr, num_train_steps, num_warmup_steps, optimizer_type=optimizer_type,
        weight_decay_rate=wd, variable_name_fn=lambda v: names[id(v)])
    variables = list(w.values())
    ours, grads_per_step = [], []
    for batch_ids, batch_scale in batches():
        with tf.GradientTape() as tape:
            loss = loss_fn(tf, w, tf.constant(batch_ids), tf.constant(batch_scale))
        grads = tape.gradient(loss, variables)
        grads_per_step.append({name: g.numpy() for name, g in zip(w, grads)})
        before = {name: v.numpy() for name, v in w.items()}
        optimizer.apply(grads, variables)
        ours.append({name: (before[name], v.numpy()) for name, v in w.items()})
    lrs = [schedule_numpy(lr, num_train_steps, num_warmup_steps, s) for s in range(STEPS)]
    # The oracle steps from our weights before each step (its own moments): per-step updates.
    oracle_m = torch_adamw_numpy(values, grads_per_step, lrs, wd, 1.0)
    worst = 0.0
    previous = {n: v.astype(np.float64) for n, v in values.items()}
    for step, expected in enumerate(oracle_m):
        for name in SHAPES:
            before, after = ours[step][name]
            worst = max(worst, float(np.abs((after - before)
                                            - (expected[name] - previous[name])).max()))
        previous = expected
    assert any(g > 1.0 for g in (np.sqrt(sum(np.sum(np.square(x)) for x in g.values()))
                                 for g in grads_per_step))  # some steps are clipped
    if optimizer_type == "adam":
        assert worst < 1e-6, worst
        assert isinstance(optimizer, optimization.Adam)
        assert sorted(optimizer.decayed_variable_names()) == [
            "bert/embeddings/word_embeddings", "bert/encoder/layer_0/attention/self/query/kernel"]
    else:
        assert worst > 1e-3, worst  # no bias correction: early updates several times Adam's


def test_adam_is_keras_adamw():
    """Second oracle: keras.optimizers.AdamW with the same exclusions (by name), clipping and
    schedule. Keras scales epsilon by sqrt(1 - beta_2^t) (epsilon-hat), so both run with a
    negligible epsilon here; the numpy oracle above checks epsilon 1e-6."""
    import keras
    lr, wd, num_train_steps, num_warmup_steps, eps = 0.01, 0.1, 12, 3, 1e-12
    values = initial_values()
    ours = {name: tf.Variable(value, name=name) for name, value in values.items()}
    theirs = {name: tf.Variable(value, name=name) for name, value in values.items()}
    names = {id(v): name for name, v in ours.items()}
    schedule = optimization.WarmupLinearDecay(lr, num_train_steps, num_warmup_steps)
    optimizer = optimization.Adam(schedule, weight_decay_rate=wd, epsilon=eps,
                                  variable_name_fn=lambda v: names[id(v)])
    keras_adamw = keras.optimizers.AdamW(learning_rate=schedule, weight_decay=wd, epsilon=eps,
                                         global_clipnorm=1.0)
    keras_adamw.exclude_from_weight_decay(var_names=["LayerNorm", "bias"])
    for step, (batch_ids, batch_scale) in enumerate(batches()):
        for w, opt in ((ours, optimizer), (theirs, keras_adamw)):
            variables = list(w.values())
            with tf.GradientTape() as tape:
                loss = loss_fn(tf, w, tf.constant(batch_ids), tf.constant(batch_scale))
            opt.apply(tape.gradient(loss, variables), variables)
        for name in SHAPES:
            np.testing.assert_allclose(ours[name].numpy(), theirs[name].numpy(), rtol=0,
                                       atol=1e-6, err_msg=f"{name} after step {step + 1}")
    assert not np.allclose(ours["bert/encoder/layer_0/output/LayerNorm/gamma"].numpy(),
                           values["bert/encoder/layer_0/output/LayerNorm/gamma"])


FIT_SCRIPT = r"""
import json, sys
import numpy as np
import tensorflow as tf
from bert_tf.training import distribution, optimization
import keras

replicas = int(sys.argv[1])
strategy = (distribution.create_strategy("mirrored", num_cpu_devices=2) if replicas == 2
            else distribution.create_strategy("one_device"))
rng = np.random.RandomState(0)
x = rng.normal(size=(64, 8)).astype(np.float32)
y = (x @ rng.normal(size=(8, 3)) * 5).astype(np.float32)
with strategy.scope():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dense(3)])
    model.set_weights([np.random.RandomState(i).normal(size=w.shape).astype(np.float32) * 0.3
                       for i, w in enumerate(model.get_weights())])
    # global_clipnorm 0.1 is far below the gradient norm: every step is clipped, so a norm over
    # one replica's gradient instead of the global one would show.
    optimizer = optimization.AdamWeightDecay(1e-2, weight_decay_rate=0.01, global_clipnorm=0.1)
    model.compile(optimizer=optimizer, loss="mse")
model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
print(json.dumps([w.tolist() for w in model.get_weights()]))
"""


def test_keras_fit_under_mirrored_strategy_equals_one_device(tmp_path):
    """Plain model.fit (no bert_tf.training.loops loop) under MirroredStrategy on 2 logical CPUs trains
    exactly as on one device: our optimizers sum the replicas' gradients before clipping."""
    import json
    import subprocess
    import sys

    from conftest import PROJECT_ROOT

    weights = {}
    for replicas in (1, 2):
        result = subprocess.run([sys.executable, "-c", FIT_SCRIPT, str(replicas)],
                                cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        weights[replicas] = [np.asarray(w) for w in json.loads(result.stdout.splitlines()[-1])]
    initial = [np.random.RandomState(i).normal(size=w.shape) * 0.3
               for i, w in enumerate(weights[1])]
    assert max(np.abs(a - b).max() for a, b in zip(weights[1], initial)) > 1e-2  # it trained
    for one, mirrored in zip(weights[1], weights[2]):
        np.testing.assert_allclose(mirrored, one, rtol=1e-5, atol=1e-6)


def test_every_optimizer_name_is_accepted_where_names_are_checked(tmp_path):
    """The --optimizer flag's choices, RunSettings' check and create_optimizer's table name the
    same optimizers; runner.build_optimizer's call gives each its class."""
    import re

    from conftest import PROJECT_ROOT

    from bert_tf.errors import InputError
    from bert_tf.training.settings import RunSettings

    source = (PROJECT_ROOT / "run" / "common_flags.py").read_text()
    choices = re.search(r'DEFINE_enum\("optimizer", "adamw", \[([^\]]*)\]', source).group(1)
    assert sorted(re.findall(r'"(\w+)"', choices)) == sorted(optimization.OPTIMIZERS)
    for name, cls in optimization.OPTIMIZERS.items():
        RunSettings(output_dir=str(tmp_path / name), do_train=True, num_train_steps=10,
                    optimizer=name).validate()
        assert type(optimization.create_optimizer(1e-3, 10, 1, name)) is cls
    with pytest.raises(InputError, match="must be adamw, adam or lamb"):
        RunSettings(output_dir=str(tmp_path / "x"), do_train=True, num_train_steps=10,
                    optimizer="sgd").validate()
    assert not issubclass(optimization.Adam, optimization.AdamWeightDecay)  # original runs: adamw

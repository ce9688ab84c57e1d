"""float16 training with dynamic loss scaling, on this CPU, with a tiny BERT.

What is checked against what:
- skipping: each step's gradients are computed here, independently of the loop, at the loss
  scale of that step (a GradientTape on scale x loss, as LossScaleOptimizer's rule reads
  them): the loop skips exactly the steps whose scaled gradients are not finite, and a skipped
  step leaves the weights, the Adam slots and the global step bit for bit as they were;
- the scale: keras.optimizers.LossScaleOptimizer's documented rule (halve at a skipped step,
  double after `loss_scale_growth_steps` finite steps in a row), stepped in Python beside the
  loop;
- resuming: an uninterrupted run (same weights, slots, scale, counts and loss curve after a
  stop and a resume, with skipped steps before the stop, so the input replay must count them);
- two replicas: one device (the same Adam moments; a second sum across replicas doubled them);
- the loss curve against float32: tests/training/test_loops.py
  (test_mixed_precision_loss_curve_matches_fp32, float16 within 8 unit roundoffs on average).
"""
import json
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf.errors import InputError
from bert_tf.model.config import BertConfig
from bert_tf.model.models import BertPretrainer
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.training import distribution, loops, optimization, restore
from bert_tf.training.settings import RunSettings

pytestmark = pytest.mark.slow

BATCH = 8
NUM_BATCHES = 10  # distinct batches before the input repeats


def batches(offsets=None, nan_weights=False):
    """The training input: NUM_BATCHES batches of tiny pretraining examples, repeated; with
    `offsets`, each batch also holds an `offset` (see OffsetTask)."""
    examples = fx.make_examples(BATCH * NUM_BATCHES, seed=3)
    data = {name: np.stack([e[name] for e in examples]) for name in examples[0]}
    data = {name: values.astype(np.float32 if name == "masked_lm_weights" else np.int32)
            for name, values in data.items()}
    if nan_weights:
        data["masked_lm_weights"][:] = np.nan
    if offsets is not None:
        data["offset"] = np.repeat(np.asarray(offsets, np.float32), BATCH)

    def dataset_fn(input_context=None):
        return tf.data.Dataset.from_tensor_slices(data).batch(BATCH, drop_remainder=True).repeat()

    return dataset_fn


class OffsetTask(PretrainingTask):
    """Pretraining whose loss also adds the batch's `offset`: an inf offset makes the loss inf
    and leaves every gradient finite."""

    def train_metrics(self, batch, outputs, normalizers):
        metrics = super().train_metrics(batch, outputs, normalizers)
        return dict(metrics, loss=metrics["loss"] + batch["offset"][0])


def build(initial_loss_scale, growth_steps=2000, mixed_precision="float16", learning_rate=2e-3):
    """(strategy, tiny BertPretrainer, optimizer) under `mixed_precision`; set it back to
    float32 after the run (`policy_back`)."""
    keras.utils.set_random_seed(0)
    loops.set_mixed_precision(mixed_precision)
    strategy = distribution.create_strategy("one_device")
    with strategy.scope():
        model = BertPretrainer(BertConfig.from_dict(fx.TINY_CONFIG))
        optimizer = loops.wrap_optimizer(
            optimization.create_optimizer(learning_rate, 100, 0), mixed_precision,
            initial_loss_scale=initial_loss_scale, loss_scale_growth_steps=growth_steps)
        optimizer.build(model.trainable_variables)
    return strategy, model, optimizer


@pytest.fixture(autouse=True)
def policy_back():
    yield
    loops.set_mixed_precision("off")


def settings(output_dir, steps):
    """One step per loop call (log_steps=1), a checkpoint every 4."""
    return RunSettings(output_dir=str(output_dir), do_train=True, num_train_steps=steps,
                       train_batch_size=BATCH, iterations_per_loop=10, save_checkpoints_steps=4,
                       log_steps=1)


def state(model, optimizer):
    """Copies of the weights, the Adam slots and the global step."""
    inner = loops.inner_optimizer(optimizer)
    return ([v.numpy().copy() for v in model.trainable_variables],
            [v.numpy().copy() for v in inner._m + inner._v], int(optimizer.iterations.numpy()))


def scalars(model_dir, tag):
    """{step: value} of a TensorBoard scalar of a run."""
    values = {}
    for path in tf.io.gfile.glob(f"{model_dir}/train/events.out.tfevents.*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def test_overflowing_steps_are_skipped_and_the_scale_halves():
    """Initial scale 2^24: the float16 gradients overflow until the scale has come down. One
    step per call; before each, the gradients of scale x loss are computed here on the same
    batch: a step is skipped exactly when they are not finite, and then changes nothing but
    the scale (halved) and its growth count (0)."""
    strategy, model, optimizer = build(initial_loss_scale=2.0 ** 24)
    task = PretrainingTask()
    batch = next(iter(batches()()))
    loop = loops.make_train_loop(strategy, loops.make_replica_train_step(model, optimizer, task),
                                 task.train_metric_names, optimizer)
    iterator = iter(tf.data.Dataset.from_tensors(batch).repeat())

    @tf.function
    def scaled_gradients_finite(scale):
        with tf.GradientTape() as tape:
            metrics = task.train_metrics(batch, task.outputs(model, batch, training=True),
                                         task.normalizers(batch))
            loss = metrics["loss"] * scale
        grads = tape.gradient(loss, model.trainable_variables)
        return tf.reduce_all([tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(g)))
                              for g in grads if g is not None])

    scale, skipped = 2.0 ** 24, 0
    for _ in range(24):
        before = state(model, optimizer)
        expect_skip = not bool(scaled_gradients_finite(tf.constant(scale)))
        steps, totals, loss, applied = loop(iterator, tf.constant(1))
        after = state(model, optimizer)
        assert int(steps) == 1 and int(applied) == (0 if expect_skip else 1)
        if not expect_skip:
            break
        skipped += 1
        scale /= 2
        assert float(optimizer.dynamic_scale.numpy()) == scale
        assert int(optimizer.step_counter.numpy()) == 0
        assert after[2] == before[2] == 0  # the global step
        for old, new in zip(before[0] + before[1], after[0] + after[1]):
            np.testing.assert_array_equal(new, old)  # weights and slots untouched
        assert float(totals["loss"]) == 0.0  # a skipped step's metrics are left out
    assert skipped >= 3, skipped  # 2^24 overflows float16 for a while
    assert after[2] == 1 and float(optimizer.dynamic_scale.numpy()) == scale
    assert int(optimizer.step_counter.numpy()) == 1
    for old, new in ((before[0], after[0]), (before[1], after[1])):  # weights and slots moved
        assert max(np.abs(a - b).max() for a, b in zip(old, new)) > 0
    assert np.isfinite(float(loss)) and float(totals["loss"]) == float(loss)


def test_the_scale_doubles_after_the_growth_steps(tmp_path):
    """Growth every 3 finite steps from 16 (no overflow at these scales): the scale after each
    step, from the run's TensorBoard summaries, follows the rule stepped here."""
    strategy, model, optimizer = build(initial_loss_scale=16.0, growth_steps=3)
    loops.train(strategy, model, optimizer, PretrainingTask(), batches(),
                settings(tmp_path, 7), log=lambda message: None)
    expected, scale, finite = [], 16.0, 0
    for _ in range(7):
        finite += 1
        if finite == 3:
            scale, finite = scale * 2, 0
        expected.append(scale)
    logged = scalars(tmp_path, "loss_scale")
    assert [logged[step] for step in range(1, 8)] == expected == [16, 16, 32, 32, 32, 64, 64]
    assert set(scalars(tmp_path, "skipped_steps").values()) == {0.0}
    assert int(optimizer.step_counter.numpy()) == finite == 1


def test_a_non_finite_loss_is_skipped_and_a_lasting_one_stops(tmp_path):
    """An inf loss whose gradients are finite (float16 overflow in the forward pass) is skipped
    as well, and training goes on; a loss that stays NaN halves the scale down to 1 and then
    stops the run, naming the step, with nothing saved."""
    offsets = [0.0] * NUM_BATCHES
    offsets[1] = np.inf
    strategy, model, optimizer = build(initial_loss_scale=2.0 ** 10)
    task = OffsetTask()
    batch = next(iter(batches(offsets)().skip(1)))
    with tf.GradientTape() as tape:
        loss = task.train_metrics(batch, task.outputs(model, batch, training=True),
                                  task.normalizers(batch))["loss"]
    grads = tape.gradient(loss * 2.0 ** 10, model.trainable_variables)
    assert np.isinf(float(loss))  # the loss alone is not finite:
    assert all(np.isfinite(tf.convert_to_tensor(g).numpy()).all() for g in grads
               if g is not None)
    loops.train(strategy, model, optimizer, task, batches(offsets), settings(tmp_path / "one", 4),
                log=lambda message: None)
    assert int(optimizer.iterations.numpy()) == 4
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 9
    assert scalars(tmp_path / "one", "skipped_steps")[4] == 1
    assert np.isfinite(fx.loss_curve(tmp_path / "one")).all()

    strategy, model, optimizer = build(initial_loss_scale=8.0)
    with pytest.raises(loops.NonFiniteLossError,
                       match=r"not finite at step 1 \(loss nan\) with the float16 loss scale at "
                             r"its minimum 1; stopping \(last checkpoint: none\)"):
        loops.train(strategy, model, optimizer, PretrainingTask(), batches(nan_weights=True),
                    settings(tmp_path / "lasting", 4), log=lambda message: None)
    assert float(optimizer.dynamic_scale.numpy()) == 0.5  # skipped at 8, 4, 2 and 1
    assert tf.train.latest_checkpoint(str(tmp_path / "lasting")) is None


def test_the_logged_loss_is_the_mean_over_the_applied_steps_only(tmp_path):
    """Four steps per loop call (log_steps=4), the second batch's loss inf (skipped):
    the loss logged for that call is the mean over its three applied steps, each step's loss
    taken from a second run of the same start and input logging every step (log_steps=1),
    not their sum over the four steps run."""
    offsets = [0.0] * NUM_BATCHES
    offsets[1] = np.inf

    def run(output_dir, log_steps):
        strategy, model, optimizer = build(initial_loss_scale=2.0 ** 10)
        loops.train(strategy, model, optimizer, OffsetTask(), batches(offsets),
                    RunSettings(output_dir=str(output_dir), do_train=True, num_train_steps=4,
                                train_batch_size=BATCH, iterations_per_loop=10,
                                save_checkpoints_steps=4, log_steps=log_steps),
                    log=lambda message: None)

    run(tmp_path / "every_step", log_steps=1)
    run(tmp_path / "four_steps", log_steps=4)
    per_step = scalars(tmp_path / "every_step", "loss")
    assert sorted(per_step) == [1, 2, 3, 4]  # batches 0, 2, 3, 4 applied; batch 1 skipped
    assert np.isfinite(list(per_step.values())).all()
    # The first call runs batches 0-3 (up to step 4, the first multiple of log_steps) and
    # applies three: the global step is 3 after it, and the last call applies batch 4.
    logged = scalars(tmp_path / "four_steps", "loss")
    assert sorted(logged) == [3, 4]
    assert scalars(tmp_path / "four_steps", "skipped_steps")[3] == 1
    np.testing.assert_allclose(logged[3], np.mean([per_step[s] for s in (1, 2, 3)]), rtol=1e-5)
    np.testing.assert_allclose(logged[4], per_step[4], rtol=1e-5)


def test_resume_restores_the_scale_its_count_and_the_skipped_steps(tmp_path):
    """8 steps straight, and 4 then 4 more after a restart, from a scale of 2^40 (skipped steps
    before the stop) with growth every 3 steps: the same weights, slots, scale, counts and
    loss curve. The checkpoint holds the inner optimizer under the keys of a float32 run's
    (plus loss_scale/...), so a float32 run evaluates it at its step."""
    def run(output_dir, steps):
        strategy, model, optimizer = build(initial_loss_scale=2.0 ** 40, growth_steps=3)
        loops.train(strategy, model, optimizer, PretrainingTask(), batches(),
                    settings(output_dir, steps), log=lambda message: None,
                    deterministic_input=True)
        return model, optimizer

    straight = run(tmp_path / "straight", 8)
    run(tmp_path / "stopped", 4)
    reader = tf.train.load_checkpoint(str(tmp_path / "stopped" / "model.ckpt-4"))
    skipped_at_4 = int(reader.get_tensor("loss_scale/skipped_steps/.ATTRIBUTES/VARIABLE_VALUE"))
    assert skipped_at_4 % NUM_BATCHES, skipped_at_4  # a replay that ignores them would show
    assert reader.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 4
    messages = []
    strategy, model, optimizer = build(initial_loss_scale=2.0 ** 40, growth_steps=3)
    loops.train(strategy, model, optimizer, PretrainingTask(), batches(),
                settings(tmp_path / "stopped", 8), log=messages.append, deterministic_input=True)
    assert any(f"{skipped_at_4} steps skipped so far" in m for m in messages), messages
    for key in [f"loss_scale/{name}/.ATTRIBUTES/VARIABLE_VALUE"
                for name in ("scale", "finite_steps", "skipped_steps")] + [
                    "save_counter/.ATTRIBUTES/VARIABLE_VALUE"]:  # 2 saves either way
        assert (tf.train.load_checkpoint(str(tmp_path / "straight" / "model.ckpt-8")).get_tensor(
            key) == tf.train.load_checkpoint(str(tmp_path / "stopped" / "model.ckpt-8"))
            .get_tensor(key)), key
    for name in ("dynamic_scale", "step_counter"):
        assert getattr(optimizer, name).numpy() == getattr(straight[1], name).numpy(), name
    for a, b in zip(state(*straight)[:2], state(model, optimizer)[:2]):
        for x, y in zip(a, b):
            np.testing.assert_allclose(y, x, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fx.loss_curve(tmp_path / "stopped"),
                               fx.loss_curve(tmp_path / "straight"), rtol=1e-6)

    # Eval in float32 reads the float16 run's checkpoint: its weights and its global step.
    strategy, model, optimizer = build(initial_loss_scale=2.0 ** 40, mixed_precision="off")
    step = restore.restore_for_inference(PretrainingTask(), model, optimizer, RunSettings(
        output_dir=str(tmp_path / "straight"), do_eval=True), log=lambda message: None)
    assert step == 8
    for x, y in zip(straight[0].trainable_variables, model.trainable_variables):
        np.testing.assert_array_equal(y.numpy(), x.numpy())


TWO_REPLICAS_SCRIPT = r"""
import json, sys
sys.path.insert(0, "tests")
import keras, numpy as np, tensorflow as tf
import pretraining_fixtures as fx
from bert_tf.model.config import BertConfig
from bert_tf.model.models import BertPretrainer
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.training import distribution, loops, optimization
from bert_tf.training.settings import RunSettings

replicas, output_dir = int(sys.argv[1]), sys.argv[2]
strategy = (distribution.create_strategy("mirrored", num_cpu_devices=2) if replicas == 2
            else distribution.create_strategy("one_device"))
examples = fx.make_examples(32, seed=3)
data = {n: np.stack([e[n] for e in examples]).astype(
    np.float32 if n == "masked_lm_weights" else np.int32) for n in examples[0]}
keras.utils.set_random_seed(0)
loops.set_mixed_precision("float16")
with strategy.scope():
    model = BertPretrainer(BertConfig.from_dict(fx.TINY_CONFIG))
    # No clipping: the moments then show the gradient's size.
    optimizer = loops.wrap_optimizer(optimization.AdamWeightDecay(
        optimization.WarmupLinearDecay(2e-3, 10, 0), global_clipnorm=None), "float16")

def dataset_fn(context):
    batch = context.get_per_replica_batch_size(8)
    return tf.data.Dataset.from_tensor_slices(data).shard(
        context.num_input_pipelines, context.input_pipeline_id).batch(batch).repeat()

loops.train(strategy, model, optimizer, PretrainingTask(), dataset_fn, RunSettings(
    output_dir=output_dir, do_train=True, num_train_steps=2, train_batch_size=8,
    iterations_per_loop=1, log_steps=1), log=lambda message: None)
inner = loops.inner_optimizer(optimizer)
print(json.dumps({"m": [float(np.abs(v.numpy()).sum()) for v in inner._m],
                  "loss": [float(x) for x in fx.loss_curve(output_dir)]}))
"""


def test_float16_on_two_replicas_sums_the_gradients_once(tmp_path):
    """MirroredStrategy on 2 logical CPUs trains as one device in float16 too: Keras'
    LossScaleOptimizer applies the update from threads of its own, which must still see that
    the loop has summed the gradients (they were summed twice: Adam moments 2x one device's)."""
    from conftest import PROJECT_ROOT

    processes = [subprocess.Popen([sys.executable, "-c", TWO_REPLICAS_SCRIPT, str(replicas),
                                   str(tmp_path / str(replicas))], cwd=PROJECT_ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for replicas in (1, 2)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    one, two = results
    assert len(one["loss"]) == 2 and min(one["m"]) >= 0 and max(one["m"]) > 0
    np.testing.assert_allclose(two["m"], one["m"], rtol=1e-3)
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=1e-3)


def test_float16_is_refused_on_tpu():
    for tpu in ({"use_tpu": True}, {"distribution_strategy": "tpu"}):
        with pytest.raises(InputError, match=r"^mixed_precision: float16 is for GPUs, not TPUs "
                                             r"\((use_tpu|distribution_strategy=tpu)\): use "
                                             r"mixed_precision=bfloat16"):
            RunSettings(output_dir=None, do_predict=True, init_checkpoint="x",
                        mixed_precision="float16", **tpu).validate()
    RunSettings(output_dir=None, do_predict=True, init_checkpoint="x", use_tpu=True,
                mixed_precision="bfloat16").validate()
    for name, value in (("initial_loss_scale", 0.5), ("loss_scale_growth_steps", 0)):
        with pytest.raises(InputError, match=f"^{name}: must be"):
            RunSettings(output_dir=None, do_predict=True, init_checkpoint="x",
                        **{name: value}).validate()

"""bert_tf.training.loops and bert_tf.training.distribution in-process: mixed precision (and its loss curve
against fp32), XLA, LAMB, gradient accumulation, a non-finite loss, and the TPU set-up path
(without a TPU)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf.training import distribution, optimization, loops
from bert_tf.training.settings import RunSettings
from bert_tf.data import input_pipeline
from bert_tf.model.config import BertConfig
from bert_tf.errors import InputError
from bert_tf.model.models import BertPretrainer
from bert_tf.tasks.pretraining.task import PretrainingTask
from bert_tf.tasks.pretraining.task import pretraining_feature_spec

SPEC = pretraining_feature_spec(fx.SEQ_LENGTH, fx.MAX_PREDICTIONS)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    paths, _ = fx.write_record_files(tmp_path_factory.mktemp("records"), 2, 16)
    return paths


def train_tiny(model_dir, paths, steps=20, mixed_precision="off", jit_compile=False,
               gradient_accumulation_steps=1, learning_rate=2e-3, batch_size=8,
               save_checkpoints_steps=1000, optimizer_type="adamw"):
    """Trains the tiny model in file order; returns (per-step loss curve, model, optimizer)."""
    keras.utils.set_random_seed(0)
    loops.set_mixed_precision(mixed_precision)
    try:
        strategy = distribution.create_strategy("one_device")
        with strategy.scope():
            model = BertPretrainer(BertConfig.from_dict(fx.TINY_CONFIG))
            optimizer = loops.wrap_optimizer(
                optimization.create_optimizer(learning_rate, steps, 2, optimizer_type),
                mixed_precision)
        config = RunSettings(
            output_dir=str(model_dir), do_train=True, num_train_steps=steps,
            train_batch_size=batch_size, iterations_per_loop=10,
            save_checkpoints_steps=save_checkpoints_steps, log_steps=1,
            gradient_accumulation_steps=gradient_accumulation_steps, jit_compile=jit_compile)
        data = input_pipeline.dataset_fn(paths, SPEC, batch_size, shuffle=False)
        loops.train(strategy, model, optimizer, PretrainingTask(), data, config,
                       log=lambda message: None)
    finally:
        loops.set_mixed_precision("off")
    return fx.loss_curve(model_dir), model, optimizer


def assert_finite_and_decreasing(curve, steps):
    assert len(curve) == steps
    assert np.all(np.isfinite(curve))
    assert np.mean(curve[-5:]) < np.mean(curve[:5]) - 0.3, curve


# bfloat16 with adamw: test_mixed_precision_loss_curve_matches_fp32.
@pytest.mark.parametrize("mixed_precision,jit_compile,optimizer_type", [
    ("float16", False, "lamb"), ("off", True, "adamw")])
def test_mixed_precision_and_xla_train(tmp_path, records, mixed_precision, jit_compile,
                                       optimizer_type):
    # LAMB's step is relative to each layer's weight norm: it needs a larger learning rate.
    curve, model, optimizer = train_tiny(tmp_path, records, mixed_precision=mixed_precision,
                                         jit_compile=jit_compile, optimizer_type=optimizer_type,
                                         learning_rate=0.05 if optimizer_type == "lamb" else 2e-3)
    assert_finite_and_decreasing(curve, 20)
    compute = {"off": "float32", "bfloat16": "bfloat16", "float16": "float16"}[mixed_precision]
    assert model.encoder.dtype_policy.compute_dtype == compute
    assert all(v.dtype == "float32" for v in model.trainable_variables)
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer) == (mixed_precision == "float16")
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    assert isinstance(inner, {"adamw": optimization.AdamWeightDecay, "lamb": optimization.Lamb}[
        optimizer_type])
    assert int(optimizer.iterations.numpy()) == 20


def relative_difference(curve, baseline):
    return np.abs(np.asarray(curve) - baseline) / np.asarray(baseline)


# Bounds on |loss - fp32 loss| / fp32 loss, in units of the compute type's unit roundoff u
# (half the spacing of its numbers near 1: bfloat16 keeps 8 significant bits, u = 2^-9 = 0.2%;
# float16 11 bits, u = 2^-11 = 0.05%). Matmul inputs, activations and attention are rounded to u
# (with float32 accumulation, weights and optimizer), so one forward pass is off by a few u; over
# 40 steps the weights drift apart a little, most where the curve is steep (it moves ~10% per
# step there). Bounds: mean over the steps < 8u, any step < 25u, final loss < 10u; for bfloat16
# mean < 1.6%, max < 4.9%, final < 2%. Measured (as the model code changed): bfloat16 mean
# 0.07-0.38%, max 0.40-2.1%, final 0.02-0.10%; float16 mean 0.01-0.02%, max 0.04-0.09%; the
# control (fp32, 0.8x learning rate) mean 12%, max 22%: far outside.
CURVE_BOUNDS = {"bfloat16": 2.0 ** -9, "float16": 2.0 ** -11}
MEAN_BOUND, MAX_BOUND, FINAL_BOUND = 8, 25, 10


def assert_curve_matches(curve, baseline, unit_roundoff):
    rel = relative_difference(curve, baseline)
    assert rel.mean() < MEAN_BOUND * unit_roundoff, (rel.mean(), rel)
    assert rel.max() < MAX_BOUND * unit_roundoff, (rel.max(), rel)
    assert rel[-1] < FINAL_BOUND * unit_roundoff, (rel[-1], rel)


def test_mixed_precision_loss_curve_matches_fp32(tmp_path, records):
    """bfloat16 and float16 (loss-scaled) training follow fp32's loss curve step by step.

    Same initial weights (seed), same batches (file order), dropout off (the tiny config); 40
    steps in which the loss falls from 5.5 to 1.3. A control run in fp32 with a 0.8x learning
    rate must fall outside the bounds, so the comparison can fail.
    """
    steps = 40
    fp32, _, _ = train_tiny(tmp_path / "fp32", records, steps=steps)
    assert fp32[-1] < fp32[0] - 3.0, fp32  # the loss drops clearly
    for mode, unit_roundoff in CURVE_BOUNDS.items():
        curve, model, optimizer = train_tiny(tmp_path / mode, records, steps=steps,
                                             mixed_precision=mode)
        assert model.encoder.dtype_policy.compute_dtype == mode
        assert all(v.dtype == "float32" for v in model.trainable_variables)
        assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer) == (mode == "float16")
        assert len(curve) == steps
        assert_curve_matches(curve, fp32, unit_roundoff)
    control, _, _ = train_tiny(tmp_path / "control", records, steps=steps, learning_rate=1.6e-3)
    control_rel = relative_difference(control, fp32)
    assert control_rel.mean() > 2 * MEAN_BOUND * CURVE_BOUNDS["bfloat16"], control_rel
    assert control_rel.max() > 2 * MAX_BOUND * CURVE_BOUNDS["bfloat16"], control_rel


def test_gradient_accumulation_gives_the_same_steps(tmp_path, records):
    """4 micro-batches of 2 = one batch of 8: same loss curve (the loss is of the whole batch)."""
    whole, _, _ = train_tiny(tmp_path / "whole", records, steps=6)
    accumulated, _, _ = train_tiny(tmp_path / "accumulated", records, steps=6,
                                   gradient_accumulation_steps=4)
    np.testing.assert_allclose(accumulated, whole, rtol=1e-5)


def train_with_dropout(model_dir, paths, dropout, weights=None, dropout_from_step=0,
                       stop_at=None, resuming=False, steps=8):
    """The tiny pretrainer with `dropout` (hidden and attention), from `weights` or resumed from
    model_dir, trained in file order on a schedule of `steps` until `stop_at` (None: the end);
    returns its trainable weights and its per-step losses."""
    keras.utils.set_random_seed(0)  # the dropout layers' seed states
    strategy = distribution.create_strategy("one_device")
    with strategy.scope():
        model = BertPretrainer(BertConfig.from_dict(dict(
            fx.TINY_CONFIG, hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)))
        optimizer = optimization.create_optimizer(2e-3, steps, 2, "adam")
    settings = RunSettings(output_dir=str(model_dir), do_train=True, num_train_steps=steps,
                           train_batch_size=4, iterations_per_loop=10, log_steps=1,
                           save_checkpoints_steps=stop_at or steps,
                           dropout_from_step=dropout_from_step)
    data = input_pipeline.dataset_fn(paths, SPEC, 4, shuffle=False)
    init = weights and (lambda: [v.assign(w) for v, w in zip(model.trainable_variables, weights)])
    loops.train(strategy, model, optimizer, PretrainingTask(), data, settings, init_fn=init,
                log=lambda message: None, deterministic_input=resuming,
                should_stop=stop_at and (lambda: loops.global_step(optimizer) >= stop_at))
    return [v.numpy() for v in model.trainable_variables], fx.loss_curve(model_dir)


def test_late_dropout_is_a_run_without_dropout_continued_with_it(tmp_path, records):
    """dropout_from_step=3 in one run = the same schedule trained with dropout 0 and stopped at
    step 3, then resumed from that checkpoint by the model with dropout (run_pretraining
    --dropout=0 stopped, then resumed without it, as docs/pretraining_benchmarks.md did by
    hand); its first 3 steps are a run without dropout's, and dropout acts from step 4. Stopped
    at step 2 and resumed, it is the same run."""
    keras.utils.set_random_seed(0)
    start = [v.numpy() for v in BertPretrainer(BertConfig.from_dict(fx.TINY_CONFIG))
             .trainable_variables]
    late, late_curve = train_with_dropout(tmp_path / "late", records, 0.1, start,
                                          dropout_from_step=3)
    train_with_dropout(tmp_path / "by_hand", records, 0.0, start, stop_at=3)
    by_hand, by_hand_curve = train_with_dropout(tmp_path / "by_hand", records, 0.1,
                                                resuming=True)
    _, off_curve = train_with_dropout(tmp_path / "off", records, 0.0, start)
    _, on_curve = train_with_dropout(tmp_path / "on", records, 0.1, start)
    assert len(late_curve) == len(by_hand_curve) == 8
    np.testing.assert_allclose(late_curve, by_hand_curve, rtol=1e-6)
    for ours, theirs in zip(late, by_hand):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(late_curve[:3], off_curve[:3], rtol=1e-6)
    assert not np.allclose(late_curve[3:], off_curve[3:], rtol=1e-3)
    assert not np.allclose(late_curve[:3], on_curve[:3], rtol=1e-3)
    # Stopped before the switch and resumed: the same run.
    train_with_dropout(tmp_path / "resumed", records, 0.1, start, dropout_from_step=3, stop_at=2)
    # (Weights that only a failed restore would train from.)
    resumed, resumed_curve = train_with_dropout(tmp_path / "resumed", records, 0.1,
                                                [w * 0.5 for w in start], dropout_from_step=3,
                                                resuming=True)
    np.testing.assert_allclose(resumed_curve, late_curve, rtol=1e-6)
    for ours, theirs in zip(resumed, late):
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    # (Log lines every step above; with fewer, a loop call still ends at the switch.)
    settings = RunSettings(output_dir=str(tmp_path), num_train_steps=8, iterations_per_loop=10,
                           log_steps=100, save_checkpoints_steps=100, dropout_from_step=3)
    assert [loops._steps_to_run(settings, step) for step in (0, 2, 3)] == [3, 1, 5]


def test_non_finite_loss_stops_naming_the_step(tmp_path):
    examples = fx.make_examples(16, seed=4)
    examples[9]["masked_lm_weights"][0] = np.nan  # in the 3rd batch of 4
    path = fx.write_records(tmp_path / "bad.tfrecord", examples)
    with pytest.raises(loops.NonFiniteLossError, match=r"loss is nan at step 3\b.*model\.ckpt-2"):
        train_tiny(tmp_path / "model", [path], steps=10, batch_size=4, save_checkpoints_steps=1)
    assert tf.train.latest_checkpoint(str(tmp_path / "model")).endswith("model.ckpt-2")


def test_strategy_names_follow_the_original_flags():
    assert distribution.strategy_name("one_device", use_tpu=True) == "tpu"
    assert distribution.strategy_name("mirrored") == "mirrored"
    assert distribution.strategy_name(None) == "one_device"
    with pytest.raises(InputError, match="^distribution_strategy: use_tpu asks for tpu"):
        distribution.strategy_name("mirrored", use_tpu=True)
    with pytest.raises(InputError, match="^distribution_strategy: must be one of"):
        distribution.strategy_name("parameter_server")


def test_tpu_setup_path_without_a_tpu():
    """--use_tpu --tpu_name=... builds a real TPUClusterResolver from the original's flags and
    connects, initialises and builds TPUStrategy on it (those three recorded, not run)."""
    kwargs = distribution.tpu_resolver_kwargs(tpu_name="grpc://127.0.0.1:8470",
                                              tpu_zone="us-central1-b", gcp_project="my-project")
    assert kwargs == {"tpu": "grpc://127.0.0.1:8470", "zone": "us-central1-b",
                      "project": "my-project"}
    assert distribution.tpu_resolver_kwargs(master="grpc://10.0.0.2:8470")["tpu"] == \
        "grpc://10.0.0.2:8470"
    calls = []
    strategy = distribution.create_strategy(
        "tpu", tpu_kwargs=kwargs,
        _tpu_api=(tf.distribute.cluster_resolver.TPUClusterResolver,
                  lambda resolver: calls.append(("connect", resolver)),
                  lambda resolver: calls.append(("initialize", resolver)),
                  lambda resolver: ("TPUStrategy", resolver)))
    resolver = calls[0][1]
    assert [name for name, _ in calls] == ["connect", "initialize"]
    assert all(r is resolver for _, r in calls) and strategy == ("TPUStrategy", resolver)
    assert resolver.master() == "grpc://127.0.0.1:8470"
    assert isinstance(resolver, tf.distribute.cluster_resolver.TPUClusterResolver)

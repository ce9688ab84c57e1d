"""Recomputing each transformer layer in the backward pass (`recompute_layers`,
bert_tf.model.layers.set_recompute): the same loss and gradients as keeping the activations,
with dropout on, against the same model computed without it (the oracle: plain autodiff of
the same layers); it does recompute (the gradient graph runs every layer's matmuls once more);
and a run with --recompute_layers trains as one without. Memory and time:
bench/training/recompute_layers.py.
"""
import keras
import numpy as np
import pytest
import tensorflow as tf

import pretraining_fixtures as fx
from bert_tf.model import layers
from bert_tf.model.config import BertConfig
from bert_tf.model.cpu_kernels import cpu_kernels_mode, set_cpu_kernels
from bert_tf.model.models import BertPretrainer
from bert_tf.tasks.pretraining.task import PretrainingTask

pytestmark = pytest.mark.slow

DROPOUT = dict(hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


def batch(count=4):
    examples = fx.make_examples(count, seed=0)
    return {name: tf.constant(np.stack([e[name] for e in examples]).astype(
        np.float32 if name == "masked_lm_weights" else np.int32)) for name in examples[0]}


@pytest.fixture(params=["on", "off"])
def cpu_kernels(request):
    """Both kernel sets: the CPU kernels' custom gradients run inside the recomputation."""
    saved = cpu_kernels_mode()
    set_cpu_kernels(request.param)
    yield request.param
    set_cpu_kernels(saved)


def test_same_loss_and_gradients_with_dropout(cpu_kernels):
    """Tiny BERT pretraining, dropout 0.1 everywhere, one compiled gradient step from the same
    weights and dropout seed states, with and without recompute: same loss, gradients within
    1e-5 (relative to the largest), and the seed generators end in the same state. A third
    pass without recompute from other seed states gives gradients far outside that tolerance
    (dropout is on: the comparison can fail), and the recomputing graph holds every layer's
    forward matmuls a second time."""
    keras.utils.set_random_seed(1)
    model = BertPretrainer(BertConfig.from_dict(dict(fx.TINY_CONFIG, **DROPOUT)))
    task, inputs = PretrainingTask(), batch()
    seeds = [v for v in model.variables if v.path.endswith("seed_generator_state")]
    assert len(seeds) == 1 + 2 * fx.TINY_CONFIG["num_hidden_layers"]  # embeddings + 2 a layer
    initial = [v.numpy() for v in seeds]

    def step():
        with tf.GradientTape() as tape:
            outputs = task.outputs(model, inputs, training=True)
            loss = task.train_metrics(inputs, outputs, task.normalizers(inputs))["loss"]
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [tf.convert_to_tensor(g) for g in grads]

    def run(recompute, seed_states=initial):
        for variable, value in zip(seeds, seed_states):
            variable.assign(value)
        assert layers.set_recompute(model, recompute) == fx.TINY_CONFIG["num_hidden_layers"]
        function = tf.function(step)
        loss, grads = function()
        matmuls = sum(op.type in ("MatMul", "BatchMatMulV2")
                      for op in function.get_concrete_function().graph.get_operations())
        return (float(loss), [g.numpy() for g in grads], [v.numpy() for v in seeds], matmuls)

    kept, recomputed = run(False), run(True)
    largest = max(np.abs(g).max() for g in kept[1])
    assert recomputed[0] == pytest.approx(kept[0], rel=1e-6)
    for a, b in zip(kept[1], recomputed[1]):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * largest)
    for a, b in zip(kept[2], recomputed[2]):
        np.testing.assert_array_equal(b, a)
    assert not np.array_equal(kept[2][1], initial[1])  # the layers did draw masks
    # Each layer's forward again: 6 matmuls (fused QKV, scores, context, attention output,
    # intermediate, output), 7 in the last layer (its query, at a few positions, apart).
    assert recomputed[3] == kept[3] + 6 * fx.TINY_CONFIG["num_hidden_layers"] + 1
    other = run(False, [value + 7 for value in initial])
    assert max(np.abs(a - b).max() for a, b in zip(kept[1], other[1])) > 100 * 1e-5 * largest


def test_a_run_with_recompute_layers_trains_the_same(tmp_path):
    """`RunSettings.recompute_layers` through the runner: 3 steps of tiny BERT pretraining with
    dropout, seeded, with and without: the same loss curve and final weights."""
    from bert_tf.tasks.pretraining.task import PretrainingConfig, pretraining_records
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings

    paths, _ = fx.write_record_files(tmp_path, 1, 16)
    curves, checkpoints = {}, {}
    for recompute in (False, True):
        task = PretrainingTask(PretrainingConfig(
            bert_config=BertConfig.from_dict(dict(fx.TINY_CONFIG, **DROPOUT)),
            max_seq_length=fx.SEQ_LENGTH, max_predictions_per_seq=fx.MAX_PREDICTIONS,
            records=pretraining_records(paths), deterministic_input=True))
        built, build_model = [], task.build_model
        task.build_model = lambda: built.append(build_model()) or built[-1]
        output_dir = tmp_path / f"recompute_{recompute}"
        runner.run(task, RunSettings(
            output_dir=str(output_dir), do_train=True, train_batch_size=4, num_train_steps=3,
            learning_rate=1e-3, log_steps=1, seed=5, recompute_layers=recompute),
            log=lambda message: None)
        assert [layer.recompute for layer in built[0].encoder.transformer_layers] == [
            recompute] * fx.TINY_CONFIG["num_hidden_layers"]
        curves[recompute] = fx.loss_curve(output_dir)
        checkpoints[recompute] = tf.train.load_checkpoint(str(output_dir / "model.ckpt-3"))
    assert len(curves[False]) == 3
    np.testing.assert_allclose(curves[True], curves[False], rtol=1e-5)
    names = [name for name, _ in tf.train.list_variables(
        str(tmp_path / "recompute_False" / "model.ckpt-3")) if name.endswith("VARIABLE_VALUE")]
    assert len(names) > 60  # weights, Adam moments, dropout seeds, step
    for name in names:  # the weights' updates are ~1e-3: both runs are at the same place
        np.testing.assert_allclose(checkpoints[True].get_tensor(name),
                                   checkpoints[False].get_tensor(name), rtol=1e-5, atol=1e-6,
                                   err_msg=name)

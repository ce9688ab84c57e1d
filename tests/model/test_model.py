"""The encoder and heads against the reference release (../shared/reference) with the same weights.

The reference graph (modeling.BertModel + run_pretraining's masked-LM and next-sentence heads) is
built once with a small config; every variable (LayerNorm and biases too) is randomised, saved as
a TF1 checkpoint and loaded into ours. Inputs include padded rows, so the attention mask is tested.
"""
import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model.checkpoints import load_checkpoint
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertEncoder
from bert_tf.errors import InputError
from bert_tf.model.models import BertClassifier, BertPretrainer, BertSpanLabeler, BertTokenClassifier

SMALL_CONFIG = dict(vocab_size=99, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=37, hidden_act="gelu", hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.1, max_position_embeddings=40,
                    type_vocab_size=3, initializer_range=0.02)
BATCH, SEQ, PREDICTIONS = 3, 16, 4


def make_inputs(seed=0, config=SMALL_CONFIG):
    """Random inputs; row 0 unpadded, rows 1 and 2 padded (mask 0) from positions 10 and 5."""
    rng = np.random.RandomState(seed)
    input_ids = rng.randint(0, config["vocab_size"], (BATCH, SEQ)).astype(np.int32)
    input_mask = np.ones((BATCH, SEQ), np.int32)
    input_mask[1, 10:] = 0
    input_mask[2, 5:] = 0
    segment_ids = rng.randint(0, config["type_vocab_size"], (BATCH, SEQ)).astype(np.int32)
    positions = rng.randint(0, SEQ, (BATCH, PREDICTIONS)).astype(np.int32)
    return {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids,
            "masked_lm_positions": positions}


def build_reference(refbert, checkpoint_prefix, inputs, head="pretraining", num_labels=3,
                    extra_variables=(), seed=1, config=SMALL_CONFIG):
    """Builds the reference model + head in a TF1 graph, randomises all variables, saves them.

    Returns the reference outputs (numpy). `head`: "pretraining", "classifier" or "squad".
    `extra_variables`: (name, shape) of extra variables to save too (e.g. Adam slots).
    """
    v1, modeling = refbert.v1, refbert.modeling
    bert_config = modeling.BertConfig.from_dict(config)
    rng = np.random.RandomState(seed)
    v1.disable_v2_tensorshape()  # run_classifier/run_squad read `shape[-1].value`
    try:
        with v1.Graph().as_default():
            ids = v1.constant(inputs["input_ids"])
            mask = v1.constant(inputs["input_mask"])
            segments = v1.constant(inputs["segment_ids"])
            fetches = {}
            if head == "pretraining":
                model = modeling.BertModel(bert_config, is_training=False, input_ids=ids,
                                           input_mask=mask, token_type_ids=segments)
                run_pretraining = refbert.import_reference("run_pretraining")
                positions = v1.constant(inputs["masked_lm_positions"])
                shape = inputs["masked_lm_positions"].shape
                _, _, fetches["mlm"] = run_pretraining.get_masked_lm_output(
                    bert_config, model.get_sequence_output(), model.get_embedding_table(),
                    positions, v1.zeros(shape, v1.int32), v1.ones(shape))
                _, _, fetches["nsp"] = run_pretraining.get_next_sentence_output(
                    bert_config, model.get_pooled_output(), v1.zeros([shape[0]], v1.int32))
                fetches.update(sequence=model.get_sequence_output(),
                               pooled=model.get_pooled_output(),
                               layers=model.get_all_encoder_layers(),
                               embedding=model.get_embedding_output())
            elif head == "classifier":
                run_classifier = refbert.import_reference("run_classifier")
                _, _, fetches["logits"], _ = run_classifier.create_model(
                    bert_config, False, ids, mask, segments,
                    v1.zeros([ids.shape[0]], v1.int32), num_labels, False)
            elif head == "squad":
                run_squad = refbert.import_reference("run_squad")
                fetches["start"], fetches["end"] = run_squad.create_model(
                    bert_config, False, ids, mask, segments, False)
            for name, shape in extra_variables:
                v1.get_variable(name, shape)
            with v1.Session() as session:
                session.run(v1.global_variables_initializer())
                for variable in v1.global_variables():
                    value = rng.normal(0.0, 0.5, variable.shape.as_list())
                    session.run(variable.assign(value.astype(variable.dtype.as_numpy_dtype)))
                outputs = session.run(fetches)
                v1.train.Saver().save(session, str(checkpoint_prefix))
    finally:
        v1.enable_v2_tensorshape()
    return outputs


@pytest.fixture(scope="module")
def reference_pretraining(refbert, tmp_path_factory):
    """(checkpoint prefix, inputs, reference outputs) for the pretraining model."""
    prefix = tmp_path_factory.mktemp("reference") / "model.ckpt"
    inputs = make_inputs()
    return prefix, inputs, build_reference(refbert, prefix, inputs)


def max_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def test_pretrainer_matches_reference(reference_pretraining):
    prefix, inputs, ref = reference_pretraining
    model = BertPretrainer(BertConfig.from_dict(SMALL_CONFIG))
    report = load_checkpoint(model, prefix)
    assert report.new == [] and report.unused == []
    assert len(report.loaded) == 5 + 16 * SMALL_CONFIG["num_hidden_layers"] + 2 + 5 + 2
    out = model(inputs, training=False)
    assert max_diff(out["embedding_output"], ref["embedding"]) < 1e-5
    assert len(out["encoder_outputs"]) == len(ref["layers"]) == SMALL_CONFIG["num_hidden_layers"]
    for ours, theirs in zip(out["encoder_outputs"], ref["layers"]):
        assert max_diff(ours, theirs) < 1e-5
    assert max_diff(out["sequence_output"], ref["sequence"]) < 1e-5
    assert max_diff(out["pooled_output"], ref["pooled"]) < 1e-5
    mlm = np.reshape(out["masked_lm_log_probs"], [-1, SMALL_CONFIG["vocab_size"]])
    assert out["masked_lm_log_probs"].shape == (BATCH, PREDICTIONS, SMALL_CONFIG["vocab_size"])
    assert max_diff(mlm, ref["mlm"]) < 1e-5
    assert max_diff(out["next_sentence_log_probs"], ref["nsp"]) < 1e-5
    # The padding matters: the same ids without the mask give different outputs.
    unmasked = dict(inputs, input_mask=np.ones_like(inputs["input_mask"]))
    assert max_diff(model(unmasked)["sequence_output"][2], ref["sequence"][2]) > 1e-3


def test_heads_only_pretrainer_matches_reference_and_full_gradients(reference_pretraining):
    """return_encoder_outputs=False computes the last layer at [CLS] and the masked positions
    only: the same log-probs as the reference, and the same gradients as the full model."""
    prefix, inputs, ref = reference_pretraining
    model = BertPretrainer(BertConfig.from_dict(SMALL_CONFIG))
    load_checkpoint(model, prefix)
    out = model(inputs, training=False, return_encoder_outputs=False)
    assert sorted(out) == ["masked_lm_log_probs", "next_sentence_log_probs", "pooled_output"]
    mlm = np.reshape(out["masked_lm_log_probs"], [-1, SMALL_CONFIG["vocab_size"]])
    assert max_diff(mlm, ref["mlm"]) < 1e-5
    assert max_diff(out["next_sentence_log_probs"], ref["nsp"]) < 1e-5
    assert max_diff(out["pooled_output"], ref["pooled"]) < 1e-5

    def gradients(return_encoder_outputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=False, return_encoder_outputs=return_encoder_outputs)
            loss = (tf.reduce_sum(out["masked_lm_log_probs"][..., :5])
                    + tf.reduce_sum(out["next_sentence_log_probs"][:, 0]))
        return tape.gradient(loss, model.trainable_variables)

    for full, pruned in zip(gradients(True), gradients(False)):
        full, pruned = tf.convert_to_tensor(full), tf.convert_to_tensor(pruned)
        assert max_diff(full, pruned) < 1e-5 * max(1.0, float(tf.reduce_max(tf.abs(full))))
    last = model.encoder.transformer_layers[-1]
    # The last layer's output-dense gradient is not zero, so the comparison above means something.
    assert float(tf.reduce_max(tf.abs(gradients(False)[
        [v.path for v in model.trainable_variables].index(last.output_dense.kernel.path)]))) > 0


def test_compiled_and_mixed_precision_match_float32(reference_pretraining):
    prefix, inputs, ref = reference_pretraining
    config = BertConfig.from_dict(SMALL_CONFIG)
    model = BertPretrainer(config)
    load_checkpoint(model, prefix)
    compiled = tf.function(lambda x: model(x, training=False), jit_compile=True)
    out = compiled({k: tf.constant(v) for k, v in inputs.items()})
    assert max_diff(out["sequence_output"], ref["sequence"]) < 1e-5
    assert max_diff(out["next_sentence_log_probs"], ref["nsp"]) < 1e-5

    for policy, tolerance in (("mixed_bfloat16", 0.25), ("mixed_float16", 0.05)):
        half = BertPretrainer(config, dtype=policy)
        load_checkpoint(half, prefix)
        assert half.encoder.word_embeddings.dtype == "float32"  # float32 master weights
        # Compiled training step with dropout (XLA for bfloat16; float16 as a plain graph).
        step = tf.function(lambda x: half(x, training=True), jit_compile=policy == "mixed_bfloat16")
        out = step(inputs)
        assert out["masked_lm_log_probs"].dtype == tf.float32
        assert out["next_sentence_log_probs"].dtype == tf.float32
        assert out["sequence_output"].dtype == keras.DTypePolicy(policy).compute_dtype
        out = half(inputs, training=False)
        mlm = np.reshape(out["masked_lm_log_probs"], [-1, SMALL_CONFIG["vocab_size"]])
        # Same model, lower precision: close to float32, not equal.
        assert max_diff(out["next_sentence_log_probs"], ref["nsp"]) < tolerance * 4
        assert np.mean(np.abs(mlm - ref["mlm"])) < tolerance
        assert np.isfinite(mlm).all()


def test_classifier_matches_run_classifier(refbert, tmp_path):
    inputs = make_inputs(seed=3)
    ref = build_reference(refbert, tmp_path / "model.ckpt", inputs, head="classifier",
                          num_labels=5)
    model = BertClassifier(BertConfig.from_dict(SMALL_CONFIG), num_labels=5)
    report = load_checkpoint(model, tmp_path / "model.ckpt")
    assert report.new == [] and report.unused == []
    assert max_diff(model(inputs)["logits"], ref["logits"]) < 1e-5
    # What fine-tuning runs (ClassificationTask.outputs): the last layer at [CLS] only.
    heads_only = model(inputs, return_encoder_outputs=False)
    assert sorted(heads_only) == ["logits", "pooled_output"]
    assert max_diff(heads_only["logits"], ref["logits"]) < 1e-5


def test_span_labeler_matches_run_squad(refbert, tmp_path):
    inputs = make_inputs(seed=4)
    ref = build_reference(refbert, tmp_path / "model.ckpt", inputs, head="squad")
    model = BertSpanLabeler(BertConfig.from_dict(SMALL_CONFIG))
    report = load_checkpoint(model, tmp_path / "model.ckpt")
    assert report.new == [] and report.unused == []
    out = model(inputs)
    assert max_diff(out["start_logits"], ref["start"]) < 1e-5
    assert max_diff(out["end_logits"], ref["end"]) < 1e-5


def test_task_models_shapes_dropout_and_serialisation():
    config = BertConfig.from_dict(SMALL_CONFIG)
    inputs = make_inputs(seed=5)
    tagger = BertTokenClassifier(config, num_labels=7)
    logits = tagger(inputs)["logits"]
    assert logits.shape == (BATCH, SEQ, 7) and logits.dtype == tf.float32
    # Dropout is active only in training.
    assert max_diff(tagger(inputs, training=False)["logits"], logits) == 0.0
    assert max_diff(tagger(inputs, training=True)["logits"], logits) > 0.0
    # Missing mask/segments default to all-ones / zeros, as the original.
    encoder = BertEncoder(config)
    full = encoder({"input_ids": inputs["input_ids"],
                    "input_mask": np.ones_like(inputs["input_mask"]),
                    "segment_ids": np.zeros_like(inputs["segment_ids"])})
    bare = encoder({"input_ids": inputs["input_ids"]})
    assert max_diff(full["pooled_output"], bare["pooled_output"]) == 0.0
    # get_config / from_config rebuild the same architecture.
    for model in (encoder, tagger, BertClassifier(config, 2), BertPretrainer(config),
                  BertSpanLabeler(config)):
        clone = type(model).from_config(model.get_config())
        assert [tuple(w.shape) for w in clone.weights] == [tuple(w.shape) for w in model.weights]
    # Initialisation: truncated normal with initializer_range (no value beyond 2 stddev).
    table = encoder.word_embeddings.numpy()
    assert np.abs(table).max() <= 2 * config.initializer_range + 1e-7
    assert 0.5 * config.initializer_range < table.std() < config.initializer_range


def test_config_round_trip_with_reference(refbert, tmp_path):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(SMALL_CONFIG, extra_key={"a": 1})))
    config = BertConfig.from_json_file(str(path))
    assert config.extra == {"extra_key": {"a": 1}}
    written = tmp_path / "written.json"
    config.to_json_file(str(written))
    reference = refbert.modeling.BertConfig.from_json_file(str(written))
    assert reference.to_dict() == json.loads(written.read_text())
    assert json.loads(written.read_text()) == dict(SMALL_CONFIG, extra_key={"a": 1})
    # The original's defaults.
    default = BertConfig(vocab_size=10).to_dict()
    original = refbert.modeling.BertConfig(vocab_size=10).to_dict()
    assert default == original


@pytest.mark.parametrize("key,value,message", [
    ("hidden_size", -3, "hidden_size must be a positive integer"),
    ("hidden_act", "gelux", "hidden_act must be one of"),
    ("hidden_dropout_prob", 1.5, "hidden_dropout_prob must be a number in [0, 1)"),
    ("num_attention_heads", 5, "not a multiple of num_attention_heads"),
    ("vocab_size", "big", "vocab_size must be a positive integer"),
])
def test_config_rejects_invalid_values(tmp_path, key, value, message):
    path = tmp_path / "bert_config.json"
    path.write_text(json.dumps(dict(SMALL_CONFIG, **{key: value})))
    with pytest.raises(InputError) as error:
        BertConfig.from_json_file(str(path))
    assert str(path) in str(error.value) and message in str(error.value)


def test_config_file_errors(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"vocab_size": 10,\n  oops}')
    with pytest.raises(InputError, match=r"broken\.json:2: not valid JSON"):
        BertConfig.from_json_file(str(broken))
    with pytest.raises(InputError, match="config file not found"):
        BertConfig.from_json_file(str(tmp_path / "missing.json"))
    missing_vocab = tmp_path / "novocab.json"
    missing_vocab.write_text("{}")
    with pytest.raises(InputError, match="missing required key 'vocab_size'"):
        BertConfig.from_json_file(str(missing_vocab))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_dropout_rate_scale_gradient_and_fresh_masks(dtype):
    """bert_tf's Dropout against the definition of inverted dropout (and keras.layers.Dropout's
    interface): drop fraction = rate, kept elements scaled by 1 / (1 - rate), the gradient is
    the same mask and scale, each call draws a new mask, no-op outside training."""
    from bert_tf.model.layers import Dropout

    layer = Dropout(0.1, seed=7, dtype=keras.DTypePolicy(dtype))
    x = tf.ones([257, 1001], dtype)  # odd size: the 16-bit draws are cut to fit
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True)
        loss = tf.reduce_sum(tf.cast(y, tf.float32) * 3.0)
    grad = tape.gradient(loss, x)
    y = np.asarray(tf.cast(y, tf.float32))
    dropped = y == 0
    assert abs(dropped.mean() - 0.1) < 0.003  # 257,257 draws: 5 standard deviations
    # The drop probability is 6554 / 2^16 (16-bit draws), 6e-6 above the rate; the scale keeps
    # the expectation.
    rtol = 1e-2 if dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(y[~dropped], 1 / 0.9, rtol=rtol)
    np.testing.assert_allclose(np.asarray(tf.cast(grad, tf.float32)), 3.0 * y, rtol=rtol)
    again = np.asarray(tf.cast(layer(x, training=True), tf.float32)) == 0
    assert 0.05 < (again != dropped).mean() < 0.3  # a fresh, independent mask (expected 0.18)
    assert np.array_equal(np.asarray(layer(x, training=False)), np.asarray(x))
    compiled = tf.function(lambda t: layer(t, training=True), jit_compile=True)
    assert abs(float(np.mean(np.asarray(tf.cast(compiled(x), tf.float32)) == 0)) - 0.1) < 0.003


def test_dense_with_transposed_kernel_gradient_matches_autodiff():
    """A float32 intermediate-shaped Dense (units = 4 x input) in training multiplies its input
    gradient by a transposed copy of the kernel: the same values and gradients as the plain
    matmul + bias + GELU differentiated by TensorFlow."""
    from bert_tf.model import cpu_kernels, layers

    assert cpu_kernels.transposes_kernel_for_gradient(32, 128)  # this layer takes that path
    assert not cpu_kernels.transposes_kernel_for_gradient(32, 64)
    rng = np.random.RandomState(1)
    dense = layers.Dense(128, 32, "gelu")
    dense.build(None)
    dense.bias.assign(rng.randn(128).astype(np.float32))
    x = tf.constant(rng.randn(24, 32).astype(np.float32))
    upstream = tf.constant(rng.randn(24, 128).astype(np.float32))

    def value_and_grads(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn()
            loss = tf.reduce_sum(y * upstream)
        return [y] + tape.gradient(loss, [x, dense.kernel, dense.bias])

    ours = value_and_grads(lambda: dense(x, training=True))
    plain = value_and_grads(
        lambda: tf.nn.gelu(x @ dense.kernel + dense.bias, approximate=True))
    for a, b in zip(ours, plain):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
    assert float(tf.reduce_max(tf.abs(ours[1]))) > 0.1  # the input gradient is not trivially 0


@pytest.mark.parametrize("name, approximate", [("gelu", True), ("gelu_exact", False)])
def test_training_gelu_kernels_match_autodiff(name, approximate):
    """The training variants of both GELUs (one XLA kernel each way, hand-written derivative)
    give tf.nn.gelu's values and its automatic gradient."""
    from bert_tf.model import activations

    rng = np.random.RandomState(2)
    x = tf.constant((rng.randn(64, 96) * 3).astype(np.float32))
    upstream = tf.constant(rng.randn(64, 96).astype(np.float32))

    def value_and_grad(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
            loss = tf.reduce_sum(y * upstream)
        return np.asarray(y), np.asarray(tape.gradient(loss, x))

    fused = activations.get_activation(name, training=True)
    assert fused is not activations.get_activation(name)  # the training path is the fused kernel
    ours = value_and_grad(fused)
    plain = value_and_grad(lambda t: tf.nn.gelu(t, approximate=approximate))
    for a, b in zip(ours, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_fused_layer_norm_matches_keras_values_and_gradients():
    """LayerNorm(x, residual) (one XLA pass each way, hand-written gradient) against Keras'
    LayerNormalization of x + residual with automatic differentiation."""
    from bert_tf.model.layers import LAYER_NORM_EPSILON, LayerNorm

    rng = np.random.RandomState(0)
    x, residual = (tf.constant(rng.randn(37, 48).astype(np.float32) * 3 + 1) for _ in range(2))
    fused = LayerNorm("fused")
    reference = keras.layers.LayerNormalization(epsilon=LAYER_NORM_EPSILON)
    fused.build((None, 48))
    fused.gamma.assign(rng.randn(48).astype(np.float32))
    fused.beta.assign(rng.randn(48).astype(np.float32))
    reference.build((None, 48))
    reference.set_weights(fused.get_weights())
    upstream = tf.constant(rng.randn(37, 48).astype(np.float32))

    def value_and_grads(fn, layer):
        with tf.GradientTape() as tape:
            tape.watch([x, residual])
            y = fn()
            loss = tf.reduce_sum(y * upstream)
        return [y] + tape.gradient(loss, [x, residual, layer.gamma, layer.beta])

    ours = value_and_grads(lambda: fused(x, residual), fused)
    theirs = value_and_grads(lambda: reference(x + residual), reference)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    assert float(tf.reduce_max(tf.abs(ours[1]))) > 0.1  # the gradients are not trivially 0

    half = LayerNorm("half", dtype=keras.DTypePolicy("mixed_bfloat16"))
    half.build((None, 48))
    half.set_weights(fused.get_weights())
    y = half(tf.cast(x, tf.bfloat16), tf.cast(residual, tf.bfloat16))
    assert y.dtype == tf.bfloat16 and half.gamma.dtype == "float32"
    np.testing.assert_allclose(np.asarray(tf.cast(y, tf.float32)), np.asarray(theirs[0]),
                               rtol=0.05, atol=0.05)


def test_cpu_kernels_switch_gives_the_same_outputs_and_gradients():
    """The CPU kernels switch (bert_tf.model.cpu_kernels.set_cpu_kernels) on and off: the same
    outputs at inference, and in training (dropout on, the same seeds) the same loss and
    gradients, up to float rounding. On, the training path uses the fused kernels; off, plain
    TensorFlow ops. The loss has the pretraining's masked-LM term, whose pick of the true
    token's log-prob is fused too, and a dense one through every log-prob."""
    from bert_tf.model import activations, cpu_kernels
    from bert_tf.tasks.pretraining.task import masked_lm_example_loss

    # intermediate_size = 4 x hidden: the Dense with the transposed-kernel gradient is used too.
    config = BertConfig.from_dict(dict(SMALL_CONFIG, intermediate_size=128))
    inputs = make_inputs(seed=3)
    model = BertPretrainer(config)
    model(inputs)
    initial = [v.numpy() for v in model.variables]  # weights and dropout seed states
    upstream = np.random.RandomState(4).randn(BATCH, PREDICTIONS, config.vocab_size)
    masked_lm_ids = np.random.RandomState(5).randint(0, config.vocab_size, (BATCH, PREDICTIONS))

    def run(mode):
        cpu_kernels.set_cpu_kernels(mode)
        for variable, value in zip(model.variables, initial):
            variable.assign(value)
        served = model(inputs, training=False)["masked_lm_log_probs"]
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = (tf.reduce_sum(out["masked_lm_log_probs"] * upstream)
                    + tf.reduce_sum(masked_lm_example_loss(out["masked_lm_log_probs"],
                                                           masked_lm_ids))
                    + tf.reduce_sum(out["next_sentence_log_probs"]))
        grads = [tf.convert_to_tensor(g)  # embedding gradients are IndexedSlices
                 for g in tape.gradient(loss, model.trainable_variables)]
        activation = activations.get_activation("gelu", training=True)
        return [served, loss] + grads, activation

    try:
        on, on_activation = run("on")
        off, off_activation = run("off")
    finally:
        cpu_kernels.set_cpu_kernels("auto")
    assert on_activation is cpu_kernels.gelu_fused and off_activation is not cpu_kernels.gelu_fused
    assert len(on) == len(model.trainable_variables) + 2
    for a, b in zip(on, off):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="not one of"):
        cpu_kernels.set_cpu_kernels("gpu")

"""int8 serving (bert_tf.model.quantization, export --quantization=int8) against float32.

Oracles: numpy's float64 product for one quantized dense layer whose inputs and kernel are
already on their integer grids (exact on every x86 CPU, VNNI or not); numpy's float32 matmul
for one quantized dense layer (the error bound that int8 weights and inputs allow); and, end
to end, the float32 SavedModel of the same weights on real
GLUE dev text: the all-MiniLM-L6-v2 encoder with a linear head fitted to 512 SST-2 training
sentences (logistic regression on the pooled outputs, scikit-learn), so that its decisions
mean something (64% on SST-2 dev: the untrained pooler of a sentence-embedding model; the
probe's weights make it sensitive, which is the point). The int8 export's probabilities stay
within 0.2 of float32's (measured: at most 0.16, 0.03 on average), its argmax is the same
wherever float32's two probabilities are more than 0.25 apart (measured: the flips are within
0.19), and its accuracy on the sample is within 2 points of float32's (measured: +1.2). The
accuracy of int8 after fine-tuning, on the whole MRPC and SST-2 dev sets, is measured by
bench/serving/int8_accuracy.py (docs/export.md). Bad flag values are one error line each."""
import os

import numpy as np
import pytest
import tensorflow as tf

from bert_tf.model import quantization

# A TensorFlow build without the op (not x86, or without oneDNN) cannot run int8; the refusal
# of an unknown quantization is tested on every build.
needs_quantized_matmul = pytest.mark.skipif(
    not quantization.available(), reason="this TensorFlow has no oneDNN _QuantizedMatMul")


@needs_quantized_matmul
def test_a_quantized_dense_layer_is_the_float_one_within_int8_error():
    import keras

    from bert_tf.model.layers import Dense

    keras.utils.set_random_seed(0)  # the kernels' initialisation
    rng = np.random.RandomState(0)
    x = rng.normal(0, 1, (37, 384)).astype(np.float32)
    for activation in (None, "gelu", "gelu_exact", "tanh"):
        layer = Dense(1536, 384, activation)
        layer.build()
        layer.bias.assign(rng.normal(0, 0.1, 1536).astype(np.float32))
        expected = layer(x).numpy()
        kernel = layer.kernel.numpy()
        layer.quantize("int8")
        assert layer.kernel_int8.dtype == "int8" and not hasattr(layer, "kernel")
        np.testing.assert_allclose(layer.kernel_int8.numpy() * layer.kernel_scale.numpy(),
                                   kernel, atol=float(np.abs(kernel).max()) / 128 + 1e-7)
        got = tf.function(lambda x: layer(x), autograph=False)(x).numpy()  # in a graph, as served
        eager = layer(x).numpy()
        # uint8 inputs over [min, max] and weights in [-64, 64] steps: 1.0-2.4% of the
        # output's spread (measured over 25 seeds; the most after tanh).
        spread = float(np.abs(expected).max())
        assert np.abs(got - expected).max() < 0.03 * spread, activation
        np.testing.assert_allclose(eager, got, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="already quantized"):
        layer.quantize("int8")
    # The feed-forward output's input is a GELU's output, in [-0.17, large): uint8 over its
    # [min, max] spends every level on it (measured over 25 seeds: 1.1-1.4% of the spread),
    # where a symmetric int8 input (max |x| / 127) spends half on negatives (1.5-2.0%; here
    # numpy's product of that input and the same int8 kernel).
    x = tf.nn.gelu(rng.normal(0, 2, (37, 1536)).astype(np.float32), approximate=False)
    layer = Dense(384, 1536)
    layer.build()
    expected = layer(x).numpy()
    layer.quantize("int8")
    got = tf.function(lambda x: layer(x), autograph=False)(x).numpy()
    assert np.abs(got - expected).max() < 0.016 * float(np.abs(expected).max())
    step = float(np.abs(x).max()) / 127  # the symmetric input, with the same int8 kernel
    symmetric = (np.round(x.numpy() / step) * step) @ (
        layer.kernel_int8.numpy() * layer.kernel_scale.numpy().astype(np.float64))
    assert np.abs(got - expected).max() < np.abs(symmetric + layer.bias.numpy() - expected).max()
    other = Dense(4, 4)
    other.build()
    with pytest.raises(NotImplementedError, match="int8 only"):
        other.quantize("int4")


@needs_quantized_matmul
def test_the_int8_product_is_exact_on_every_cpu():
    """Inputs already on the uint8 grid (integers 0..255, 0 and 255 present) and a kernel on
    its int8 grid (integer multiples of each unit's step, the largest 64 steps): nothing is
    rounded, so the layer's output is numpy's float64 product, to float32 rounding. The worst
    case included: rows of 255 against columns of +-64 steps, which a kernel of [-127, 127]
    steps saturates on a CPU without VNNI (int16 pair sums; see bert_tf.model.quantization)."""
    from bert_tf.model.layers import Dense

    levels = quantization.KERNEL_LEVELS
    assert 2 * 255 * levels <= 2 ** 15 - 1
    rng = np.random.RandomState(0)
    x = rng.randint(0, 256, (37, 384)).astype(np.float32)
    x[0, :2] = 0, 255
    x[1:5] = 255
    steps = rng.randint(-levels, levels + 1, (384, 96))
    steps[0] = levels * np.where(np.arange(96) % 2, -1, 1)  # every unit's largest |step|
    steps[:, :4] = np.array([1, -1, 1, -1]) * levels
    scale = rng.uniform(1e-3, 1e-2, 96)
    kernel = (steps * scale).astype(np.float32)
    layer = Dense(96, 384)
    layer.build()
    layer.kernel.assign(kernel)
    layer.bias.assign(rng.normal(0, 0.1, 96).astype(np.float32))
    expected = x.astype(np.float64) @ kernel.astype(np.float64) + layer.bias.numpy()
    layer.quantize("int8")
    np.testing.assert_array_equal(layer.kernel_int8.numpy(), steps)
    got = tf.function(lambda x: layer(x), autograph=False)(x).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())


@needs_quantized_matmul
def test_each_output_unit_has_its_own_scale():
    """A kernel whose columns differ in size by up to 1000x (column j times
    10^(j % 4)): each unit's scale is max |its column| / 64, so every column, the small ones
    included, comes back within half a step of its own scale and every output unit within
    int8 error of its own spread (one scale for the whole tensor rounds the small columns to
    0 or +-1 steps). For the Dense layer and the attention's QKV projection."""
    from bert_tf.model.layers import BertSelfAttention, Dense

    rng = np.random.RandomState(0)
    column_sizes = 10.0 ** (np.arange(48) % 4)
    for layer, name in ((Dense(48, 96), "kernel"),
                        (BertSelfAttention(16, 2, dropout_rate=0.0), "qkv_kernel")):
        layer.build()
        shape = getattr(layer, name).shape
        kernel = (rng.normal(0, 0.02, shape) * column_sizes[:shape[1]]).astype(np.float32)
        getattr(layer, name).assign(kernel)
        column_max = np.abs(kernel).max(axis=0)
        x = rng.normal(0, 1, (37, shape[0])).astype(np.float32)
        expected = x @ kernel
        layer.quantize("int8")
        np.testing.assert_allclose(layer.kernel_scale.numpy(), column_max / 64, rtol=1e-6)
        error = np.abs(layer.kernel_int8.numpy() * layer.kernel_scale.numpy() - kernel)
        assert (error.max(axis=0) <= column_max / 128 * (1 + 1e-5)).all(), name
        if isinstance(layer, Dense):
            got = tf.function(lambda x: layer(x), autograph=False)(x).numpy()
        else:
            got = tf.function(lambda x: layer._project(x), autograph=False)(x).numpy()
        # uint8 inputs over [min, max] and weights in [-64, 64] steps: 1-3% of each unit's
        # spread (measured: median 1.1-1.5%, at most 3.0%).
        unit_error = np.abs(got - expected).max(axis=0) / np.abs(expected).max(axis=0)
        assert unit_error.max() < 0.04, (name, unit_error.max(), unit_error.argmax())


@pytest.fixture(scope="module")
def exports(tmp_path_factory, shared_data):
    """MiniLM-L6 with a fitted linear head, exported as float32 and as int8; GLUE dev text."""
    import keras

    from bert_tf import api
    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.serving import export
    from bert_tf.tasks.classification import get_processor
    from bert_tf.tasks.classification.task import ClassificationConfig, ClassificationTask
    from conftest import import_bench, minilm_directory, require_module

    minilm = minilm_directory()
    linear_model = require_module("sklearn.linear_model", "the probe fitted to SST-2")
    write_init_dir = import_bench("bench.common").write_init_dir

    root = tmp_path_factory.mktemp("int8")
    init = write_init_dir(str(minilm), str(root / "init"))
    config, vocab_file, _ = hf_directory_files(init)
    task = ClassificationTask(ClassificationConfig(bert_config=config, max_seq_length=128,
                                                   labels=["negative", "positive"]))
    keras.utils.set_random_seed(0)
    model = task.build_model()
    task.initialize(model, init, log=lambda message: None)
    sst = get_processor("SST-2")
    train = sst.get_train_examples(shared_data / "glue_data" / "SST-2")[:512]
    tokenizer = api.load_tokenizer(vocab_file)
    inputs = api.encode(tokenizer, [e.text_a for e in train], max_seq_length=64)
    pooled = np.concatenate([model({k: v[i:i + 64] for k, v in inputs.items()},
                                   training=False)["pooled_output"].numpy()
                             for i in range(0, len(train), 64)])
    probe = linear_model.LogisticRegression(C=10.0, max_iter=2000).fit(
        pooled, [int(e.label) for e in train])
    head = model.classifier.projection
    head.output_weights.assign(np.stack([-probe.coef_[0], probe.coef_[0]]) / 2)
    head.output_bias.assign(np.array([-probe.intercept_[0], probe.intercept_[0]]) / 2)
    paths = {q: export.save(task, model, str(root / q), vocab_file, True,
                            log=lambda message: None, quantization=q)
             for q in ("none", "int8")}
    dev = sst.get_dev_examples(shared_data / "glue_data" / "SST-2")[:256]
    mrpc = get_processor("MRPC").get_dev_examples(
        shared_data / "glue_data" / "MRPC")[:96]
    return {"paths": paths, "sst": dev, "mrpc": mrpc}


def _serve(path, texts, pairs=False):
    signatures = tf.saved_model.load(path).signatures
    out = []
    for i in range(0, len(texts), 32):
        batch = texts[i:i + 32]
        if pairs:
            served = signatures["serve_text_pair"](text_a=tf.constant([a for a, _ in batch]),
                                                   text_b=tf.constant([b for _, b in batch]))
        else:
            served = signatures["serve_text"](text=tf.constant(batch))
        out.append(served["probabilities"].numpy())
    return np.concatenate(out)


@needs_quantized_matmul
def test_the_int8_export_decides_as_the_float32_one(exports):
    sst, mrpc = exports["sst"], exports["mrpc"]
    for texts, pairs, labels in (([e.text_a for e in sst], False, [int(e.label) for e in sst]),
                                 ([(e.text_a, e.text_b) for e in mrpc], True, None)):
        fp32 = _serve(exports["paths"]["none"], texts, pairs)
        int8 = _serve(exports["paths"]["int8"], texts, pairs)
        assert np.abs(int8 - fp32).max() < 0.2
        clear = np.abs(fp32[:, 1] - fp32[:, 0]) > 0.25
        assert clear.mean() > 0.3
        np.testing.assert_array_equal(int8.argmax(1)[clear], fp32.argmax(1)[clear])
        if labels is not None:
            accuracy = {name: np.mean(p.argmax(1) == labels) for name, p in
                        (("fp32", fp32), ("int8", int8))}
            assert accuracy["fp32"] > 0.6, accuracy  # the probe learned something
            assert abs(accuracy["int8"] - accuracy["fp32"]) <= 0.02, accuracy


@needs_quantized_matmul
def test_the_int8_export_says_so_in_its_marker(exports):
    import json
    for quantization_mode, path in exports["paths"].items():
        marker = json.loads(open(os.path.join(path, "assets", "bert_tf_export.json")).read())
        assert marker["quantization"] == quantization_mode
    # int8 weights: the transformer layers' dense kernels are int8 variables.
    variables = tf.saved_model.load(exports["paths"]["int8"]).model_variables
    # QKV, attention output, intermediate and feed-forward output of each of the 6 layers.
    assert sum(v.dtype == tf.int8 for v in variables) == 6 * 4


def test_an_unknown_quantization_is_refused(tmp_path):
    from bert_tf.errors import InputError
    from bert_tf.model.config import BertConfig
    from bert_tf.serving import export
    from bert_tf.tasks.encoder.task import EncoderConfig, EncoderTask

    config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=16)
    task = EncoderTask(EncoderConfig(bert_config=config))
    with pytest.raises(InputError, match="^quantization: must be one of none, int8, got 'int4'"):
        export.save(task, task.build_model(), str(tmp_path / "out"), quantization="int4")
    assert not (tmp_path / "out").exists()

"""Checkpoint loading and writing: the original's TF1 names (oracle: the reference release),
our TF2 checkpoints, and a real Hugging Face BERT directory (oracle: stored outputs of
`transformers`' PyTorch BertModel, made by tests/data/make_minilm_reference.py)."""
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf.training import optimization
from bert_tf.model.checkpoints import (hf_directory_files, is_original_checkpoint, load_checkpoint,
                                 write_tf1_checkpoint)
from bert_tf.model.config import BertConfig
from bert_tf.model.encoder import BertEncoder
from bert_tf.errors import InputError
from bert_tf.model.models import BertClassifier, BertPretrainer
from bert_tf.tasks.pretraining.task import load_original_training_state
from conftest import minilm_directory
from test_model import SMALL_CONFIG, build_reference, make_inputs, max_diff

MINILM_REFERENCE = pathlib.Path(__file__).parent / "minilm_reference.npz"


def test_tf1_checkpoint_with_adam_slots_and_global_step(refbert, tmp_path):
    inputs = make_inputs(seed=7)
    extra = [("bert/embeddings/word_embeddings/adam_m", [99, 32]),
             ("bert/embeddings/word_embeddings/adam_v", [99, 32]),
             ("bert/pooler/dense/kernel/adam_m", [32, 32]),
             ("global_step", []),
             ("some/other/variable", [3])]
    ref = build_reference(refbert, tmp_path / "model.ckpt", inputs, extra_variables=extra)
    config = BertConfig.from_dict(SMALL_CONFIG)

    # The directory form resolves to the latest checkpoint, as the original's tools do.
    pretrainer = BertPretrainer(config)
    report = load_checkpoint(pretrainer, tmp_path)
    assert report.format == "tf1" and report.new == []
    assert report.unused == ["some/other/variable"]
    assert report.skipped == 4
    assert max_diff(pretrainer(inputs)["sequence_output"], ref["sequence"]) < 1e-5

    # Pretraining checkpoint -> classifier: the encoder loads, the head is new, cls/* unused.
    classifier = BertClassifier(config, num_labels=2)
    report = load_checkpoint(classifier, tmp_path / "model.ckpt")
    assert report.new == ["output_weights", "output_bias"]
    assert "cls/predictions/output_bias" in report.unused
    assert "cls/seq_relationship/output_weights" in report.unused
    assert "bert/encoder/layer_2/attention/self/value/kernel" in report.loaded
    assert max_diff(classifier(inputs)["pooled_output"], ref["pooled"]) < 1e-5
    assert "2 new" in str(report)


def test_original_training_state_needs_moments_step_and_adamw(refbert, tmp_path):
    """Continuing an original run (the full check against the reference is in
    test_pretraining_run.py) refuses checkpoints without every Adam moment or global_step, and
    optimizers other than the original's AdamWeightDecay."""
    extra = [("bert/embeddings/word_embeddings/adam_m", [99, 32]), ("global_step", [])]
    build_reference(refbert, tmp_path / "partial" / "model.ckpt", make_inputs(),
                    extra_variables=extra)
    model = BertPretrainer(BertConfig.from_dict(SMALL_CONFIG))
    write_tf1_checkpoint(model, tmp_path / "weights" / "model.ckpt")  # weights only, no step
    cases = [("partial", "lamb", r"whose optimizer is AdamWeightDecay \(adamw\); it cannot "
                                 r"continue with Lamb"),
             ("partial", "adamw", r"has no Adam moment bert/embeddings/token_type_embeddings/"
                                  r"adam_m \(\d+ missing\)"),
             ("weights", "adamw", "has no global_step")]
    for directory, optimizer_type, message in cases:
        optimizer = optimization.create_optimizer(1e-3, 10, 1, optimizer_type)
        optimizer.build(model.trainable_variables)
        with pytest.raises(InputError, match=message):
            load_original_training_state(model, optimizer, str(tmp_path / directory / "model.ckpt"))
    assert is_original_checkpoint(str(tmp_path / "weights" / "model.ckpt"))


def test_shape_mismatch_names_the_variable(refbert, tmp_path):
    build_reference(refbert, tmp_path / "model.ckpt", make_inputs())
    other = BertEncoder(BertConfig.from_dict(dict(SMALL_CONFIG, intermediate_size=40)))
    with pytest.raises(InputError, match=r"bert/encoder/layer_0/intermediate/dense/kernel has "
                                         r"shape \[32, 37\] in the checkpoint but \[32, 40\]"):
        load_checkpoint(other, tmp_path / "model.ckpt")


def test_missing_checkpoint_errors(tmp_path):
    encoder = BertEncoder(BertConfig.from_dict(SMALL_CONFIG))
    with pytest.raises(InputError, match="no checkpoint found"):
        load_checkpoint(encoder, tmp_path / "nothing.ckpt")
    with pytest.raises(InputError, match="neither a checkpoint"):
        load_checkpoint(encoder, tmp_path)


def randomise(model, seed):
    rng = np.random.RandomState(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))


def test_written_tf1_checkpoint_restores_in_reference(refbert, tmp_path):
    """Our weights -> original naming -> the reference's modeling + heads give our outputs."""
    v1, modeling = refbert.v1, refbert.modeling
    config = BertConfig.from_dict(SMALL_CONFIG)
    ours = BertPretrainer(config)
    randomise(ours, seed=11)
    inputs = make_inputs(seed=12)
    expected = ours(inputs)
    write_tf1_checkpoint(ours, tmp_path / "out" / "model.ckpt", global_step=5)
    latest = tf.train.latest_checkpoint(str(tmp_path / "out"))
    assert latest == str(tmp_path / "out" / "model.ckpt")

    run_pretraining = refbert.import_reference("run_pretraining")
    bert_config = modeling.BertConfig.from_json_file(_write_config(config, tmp_path))
    with v1.Graph().as_default():
        model = modeling.BertModel(bert_config, is_training=False,
                                   input_ids=v1.constant(inputs["input_ids"]),
                                   input_mask=v1.constant(inputs["input_mask"]),
                                   token_type_ids=v1.constant(inputs["segment_ids"]))
        shape = inputs["masked_lm_positions"].shape
        _, _, mlm = run_pretraining.get_masked_lm_output(
            bert_config, model.get_sequence_output(), model.get_embedding_table(),
            v1.constant(inputs["masked_lm_positions"]), v1.zeros(shape, v1.int32), v1.ones(shape))
        _, _, nsp = run_pretraining.get_next_sentence_output(
            bert_config, model.get_pooled_output(), v1.zeros([shape[0]], v1.int32))
        with v1.Session() as session:
            v1.train.Saver().restore(session, latest)  # fails if any name/shape is missing
            ref = session.run(dict(sequence=model.get_sequence_output(),
                                   pooled=model.get_pooled_output(), mlm=mlm, nsp=nsp))
    assert dict(tf.train.list_variables(latest))["global_step"] == []
    assert max_diff(expected["sequence_output"], ref["sequence"]) < 1e-5
    assert max_diff(expected["pooled_output"], ref["pooled"]) < 1e-5
    assert max_diff(np.reshape(expected["masked_lm_log_probs"], ref["mlm"].shape),
                    ref["mlm"]) < 1e-5
    assert max_diff(expected["next_sentence_log_probs"], ref["nsp"]) < 1e-5


def _write_config(config, tmp_path):
    path = str(tmp_path / "bert_config.json")
    config.to_json_file(path)
    return path


def test_own_tf2_checkpoint_between_task_models(tmp_path):
    config = BertConfig.from_dict(SMALL_CONFIG)
    pretrainer = BertPretrainer(config)
    randomise(pretrainer, seed=21)
    optimizer = keras.optimizers.Adam()
    optimizer.build(pretrainer.trainable_variables)
    # A Keras optimizer tracks the variables too; their keys then name the optimizer's path.
    manager = tf.train.CheckpointManager(
        tf.train.Checkpoint(model=pretrainer, optimizer=optimizer), str(tmp_path), max_to_keep=1)
    manager.save()
    inputs = make_inputs(seed=22)

    same = BertPretrainer(config)
    report = load_checkpoint(same, tmp_path)
    assert report.format == "tf2" and report.new == [] and report.unused == []
    assert len(report.loaded) == len(same.weights) + 2 * config.num_hidden_layers * 2  # q,k,v
    expected = pretrainer(inputs)
    assert max_diff(same(inputs)["masked_lm_log_probs"], expected["masked_lm_log_probs"]) == 0.0

    classifier = BertClassifier(config, num_labels=3)
    report = load_checkpoint(classifier, tmp_path)
    assert report.new == ["output_weights", "output_bias"]
    assert "model/masked_lm/output_bias" in report.unused
    assert max_diff(classifier(inputs)["pooled_output"], expected["pooled_output"]) == 0.0


def test_hugging_face_directory_matches_transformers():
    model_dir = str(minilm_directory())
    config, vocab, do_lower_case = hf_directory_files(model_dir)
    assert config.hidden_act == "gelu_exact"  # HF "gelu" is the erf form
    assert (config.num_hidden_layers, config.hidden_size) == (6, 384)
    assert vocab.endswith("vocab.txt") and do_lower_case is True
    encoder = BertEncoder(config)
    report = load_checkpoint(encoder, model_dir)
    assert report.format == "hugging face" and report.new == [] and report.unused == []
    ref = np.load(MINILM_REFERENCE)
    out = encoder({"input_ids": ref["input_ids"], "input_mask": ref["input_mask"],
                   "segment_ids": ref["segment_ids"]})
    assert max_diff(out["sequence_output"], ref["sequence_output"]) < 1e-4
    assert max_diff(out["pooled_output"], ref["pooled_output"]) < 1e-4
    assert max_diff(out["encoder_outputs"][0], ref["layer_1_output"]) < 1e-4
    # The tanh GELU of the original would not match: the activation mapping matters.
    tanh = BertEncoder(config.replace(hidden_act="gelu"))
    load_checkpoint(tanh, model_dir)
    tanh_out = tanh({"input_ids": ref["input_ids"], "input_mask": ref["input_mask"],
                     "segment_ids": ref["segment_ids"]})
    assert max_diff(tanh_out["sequence_output"], ref["sequence_output"]) > 1e-4


def test_hugging_face_shape_mismatch_and_damage_name_them(tmp_path):
    """The weights are read one at a time (no second copy of the model): every shape is still
    checked before any is read, in the original's [in, out] orientation of the transposed
    Hugging Face kernels, and a damaged file is an error naming it."""
    model_dir = minilm_directory()
    config, _, _ = hf_directory_files(model_dir)
    # Hugging Face stores intermediate.dense.weight as [intermediate, hidden] (oracle: the
    # file's own shapes, read by safetensors itself).
    from safetensors import safe_open
    with safe_open(str(model_dir / "model.safetensors"), framework="numpy") as f:
        hf_shape = f.get_slice("encoder.layer.0.intermediate.dense.weight").get_shape()
    assert hf_shape == [config.intermediate_size, config.hidden_size]
    other = BertEncoder(config.replace(intermediate_size=config.intermediate_size // 2))
    before = [v.numpy() for v in other.weights]
    with pytest.raises(InputError, match=(
            rf"bert/encoder/layer_0/intermediate/dense/kernel has shape "
            rf"\[{config.hidden_size}, {config.intermediate_size}\] in the checkpoint but "
            rf"\[{config.hidden_size}, {config.intermediate_size // 2}\] in the model")):
        load_checkpoint(other, model_dir)
    # Nothing was assigned before the mismatch was found.
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, other.weights))

    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "config.json").write_bytes((model_dir / "config.json").read_bytes())
    data = (model_dir / "model.safetensors").read_bytes()
    (damaged / "model.safetensors").write_bytes(data[:len(data) // 2])
    with pytest.raises(InputError, match=rf"{damaged / 'model.safetensors'}: cannot read "
                                         rf"safetensors file"):
        load_checkpoint(BertEncoder(config), damaged)


def _edited_hf_directory(tmp_path, **changes):
    """A copy of the real MiniLM directory whose config.json says `changes` (the weights as
    they are)."""
    import json
    import shutil
    edited = tmp_path / "edited"
    shutil.copytree(minilm_directory(), edited)
    config = json.loads((edited / "config.json").read_text())
    config.update(changes)
    (edited / "config.json").write_text(json.dumps(config))
    return edited


@pytest.mark.parametrize("layers", [4, 8])
def test_a_config_that_does_not_describe_the_hugging_face_weights_is_refused(tmp_path, layers):
    """config.json edited from 6 to 4 (or 8) layers keeps every shape: the model would run and
    be silently wrong. The unmodified directory loads with nothing unused (the oracle: the
    file's own 6 layers); the edited one is an error naming the directory, its config file and
    both counts, whichever task's model reads it."""
    from bert_tf import api
    assert load_checkpoint(BertEncoder(hf_directory_files(minilm_directory())[0]),
                           minilm_directory()).unused == []
    edited = _edited_hf_directory(tmp_path, num_hidden_layers=layers)
    message = (rf"^{edited}: holds 6 encoder layers but the model's config "
               rf"\({edited}/config.json\) describes {layers} \(num_hidden_layers\): the config "
               rf"does not describe these weights")
    for task in ("encoder", "classifier", "pretraining"):
        model = api.build_model(task, api.model_files(edited).config, num_labels=2)
        with pytest.raises(InputError, match=message):
            load_checkpoint(model, edited)


@pytest.mark.parametrize("checkpoint_format", ["tf1", "tf2"])
def test_a_config_with_other_layers_than_the_checkpoint_is_refused(tmp_path, checkpoint_format):
    """The same for our TF2 checkpoints and the original's TF1 names: a 3-layer checkpoint
    read with a config of 2 or 4 layers. The checkpoint's own config loads it whole."""
    config = BertConfig.from_dict(SMALL_CONFIG)
    pretrainer = BertPretrainer(config)
    randomise(pretrainer, seed=5)
    if checkpoint_format == "tf1":
        path = write_tf1_checkpoint(pretrainer, str(tmp_path / "model.ckpt"))
    else:
        path = tf.train.Checkpoint(model=pretrainer).save(str(tmp_path / "model.ckpt"))
    report = load_checkpoint(BertPretrainer(config), path)
    assert report.new == [] and report.unused == [] and report.unused_layers == []
    for layers in (2, 4):
        for model in (BertEncoder(config.replace(num_hidden_layers=layers)),
                      BertClassifier(config.replace(num_hidden_layers=layers), num_labels=2)):
            with pytest.raises(InputError, match=rf"^{path}: holds 3 encoder layers but the "
                                                 rf"model's config describes {layers} "
                                                 rf"\(num_hidden_layers\)"):
                load_checkpoint(model, path)


def test_what_a_model_leaves_unused_is_said_with_its_reason(tmp_path):
    """A classifier read from a pretraining checkpoint leaves the pretraining heads unused
    (allowed, and said as such); a classifier's head is unused by an encoder (another task's
    head)."""
    config = BertConfig.from_dict(SMALL_CONFIG)
    path = write_tf1_checkpoint(BertPretrainer(config), str(tmp_path / "pre" / "model.ckpt"))
    report = load_checkpoint(BertClassifier(config, num_labels=2), path)
    lines = str(report).splitlines()
    assert any(line.startswith("  unused, the masked-LM head (pretraining's; this model has "
                               "none): cls/predictions/") for line in lines), lines
    assert any(line.startswith("  unused, the next-sentence head (pretraining's; this model has "
                               "none): cls/seq_relationship/") for line in lines), lines
    path = write_tf1_checkpoint(BertClassifier(config, num_labels=2),
                                str(tmp_path / "cls" / "model.ckpt"))
    lines = str(load_checkpoint(BertEncoder(config), path)).splitlines()
    assert ("  unused, another task's head, or not a variable of this model: output_bias, "
            "output_weights") in lines, lines


def test_checkpoint_step_is_the_saved_step(tmp_path):
    """The step eval reports for a checkpoint given as init_checkpoint: the original's
    global_step, our optimizer's iterations (oracle: what was saved), 0 for weights alone."""
    from bert_tf.model.checkpoints import checkpoint_step
    config = BertConfig.from_dict(SMALL_CONFIG)
    model = BertPretrainer(config)
    tf1 = write_tf1_checkpoint(model, str(tmp_path / "tf1" / "model.ckpt-7"), global_step=7)
    assert checkpoint_step(load_checkpoint(BertPretrainer(config), tf1)) == 7
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    optimizer.iterations.assign(42)
    tf2 = tf.train.Checkpoint(model=model, optimizer=optimizer).save(str(tmp_path / "tf2" / "c"))
    assert checkpoint_step(load_checkpoint(BertPretrainer(config), tf2)) == 42
    weights = write_tf1_checkpoint(model, str(tmp_path / "weights" / "model.ckpt"))
    assert checkpoint_step(load_checkpoint(BertPretrainer(config), weights)) == 0
    assert checkpoint_step(load_checkpoint(BertEncoder(hf_directory_files(
        minilm_directory())[0]), minilm_directory())) == 0


def test_other_state_a_checkpoint_carries_is_unused_not_refused(tmp_path):
    """A checkpoint with state the loader has no name for (a moving average of a weight, a
    fork's optimizer slot) loads, that state reported unused: only another layer count is a
    config that does not describe the weights. Its folder's config, when it does not say the
    other count, is not named as the one that does (the model was built from another)."""
    from bert_tf.model.checkpoints import original_weights, write_named_checkpoint
    config = BertConfig.from_dict(SMALL_CONFIG)
    weights = original_weights(BertPretrainer(config))
    extra = "bert/embeddings/word_embeddings/ExponentialMovingAverage"
    weights[extra] = weights["bert/embeddings/word_embeddings"]
    path = write_named_checkpoint(weights, str(tmp_path / "model.ckpt"))
    report = load_checkpoint(BertPretrainer(config), path)
    assert report.unused == [extra] and report.unused_layers == [] and report.new == []
    _write_config(config, tmp_path)  # the folder's config: 3 layers, the checkpoint's own
    with pytest.raises(InputError, match=rf"^{path}: holds 3 encoder layers but the model's "
                                         rf"config describes 2 \(num_hidden_layers\)"):
        load_checkpoint(BertEncoder(config.replace(num_hidden_layers=2)), path)

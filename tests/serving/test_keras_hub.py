"""export_savedmodel --format=keras_hub and keras-hub presets as --init_checkpoint, against the real
keras-hub (the test extra's keras-hub 0.32, in this process; Keras' global dtype policy checked
unchanged).

Tiny models with random weights (every LayerNorm's gamma and beta, every bias non-trivial) in
Google's released layout (a TF1 checkpoint in the original's names, bert_config.json, vocab.txt):
each exported preset loads with keras_hub.models.BertBackbone / BertTextClassifier / BertMaskedLM
/ BertTokenizer `.from_preset` with no warning; keras-hub's own `save_to_preset` of what it loaded
writes the same weight files (every HDF5 group and dataset, the same values: nothing missing,
nothing unexpected) and the same JSON configs; on real GLUE dev text (MRPC pairs, SST-2
sentences) keras-hub's preprocessors give our ids and packing, and its outputs equal ours within
1e-5 (the masked-LM head: keras-hub's own formula, exact GELU and epsilon 1e-5, on our weights);
ours -> keras-hub -> ours gives the identical weights, and a preset is a model directory (config,
vocabulary, casing) for every command. Bad input: one `error:` line, exit 2, nothing written.
"""
import json
import logging
import pathlib
import re
import shutil
import warnings

import numpy as np
import pytest

from conftest import assert_one_line_error, assert_refused, require_module, run_command_line

pytestmark = pytest.mark.slow

CONFIG = {"vocab_size": 30522, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 32, "hidden_act": "gelu",
          "max_position_embeddings": 64, "type_vocab_size": 2}
MAX_SEQ_LENGTH = 48  # some MRPC pairs are cut: keras-hub's round-robin against our truncation
LABELS = ["a", "b", "c"]


def randomize(model, seed):
    """Every weight of `model` random (biases, gammas and betas too: a swap shows)."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0.0, 0.2, variable.shape).astype("float32"))


def glue_texts(shared_data):
    """MRPC dev pairs and SST-2 dev sentences."""
    def rows(task, count):
        with open(shared_data / "glue_data" / task / "dev.tsv", encoding="utf-8") as f:
            return [line.rstrip("\n").split("\t") for line in f][1:count + 1]
    mrpc = rows("MRPC", 40)
    return [(r[3], r[4]) for r in mrpc], [r[0] for r in rows("SST-2", 200)]


@pytest.fixture(scope="module")
def kh(tmp_path_factory, uncased_vocab, shared_data):
    """Google-layout models (a pretrainer with both heads, a classifier) and their presets:
    the pretrainer's masked-LM through the command line, the classifier and the encoder (cased)
    through bert_tf.serving.formats; keras_hub imported (the global dtype policy restored and
    checked after)."""
    keras_hub = require_module("keras_hub", "the keras-hub peer of --format=keras_hub")
    import keras

    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertClassifier, BertPretrainer
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    policy = keras.config.dtype_policy().name
    root = tmp_path_factory.mktemp("keras_hub")
    config = BertConfig.from_dict(CONFIG)
    models = {}
    for name, model, seed in (("google", BertPretrainer(config), 1),
                              ("classifier_ckpt", BertClassifier(config, len(LABELS)), 2)):
        randomize(model, seed)
        (root / name).mkdir()
        write_tf1_checkpoint(model, root / name / "bert_model.ckpt")
        (root / name / "bert_config.json").write_text(json.dumps(CONFIG))
        shutil.copy(uncased_vocab, root / name / "vocab.txt")
        models[name] = model
    status, log = run_command_line("run.export_savedmodel", {
        "init_checkpoint": root / "google", "task": "pretraining", "format": "keras_hub",
        "max_seq_length": MAX_SEQ_LENGTH, "export_dir": root / "masked_lm"})
    assert status == 0, log[-3000:]
    for name, task_name, options, do_lower_case, model in (
            ("classifier", "classifier", {"labels": LABELS}, True, models["classifier_ckpt"]),
            ("encoder", "encoder", {}, False, models["google"].encoder)):
        task = registry.build(task_name, config, max_seq_length=MAX_SEQ_LENGTH, **options)
        formats.check_model("keras_hub", task_name, config, str(uncased_vocab))
        formats.save("keras_hub", task, model, root / name, str(uncased_vocab), do_lower_case,
                     log=lambda line: None)
    yield {"keras_hub": keras_hub, "root": root, "config": config, "log": log,
           "pretrainer": models["google"], "classifier": models["classifier_ckpt"],
           "texts": glue_texts(shared_data)}
    keras.config.set_dtype_policy(policy)


CLASSES = {"masked_lm": "BertMaskedLM", "classifier": "BertTextClassifier",
           "encoder": "BertBackbone"}


def load(kh, name, class_name=None, caplog=None):
    """keras_hub.models.<class>.from_preset of a preset, with no warning (Python's or a log
    record's) about it."""
    cls = getattr(kh["keras_hub"].models, class_name or CLASSES[name])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = cls.from_preset(str(kh["root"] / name))
    assert [str(w.message) for w in caught] == []
    if caplog is not None:
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    return loaded


def h5_contents(path):
    """{group or dataset path: None or the dataset's value} of a .weights.h5 file."""
    import h5py
    contents = {}
    with h5py.File(path, "r") as h5:
        h5.visititems(lambda name, obj: contents.__setitem__(
            name, obj[()] if isinstance(obj, h5py.Dataset) else None))
    return contents


def test_keras_hub_loads_each_preset_and_saves_the_same_files(kh, tmp_path, caplog):
    """Nothing missing or unexpected: keras-hub's own save of what it loaded has the
    same groups, datasets, values and configs as ours, and reads back as the same weights."""
    import keras

    from bert_tf.model.keras_hub_preset import PresetValues
    caplog.set_level(logging.WARNING)
    for name in CLASSES:
        loaded = load(kh, name, caplog=caplog)
        resaved = tmp_path / name
        loaded.save_to_preset(str(resaved))
        if name == "encoder":
            load(kh, name, "BertTokenizer").save_to_preset(str(resaved))
        ours = kh["root"] / name
        ours_files = sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*") if p.is_file())
        theirs = sorted(p.relative_to(resaved).as_posix() for p in resaved.rglob("*")
                        if p.is_file())
        assert ours_files == sorted(theirs + ["bert_tf_export.json", "bert_tf_model.json"]), name
        for weights in ("model.weights.h5", "task.weights.h5"):
            if not (resaved / weights).exists():
                continue
            mine, keras_hubs = h5_contents(ours / weights), h5_contents(resaved / weights)
            assert sorted(mine) == sorted(keras_hubs), (name, weights)
            for path, value in keras_hubs.items():
                if value is not None:
                    assert np.asarray(mine[path]).dtype == np.asarray(value).dtype, path
                    np.testing.assert_array_equal(mine[path], value, err_msg=path)
        for config in ("config.json", "tokenizer.json", "task.json", "preprocessor.json"):
            if (resaved / config).exists():
                assert (json.loads((ours / config).read_text())
                        == json.loads((resaved / config).read_text())), (name, config)
        metadata = json.loads((ours / "metadata.json").read_text())
        expected = json.loads((resaved / "metadata.json").read_text())
        del metadata["date_saved"], expected["date_saved"]
        assert metadata == expected, name
        assert (ours / "assets/tokenizer/vocabulary.txt").read_bytes() == (
            resaved / "assets/tokenizer/vocabulary.txt").read_bytes()
        # keras-hub's own preset reads back as ours (every weight of the layout).
        values = PresetValues(resaved)
        ours_values = PresetValues(ours)
        assert sorted(values) == sorted(ours_values) and all(":" not in n for n in values)
        for key in values:
            np.testing.assert_array_equal(values[key], ours_values[key], err_msg=key)
    assert keras.config.dtype_policy().name == "float32"


def our_inputs(tokenizer, pairs, singles):
    """Our packing of pairs (None without) and single texts."""
    from bert_tf.text.packing import pack_texts
    return (pairs and pack_texts(tokenizer, [a for a, _ in pairs], [b for _, b in pairs],
                                 max_seq_length=MAX_SEQ_LENGTH),
            pack_texts(tokenizer, singles, max_seq_length=MAX_SEQ_LENGTH))


def features_of(output):
    """A keras-hub preprocessor's features: its output, or (x,) without labels."""
    return output[0] if isinstance(output, tuple) else output


def keras_hub_inputs(features):
    return {"token_ids": features["input_ids"], "segment_ids": features["segment_ids"],
            "padding_mask": features["input_mask"]}


def test_outputs_and_ids_equal_ours_on_glue_dev_text(kh):
    """keras-hub's preprocessor packs MRPC pairs and SST-2 sentences to our ids; the
    backbone's, the classifier's and the masked-LM head's outputs equal ours within 1e-5."""
    import tensorflow as tf

    from bert_tf.text.fast_tokenization import FastTokenizer
    pairs, singles = kh["texts"]
    classifier = load(kh, "classifier")
    preprocessor = classifier.preprocessor
    ours_pairs, ours_singles = our_inputs(
        FastTokenizer(str(kh["root"] / "classifier" / "assets/tokenizer/vocabulary.txt")),
        pairs, singles)
    # Pairs as keras-hub's docs pass them, with labels: ((first, second), labels).
    theirs_pairs, _ = preprocessor((tf.constant([a for a, _ in pairs]),
                                    tf.constant([b for _, b in pairs])), tf.zeros([len(pairs)]))
    theirs_singles = features_of(preprocessor(tf.constant(singles)))
    for ours, theirs in ((ours_pairs, theirs_pairs), (ours_singles, theirs_singles)):
        for our_name, their_name in (("input_ids", "token_ids"), ("segment_ids", "segment_ids"),
                                     ("input_mask", "padding_mask")):
            np.testing.assert_array_equal(np.asarray(theirs[their_name]).astype(np.int32),
                                          ours[our_name], err_msg=their_name)
    assert (ours_pairs["input_mask"].sum(1) == MAX_SEQ_LENGTH).any()  # some pairs were cut
    model = kh["classifier"]
    for features in (ours_pairs, ours_singles):
        ours = model(features)
        real = features["input_mask"].astype(bool)
        backbone = classifier.backbone(keras_hub_inputs(features))
        np.testing.assert_allclose(np.asarray(backbone["sequence_output"])[real],
                                   np.asarray(ours["sequence_output"])[real], atol=1e-5)
        np.testing.assert_allclose(backbone["pooled_output"], ours["pooled_output"], atol=1e-5)
        np.testing.assert_allclose(classifier(keras_hub_inputs(features)), ours["logits"],
                                   atol=1e-5)
    # The cased tokenizer (the encoder's export): keras-hub's BertTokenizer gives our ids.
    texts = [text for pair in pairs for text in pair] + singles
    cased = load(kh, "encoder", "BertTokenizer")
    theirs = cased(tf.constant(texts))
    expected = FastTokenizer(str(kh["root"] / "google" / "vocab.txt"), do_lower_case=False)
    for text, ids, encoding in zip(texts, theirs, expected.encode_batch(texts)):
        assert np.asarray(ids).tolist() == encoding.ids.tolist(), text
    assert sum(any(c.isupper() for c in text) for text in texts) > 50  # the casing matters

    encoder = load(kh, "encoder")
    ours = kh["pretrainer"].encoder(ours_singles)
    theirs = encoder(keras_hub_inputs(ours_singles))
    real = ours_singles["input_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(theirs["sequence_output"])[real],
                               np.asarray(ours["sequence_output"])[real], atol=1e-5)

    # The masked-LM head: keras-hub's formula (gather, Dense + exact GELU, LayerNorm epsilon
    # 1e-5, the tied embedding and the output bias) on our sequence output and our weights.
    masked_lm = load(kh, "masked_lm")
    pretrainer = kh["pretrainer"]
    positions = np.tile(np.array([[1, 2]], np.int32), (len(singles), 1))
    assert ours_singles["input_mask"][:, 2].all()  # real tokens
    theirs = np.asarray(masked_lm(dict(keras_hub_inputs(ours_singles), mask_positions=positions)))
    ours = pretrainer(dict(ours_singles, masked_lm_positions=positions))
    states = np.take_along_axis(np.asarray(ours["sequence_output"]), positions[..., None], 1)
    head = pretrainer.masked_lm
    x = states @ head.transform.dense.kernel.numpy() + head.transform.dense.bias.numpy()
    x = np.asarray(tf.nn.gelu(x, approximate=False))
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x = ((x - mean) / np.sqrt(variance + 1e-5) * head.transform.layer_norm.gamma.numpy()
         + head.transform.layer_norm.beta.numpy())
    expected = x @ pretrainer.encoder.word_embeddings.numpy().T + head.output_bias.numpy()
    np.testing.assert_allclose(theirs, expected, atol=1e-5)
    # ... which is ours up to the head's GELU and epsilon: the same top token almost always.
    log_probs = theirs - np.log(np.exp(theirs - theirs.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - theirs.max(-1, keepdims=True)
    np.testing.assert_allclose(log_probs, ours["masked_lm_log_probs"], atol=2e-2)


def test_google_layout_converts_and_says_what_was_left_out(kh):
    """The command line from Google's layout (no config or vocabulary flags), with
    one line each on the next-sentence head and keras-hub's masked-LM head."""
    lines = kh["log"].splitlines()
    assert sum("keras-hub has no next-sentence head" in line for line in lines) == 1
    assert sum("keras-hub's BertMaskedLM head applies exact GELU" in line for line in lines) == 1
    assert json.loads((kh["root"] / "masked_lm" / "task.json").read_text())[
        "registered_name"] == "keras_hub>BertMaskedLM"
    from bert_tf import api
    record = api.resolve_model_files(str(kh["root"] / "masked_lm")).task_record("pretraining")
    assert record["objective"] == "mlm"  # what a pretraining run from it builds: no NSP head


def test_round_trip_gives_identical_weights(kh):
    """Ours -> keras-hub -> ours: every weight identical, nothing new or unused."""
    from bert_tf.model.checkpoints import load_checkpoint, original_weights
    from bert_tf.model.encoder import BertEncoder
    from bert_tf.model.models import BertClassifier, BertPretrainer
    config = kh["config"]
    pretrainer = BertPretrainer(config, next_sentence=False)
    for name, model, source in (
            ("classifier", BertClassifier(config, len(LABELS)), kh["classifier"]),
            ("masked_lm", pretrainer, kh["pretrainer"]),
            ("encoder", BertEncoder(config), kh["pretrainer"].encoder)):
        report = load_checkpoint(model, kh["root"] / name)
        assert (report.format, report.new, report.unused) == ("keras-hub", [], []), name
        expected = original_weights(source)
        loaded = original_weights(model)
        assert set(loaded) <= set(expected) and len(loaded) == len(report.loaded)
        for key, value in loaded.items():
            np.testing.assert_array_equal(value, expected[key], err_msg=key)


def test_a_preset_is_a_model_directory(kh, uncased_vocab, tmp_path):
    """--init_checkpoint=PRESET gives the config, vocabulary and casing (the encoder
    was exported cased); flags that disagree are refused naming the flag."""
    from bert_tf import api
    from bert_tf.errors import InputError
    files = api.resolve_model_files(str(kh["root"] / "encoder"))
    assert files.config.architecture_differences(kh["config"]) == []
    assert files.do_lower_case is False
    assert files.vocab_file.endswith("assets/tokenizer/vocabulary.txt")
    assert pathlib.Path(files.vocab_file).read_bytes() == uncased_vocab.read_bytes()
    other = tmp_path / "vocab.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n")
    with pytest.raises(InputError, match="vocab_file.* is not the vocabulary of the model"):
        api.resolve_model_files(str(kh["root"] / "encoder"), vocab_file=str(other))
    with pytest.raises(InputError, match="do_lower_case.* is not the casing of the model"):
        api.resolve_model_files(str(kh["root"] / "encoder"), do_lower_case=True,
                                do_lower_case_given=True)


def test_a_preset_without_its_vocabulary_or_with_an_edited_config_is_refused(kh, tmp_path):
    """A preset lacking assets/tokenizer/vocabulary.txt names that file
    (as a missing model.weights.h5 is named); a preset whose config.json says 1 layer where its
    weights hold 2 is refused naming both (every shape agrees): by what our export recorded of
    its weights, and without that record (a preset keras-hub wrote) by the weights left
    unused."""
    import json
    no_vocab = tmp_path / "no_vocab"
    shutil.copytree(kh["root"] / "encoder", no_vocab)
    (no_vocab / "assets" / "tokenizer" / "vocabulary.txt").unlink()
    assert_one_line_error("run.export_savedmodel", dict(
        init_checkpoint=no_vocab, export_dir=tmp_path / "out"),
        f"error: --vocab_file: required: the model directory --init_checkpoint={no_vocab} has "
        f"no vocabulary ({no_vocab}/assets/tokenizer/vocabulary.txt not found)")
    edited = tmp_path / "edited"
    shutil.copytree(kh["root"] / "encoder", edited)
    config = json.loads((edited / "config.json").read_text())
    config["config"]["num_layers"] = 1
    (edited / "config.json").write_text(json.dumps(config))
    assert_one_line_error("run.export_savedmodel", dict(
        init_checkpoint=edited, export_dir=tmp_path / "out"),
        f"error: {edited / 'config.json'}: num_hidden_layers 1 is not what the model in "
        f"{edited} was trained with (num_hidden_layers 2, {edited / 'bert_tf_model.json'})")
    (edited / "bert_tf_model.json").unlink()
    assert_one_line_error("run.export_savedmodel", dict(
        init_checkpoint=edited, export_dir=tmp_path / "out", max_seq_length=MAX_SEQ_LENGTH),
        f"error: {edited}: holds 2 encoder layers but the model's config "
        f"({edited}/config.json) describes 1 (num_hidden_layers)")
    assert not (tmp_path / "out").exists()


def test_exporting_a_preset_again_writes_the_same_weights(kh):
    """A preset as --init_checkpoint, as export_savedmodel reads it (its config,
    vocabulary, casing and recorded labels the defaults, the weights through load_checkpoint):
    exported again, the same files."""
    from bert_tf import api
    from bert_tf.model.checkpoints import load_checkpoint
    from bert_tf.model.load_report import require_complete
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    preset = str(kh["root"] / "classifier")
    files = api.resolve_model_files(preset)
    record = files.task_record("classifier")
    assert (record["labels"], record["max_seq_length"]) == (LABELS, MAX_SEQ_LENGTH)
    task = registry.build("classifier", files.config, max_seq_length=record["max_seq_length"],
                          labels=record["labels"])
    model = task.build_model()
    require_complete(load_checkpoint(model, preset))
    again = kh["root"] / "again"
    formats.save("keras_hub", task, model, again, files.vocab_file, files.do_lower_case,
                 log=lambda line: None)
    for weights in ("model.weights.h5", "task.weights.h5"):
        first, second = h5_contents(kh["root"] / "classifier" / weights), h5_contents(
            again / weights)
        assert sorted(first) == sorted(second)
        for path, value in first.items():
            if value is not None:
                np.testing.assert_array_equal(second[path], value, err_msg=path)
    for name in ("config.json", "tokenizer.json", "task.json", "preprocessor.json",
                 "assets/tokenizer/vocabulary.txt"):
        assert (again / name).read_text() == (kh["root"] / "classifier" / name).read_text()


def test_the_docs_snippet_runs_as_written(kh):
    """docs/export.md's keras-hub snippet on the classifier's preset: the logits of
    its two sentences are ours."""
    from conftest import PROJECT_ROOT

    from bert_tf.text.fast_tokenization import FastTokenizer
    text = (PROJECT_ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    section = text.split("### keras-hub: `--format=keras_hub`", 1)[1].split("\n### ", 1)[0]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    preset = str(kh["root"] / "classifier")
    assert snippet.count('"exported_keras_hub"') == 3
    scope = {}
    exec(snippet.replace('"exported_keras_hub"', repr(preset)), scope)  # noqa: S102 the page's
    ours = kh["classifier"](our_inputs(FastTokenizer(str(kh["root"] / "google" / "vocab.txt")),
                                       [], ["A first sentence.", "And a second one."])[1])
    np.testing.assert_allclose(scope["logits"], ours["logits"], atol=1e-5)
    assert scope["backbone"].num_layers == CONFIG["num_hidden_layers"]


def test_what_keras_hub_cannot_express_is_refused(kh, tmp_path):
    """Bad input: a head keras-hub has no class for, another activation, a vocabulary
    its tokenizer cannot take, int8: an InputError naming the argument, before any work."""
    from bert_tf.errors import InputError
    from bert_tf.model.config import BertConfig
    from bert_tf.serving import formats
    vocab = kh["root"] / "google" / "vocab.txt"
    for task in ("ner", "squad", "multiple_choice"):
        with pytest.raises(InputError, match=f"task.*BertBackbone, BertTextClassifier and "
                                             f"BertMaskedLM only.*not {task}"):
            formats.check_options("keras_hub", task)
    with pytest.raises(InputError, match="quantization.*float32"):
        formats.check_options("keras_hub", "encoder", "int8")
    exact = BertConfig.from_dict(dict(CONFIG, hidden_act="gelu_exact"))
    with pytest.raises(InputError, match="format.*tanh GELU.*hidden_act gelu_exact"):
        formats.check_model("keras_hub", "encoder", exact, str(vocab))
    lines = vocab.read_text(encoding="utf-8").splitlines()
    no_mask = tmp_path / "no_mask.txt"
    no_mask.write_text("\n".join(t for t in lines if t != "[MASK]") + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"vocab_file.*has no \[MASK\] token"):
        formats.check_model("keras_hub", "classifier", kh["config"], str(no_mask))
    twice = tmp_path / "twice.txt"
    twice.write_text("\n".join(lines[:1000] + [lines[999]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(f"line 1001: {lines[999]!r} again")):
        formats.check_model("keras_hub", "classifier", kh["config"], str(twice))


def test_a_preset_keras_hub_cannot_mean_as_bert_is_refused(kh, tmp_path):
    """Bad input: a preset of another model, a tokenizer the original's cannot be
    (lower-casing without stripping accents), a weights file without a weight of the layout: an
    InputError naming the file."""
    from bert_tf.errors import InputError
    from bert_tf.model.checkpoints import load_checkpoint
    from bert_tf.model.encoder import BertEncoder
    other = tmp_path / "other"
    shutil.copytree(kh["root"] / "encoder", other)
    config = json.loads((other / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(dict(
        config, class_name="GemmaBackbone", registered_name="keras_hub>GemmaBackbone")))
    with pytest.raises(InputError, match="config.json: a keras-hub preset of GemmaBackbone"):
        load_checkpoint(BertEncoder(kh["config"]), other)
    (other / "config.json").write_text(json.dumps(config))
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    tokenizer["config"].update(lowercase=True, strip_accents=False)
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    from bert_tf import api
    with pytest.raises(InputError, match="tokenizer.json: lowercase True with strip_accents"):
        api.resolve_model_files(str(other))
    import h5py
    with h5py.File(other / "model.weights.h5", "a") as h5:
        del h5["layers/transformer_encoder_1/_feedforward_layer_norm/vars/1"]
    with pytest.raises(InputError, match="model.weights.h5: has no layers/transformer_encoder_1/"
                                         "_feedforward_layer_norm/vars/1 .bert/encoder/layer_1/"
                                         "output/LayerNorm/beta; 1 of 39 weights absent.: not "
                                         "the layout of keras-hub 0.32.0's BertBackbone"):
        load_checkpoint(BertEncoder(kh["config"]), other)


def test_the_command_line_refuses_a_vocabulary_and_a_users_folder(kh):
    """Bad input: through the command line, a model whose vocabulary keras-hub's
    tokenizer cannot take (no [MASK]; from its folder, Google's layout): one `error:` line
    naming --vocab_file, exit 2, nothing lost, nothing written. A user's folder is never an
    --export_dir (the check every format makes before any work); an earlier keras-hub export
    is."""
    from bert_tf.errors import InputError
    from bert_tf.serving.export_folders import check_export_dir
    root = kh["root"]
    folder = root / "no_mask"
    shutil.copytree(root / "google", folder)
    lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in lines if t != "[MASK]"),
                                      encoding="utf-8")
    flags = {"init_checkpoint": folder, "format": "keras_hub", "task": "encoder",
             "max_seq_length": MAX_SEQ_LENGTH, "export_dir": root / "refused"}
    assert_refused("run.export_savedmodel", flags, f"--vocab_file: {folder / 'vocab.txt'} has "
                   f"no [MASK] token, which keras-hub's BertTokenizer requires", root)
    assert not (root / "refused").exists()
    mine = root / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=f"export_dir.*{mine} is not empty and not an export"):
        check_export_dir(mine)
    (root / "classifier" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="export_dir.*notes.txt"):
        check_export_dir(root / "classifier")
    (root / "classifier" / "notes.txt").unlink()
    check_export_dir(root / "classifier")  # an export as written: replaceable


def test_the_masked_lm_preprocessor_masks_as_the_original(kh):
    """The masked-LM preset's preprocessor, as keras-hub loads it, selects and replaces as the
    original's create_pretraining_data and keras-hub's own BertMaskedLMPreprocessor defaults:
    15% of the tokens, 80% of them [MASK], 10% a random token (10% kept)."""
    loaded = load(kh, "masked_lm").preprocessor
    default = kh["keras_hub"].models.BertMaskedLMPreprocessor(loaded.tokenizer)
    for name, original in (("mask_selection_rate", 0.15), ("mask_token_rate", 0.8),
                           ("random_token_rate", 0.1)):
        assert getattr(loaded, name) == getattr(default, name) == original, name


def test_a_preset_keeps_the_segments_and_the_hidden_dropout(kh, uncased_vocab, tmp_path):
    """An encoder of 4 segment types, hidden dropout 0.2 and attention dropout 0, exported:
    keras-hub's BertBackbone loads it with 4 segments and its one dropout rate the hidden one
    (config.json's `dropout`), and our reader gives back the config's type_vocab_size."""
    from bert_tf import api
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    from bert_tf.serving import formats
    from bert_tf.tasks import registry
    config = BertConfig.from_dict(dict(CONFIG, num_hidden_layers=1, type_vocab_size=4,
                                       hidden_dropout_prob=0.2,
                                       attention_probs_dropout_prob=0.0))
    task = registry.build("encoder", config, max_seq_length=MAX_SEQ_LENGTH)
    export = tmp_path / "segments"
    formats.save("keras_hub", task, BertEncoder(config), export, str(uncased_vocab), True,
                 log=lambda line: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backbone = kh["keras_hub"].models.BertBackbone.from_preset(str(export))
    assert backbone.num_segments == 4 and backbone.dropout == 0.2
    assert api.resolve_model_files(str(export)).config.type_vocab_size == 4

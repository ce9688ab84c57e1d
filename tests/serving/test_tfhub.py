"""export_savedmodel --format=tfhub: TF Hub's text contract, used the way TF Hub users write it.

In a fresh process on tf-keras (TF_USE_LEGACY_KERAS=1, tensorflow_hub's KerasLayer; tensorflow_text
blocked from importing): both SavedModels through `hub.KerasLayer` and `hub.load`, a
text -> preprocessor -> encoder -> Dense classifier built with tf_keras and fine-tuned a few
steps (the loss goes down, the encoder's variables move). Back here, against oracles: the
preprocessor's `tokenize` equals the reference release's FullTokenizer (basic tokens, then each
one's word pieces), its default call and `bert_pack_inputs` (pairs, a call-time seq_length) equal
our packing of the reference tokens, exactly; the encoder's outputs equal our Keras encoder's
(1e-5) on real SST-2 and MRPC dev text, through `hub.KerasLayer`, through the `serving_default`
signature called by keyword on padded pairs, and through docs/export.md's snippet run as the
page has it. And our packing against tensorflow-text's round-robin trimming (what TF Hub's
preprocessors do): the same for one or two non-empty segments."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import assert_one_line_error, env_without_tensorflow_text, require_module
from conftest import run_command_line

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "max_position_embeddings": 128,
        "type_vocab_size": 2, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
MAX_SEQ_LENGTH = 64
PAIR_SEQ_LENGTH = 40  # bert_pack_inputs' call-time seq_length: some MRPC pairs are cut

# Run with TF_USE_LEGACY_KERAS=1: `tensorflow_hub` and `tf_keras` as a TF Hub user has them.
HUB_USER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    import tensorflow_hub as hub
    import tf_keras

    export_dir, data_file, out_file = sys.argv[1:]
    tf_keras.utils.set_random_seed(0)
    data = json.load(open(data_file))
    result = {"tensorflow_text_loaded": "tensorflow_text" in sys.modules}
    preprocessor = hub.load(export_dir + "/preprocessor")
    singles = tf.constant(data["singles"])

    # The default call and tokenize, through KerasLayers as TF Hub's BERT tutorials do.
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    preprocess = tf_keras.Model(text, hub.KerasLayer(export_dir + "/preprocessor")(text))
    for name, value in preprocess(singles).items():
        result["default/" + name] = value.numpy()
    tokens = hub.KerasLayer(preprocessor.tokenize)(singles)
    result["tokenize/values"] = tokens.flat_values.numpy()
    result["tokenize/token_splits"] = tokens.values.row_splits.numpy()
    result["tokenize/row_splits"] = tokens.row_splits.numpy()
    special = preprocessor.tokenize.get_special_tokens_dict()
    result["special"] = np.array([int(special[k]) for k in sorted(special)])
    result["special_names"] = np.array(sorted(special))

    # Pairs: tokenize each segment, bert_pack_inputs with seq_length chosen at call time.
    seq_length = data["pair_seq_length"]
    a = tf_keras.layers.Input(shape=(), dtype=tf.string)
    b = tf_keras.layers.Input(shape=(), dtype=tf.string)
    tokenize = hub.KerasLayer(preprocessor.tokenize)
    packer = hub.KerasLayer(preprocessor.bert_pack_inputs,
                            arguments=dict(seq_length=seq_length))
    pack_pairs = tf_keras.Model([a, b], packer([tokenize(a), tokenize(b)]))
    pairs = [tf.constant(data["firsts"]), tf.constant(data["seconds"])]
    for name, value in pack_pairs(pairs).items():
        result["pairs/" + name] = value.numpy()
    direct = preprocessor.bert_pack_inputs([preprocessor.tokenize(p) for p in pairs],
                                           seq_length=seq_length)
    for name, value in direct.items():
        result["direct/" + name] = value.numpy()
    try:
        preprocessor.bert_pack_inputs([preprocessor.tokenize(pairs[0])] * 3, seq_length=16)
        result["three_segments"] = "packed"
    except ValueError as error:
        result["three_segments"] = str(error).splitlines()[0]

    # The encoder, trainable, on the preprocessor's outputs.
    encoder = hub.KerasLayer(export_dir + "/encoder", trainable=True)
    result["trainable_variables"] = len(encoder.trainable_variables)
    inputs = preprocess(singles)
    outputs = encoder(inputs, training=False)
    result["encoder/pooled_output"] = outputs["pooled_output"].numpy()
    result["encoder/default"] = outputs["default"].numpy()
    result["encoder/sequence_output"] = outputs["sequence_output"].numpy()
    result["encoder/encoder_outputs"] = np.stack([x.numpy() for x in outputs["encoder_outputs"]])
    result["pairs_pooled_output"] = encoder(pack_pairs(pairs))["pooled_output"].numpy()
    result["dropout_changes_outputs"] = bool(np.abs(
        encoder(inputs, training=True)["pooled_output"].numpy()
        - result["encoder/pooled_output"]).max() > 1e-4)

    # A classifier as TF Hub users write it, fine-tuned a few steps.
    text = tf_keras.layers.Input(shape=(), dtype=tf.string)
    pooled = encoder(hub.KerasLayer(export_dir + "/preprocessor")(text))["pooled_output"]
    logits = tf_keras.layers.Dense(2)(tf_keras.layers.Dropout(0.1)(pooled))
    classifier = tf_keras.Model(text, logits)
    classifier.compile(optimizer=tf_keras.optimizers.Adam(3e-3),
                       loss=tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = [v.numpy() for v in encoder.trainable_variables]
    train_texts, train_labels = np.array(data["train_texts"]), np.array(data["train_labels"])
    history = classifier.fit(train_texts, train_labels, batch_size=16, epochs=6, shuffle=False,
                             verbose=0)
    result["losses"] = np.array(history.history["loss"])
    result["variables_moved"] = sum(
        bool(np.abs(v.numpy() - w).max() > 0) for v, w in zip(encoder.trainable_variables, before))
    np.savez(out_file, **result)
    """)


def read_tsv(path, columns, limit=None):
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [tuple(row[c] for c in columns) for row in rows[:limit]]


@pytest.fixture(scope="module")
def hub_export(tmp_path_factory, uncased_vocab):
    """A tiny encoder (our Keras BertEncoder, its weights) exported by the command line with
    --format=tfhub into root/hub."""
    import keras

    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder

    keras.utils.set_random_seed(0)
    root = tmp_path_factory.mktemp("tfhub")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    shutil.copy(uncased_vocab, root / "vocab.txt")
    encoder = BertEncoder(BertConfig.from_dict(TINY))
    flags = {"init_checkpoint": write_tf1_checkpoint(encoder, root / "model.ckpt"),
             "bert_config_file": root / "bert_config.json", "vocab_file": root / "vocab.txt",
             "max_seq_length": MAX_SEQ_LENGTH, "task": "encoder", "format": "tfhub",
             "export_dir": root / "hub"}
    status, log = run_command_line("run.export_savedmodel", flags)
    assert status == 0, log[-3000:]
    return {"root": root, "log": log, "encoder": encoder, "flags": flags}


def hub_user_env(root):
    """The environment of a TF Hub user's process: tf-keras (TF_USE_LEGACY_KERAS=1) and
    tensorflow_hub there, tensorflow_text blocked from importing."""
    require_module("tensorflow_hub", "TF Hub's KerasLayer, the test extra")
    require_module("tf_keras", "Keras 2 for tensorflow_hub, the test extra")
    env = env_without_tensorflow_text(root / "blocker")
    env.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="3")
    return env


@pytest.fixture(scope="module")
def hub_run(hub_export, shared_data):
    """What the TF Hub user process (HUB_USER) made of the export."""
    root = hub_export["root"]
    env = hub_user_env(root)
    glue = shared_data / "glue_data"
    singles = [row[0] for row in read_tsv(glue / "SST-2" / "dev.tsv", (0,), limit=24)]
    singles += ["", "Ünïcödé and 中文 text, with punctuation!?"]
    pairs = read_tsv(glue / "MRPC" / "dev.tsv", (3, 4), limit=24)
    train = read_tsv(glue / "SST-2" / "train.tsv", (0, 1), limit=32)
    data = {"singles": singles, "firsts": [a for a, _ in pairs],
            "seconds": [b for _, b in pairs], "pair_seq_length": PAIR_SEQ_LENGTH,
            "train_texts": [t for t, _ in train], "train_labels": [int(y) for _, y in train]}
    (root / "data.json").write_text(json.dumps(data))
    process = subprocess.run(
        [sys.executable, "-c", HUB_USER, str(root / "hub"), str(root / "data.json"),
         str(root / "result.npz")], capture_output=True, text=True, env=env, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    result = dict(np.load(root / "result.npz"))
    return dict(hub_export, data=data, result=result)


def test_layout_and_log(hub_run):
    root = hub_run["root"]
    assert sorted(os.listdir(root / "hub")) == ["encoder", "preprocessor"]
    for part in ("encoder", "preprocessor"):
        marker = json.loads((root / "hub" / part / "assets" / "bert_tf_export.json").read_text())
        contents = marker.pop("contents")  # every file and folder the part holds
        assert contents == sorted(
            str(p.relative_to(root / "hub" / part)) + ("/" if p.is_dir() else "")
            for p in (root / "hub" / part).rglob("*"))
        assert marker == {"format": "tfhub", "max_seq_length": MAX_SEQ_LENGTH, "part": part,
                          "task": "encoder"}
    assert "preprocessor (tokenize, bert_pack_inputs, default seq_length 64)" in hub_run["log"]
    # The SavedModels are used without tensorflow_text.
    assert not hub_run["result"]["tensorflow_text_loaded"]


def test_preprocessor_equals_the_reference_tokenizer_and_our_packing(hub_run, ref,
                                                                     uncased_vocab):
    from bert_tf import api
    result, data = hub_run["result"], hub_run["data"]
    reference = ref.FullTokenizer(str(uncased_vocab), do_lower_case=True)

    def pieces(text):  # [tokens][pieces]: the reference's basic tokens, each one's word pieces
        return [reference.convert_tokens_to_ids(reference.wordpiece_tokenizer.tokenize(token))
                for token in reference.basic_tokenizer.tokenize(text)]

    values, token_splits = result["tokenize/values"], result["tokenize/token_splits"]
    row_splits = result["tokenize/row_splits"]
    served = [[values[token_splits[t]:token_splits[t + 1]].tolist()
               for t in range(row_splits[row], row_splits[row + 1])]
              for row in range(len(data["singles"]))]
    assert served == [pieces(text) for text in data["singles"]]

    tokenizer = api.load_tokenizer(str(uncased_vocab))
    single = api.encode(tokenizer, data["singles"], None, MAX_SEQ_LENGTH)
    pairs = api.encode(tokenizer, data["firsts"], data["seconds"], PAIR_SEQ_LENGTH)
    assert min(single["input_mask"].sum(axis=1)) == 2  # the empty text: [CLS] [SEP]
    assert max(pairs["input_mask"].sum(axis=1)) == PAIR_SEQ_LENGTH  # some pairs are cut
    for hub_name, ours in (("input_word_ids", "input_ids"), ("input_mask", "input_mask"),
                           ("input_type_ids", "segment_ids")):
        np.testing.assert_array_equal(result["default/" + hub_name], single[ours])
        np.testing.assert_array_equal(result["pairs/" + hub_name], pairs[ours])
        np.testing.assert_array_equal(result["direct/" + hub_name], pairs[ours])
        assert result["default/" + hub_name].dtype == np.int32

    vocab = ref.load_vocab(str(uncased_vocab))
    assert dict(zip(result["special_names"], result["special"])) == {
        "start_of_sequence_id": vocab["[CLS]"], "end_of_segment_id": vocab["[SEP]"],
        "padding_id": vocab["[PAD]"], "mask_id": vocab["[MASK]"], "vocab_size": len(vocab)}
    assert "Could not find matching concrete function" in str(result["three_segments"])


def test_encoder_outputs_equal_the_keras_encoder(hub_run, uncased_vocab):
    from bert_tf import api
    result, data, encoder = hub_run["result"], hub_run["data"], hub_run["encoder"]
    tokenizer = api.load_tokenizer(str(uncased_vocab))
    expected = encoder(api.encode(tokenizer, data["singles"], None, MAX_SEQ_LENGTH),
                       training=False)
    for name in ("pooled_output", "sequence_output"):
        np.testing.assert_allclose(result["encoder/" + name], expected[name].numpy(),
                                   rtol=0, atol=1e-5)
    np.testing.assert_array_equal(result["encoder/default"], result["encoder/pooled_output"])
    np.testing.assert_allclose(result["encoder/encoder_outputs"],
                               np.stack([x.numpy() for x in expected["encoder_outputs"]]),
                               rtol=0, atol=1e-5)
    pairs = encoder(api.encode(tokenizer, data["firsts"], data["seconds"], PAIR_SEQ_LENGTH),
                    training=False)
    np.testing.assert_allclose(result["pairs_pooled_output"], pairs["pooled_output"].numpy(),
                               rtol=0, atol=1e-5)
    assert result["dropout_changes_outputs"]  # training=True reaches the dropout


def test_serving_default_by_keyword_on_pairs_equals_the_keras_encoder(hub_export,
                                                                      uncased_vocab,
                                                                      shared_data):
    """The encoder's `serving_default` signature (TensorFlow Serving's,
    saved_model_cli's) called by keyword, as they call it, on padded MRPC pairs, where the
    mask and the type ids differ: every output equals the Keras encoder's on the same ids."""
    import tensorflow as tf

    from bert_tf import api
    pairs = read_tsv(shared_data / "glue_data" / "MRPC" / "dev.tsv", (3, 4), limit=16)
    inputs = api.encode(api.load_tokenizer(str(uncased_vocab)), [a for a, _ in pairs],
                        [b for _, b in pairs], MAX_SEQ_LENGTH)
    mask, type_ids = inputs["input_mask"], inputs["segment_ids"]
    assert (mask == 0).any() and (type_ids == 1).any()  # padding, and second segments
    assert (mask != type_ids).mean() > 0.3
    serve = tf.saved_model.load(str(hub_export["root"] / "hub" / "encoder")).signatures[
        "serving_default"]
    served = serve(input_word_ids=tf.constant(inputs["input_ids"]),
                   input_mask=tf.constant(mask), input_type_ids=tf.constant(type_ids))
    expected = hub_export["encoder"](inputs, training=False)
    layers = expected["encoder_outputs"]
    assert sorted(served) == sorted(["pooled_output", "default", "sequence_output"] + [
        f"encoder_outputs_{i}" for i in range(len(layers))])
    for name, value in [("pooled_output", expected["pooled_output"]),
                        ("default", expected["pooled_output"]),
                        ("sequence_output", expected["sequence_output"])] + [
                            (f"encoder_outputs_{i}", x) for i, x in enumerate(layers)]:
        np.testing.assert_allclose(served[name].numpy(), value.numpy(), rtol=0, atol=1e-5,
                                   err_msg=name)


def docs_tfhub_snippet():
    """The Python code block of docs/export.md's TF Hub section."""
    from conftest import PROJECT_ROOT
    text = (PROJECT_ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    section = text.split("### TF Hub: `--format=tfhub`", 1)[1].split("\n### ", 1)[0]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


# Appended to the snippet: the model it built (`embed`) on texts chosen here.
SNIPPET_CHECK = """
import json, sys
import numpy as np
texts = json.loads(sys.argv[1])
np.save(sys.argv[2], embed(tf.constant(texts)).numpy())
np.save(sys.argv[3], vectors.numpy())
"""


def test_the_docs_tfhub_snippet_runs_as_written(hub_export, uncased_vocab, shared_data):
    """docs/export.md's snippet, as the page has it, in a fresh process in a directory holding
    the export as `hub` (TF_USE_LEGACY_KERAS left unset: the snippet sets it itself): the
    model it builds gives the Keras encoder's pooled outputs on SST-2 dev text."""
    from bert_tf import api
    root = hub_export["root"]
    env = hub_user_env(root)
    env.pop("TF_USE_LEGACY_KERAS")
    snippet = docs_tfhub_snippet()
    assert 'hub.KerasLayer("hub/encoder", trainable=True)' in snippet
    texts = [row[0] for row in read_tsv(shared_data / "glue_data" / "SST-2" / "dev.tsv", (0,),
                                        limit=8)]
    process = subprocess.run(
        [sys.executable, "-c", snippet + SNIPPET_CHECK, json.dumps(texts),
         str(root / "snippet.npy"), str(root / "vectors.npy")], cwd=root, capture_output=True,
        text=True, env=env, timeout=600)
    assert process.returncode == 0, process.stderr[-3000:]
    expected = hub_export["encoder"](api.encode(api.load_tokenizer(str(uncased_vocab)), texts,
                                                None, MAX_SEQ_LENGTH), training=False)
    np.testing.assert_allclose(np.load(root / "snippet.npy"),
                               expected["pooled_output"].numpy(), rtol=0, atol=1e-5)
    assert np.load(root / "vectors.npy").shape == (2, TINY["hidden_size"])


def test_a_tf_keras_classifier_fine_tunes_the_encoder(hub_run):
    result, encoder = hub_run["result"], hub_run["encoder"]
    assert result["trainable_variables"] == len(encoder.trainable_variables) > 0
    losses = result["losses"]
    assert losses[-1] < 0.95 * losses[0], losses  # measured: 0.78 -> 0.68 in 6 epochs
    assert result["variables_moved"] == len(encoder.trainable_variables)


def test_tfhub_refuses_other_tasks_and_int8(tmp_path):
    flags = {"init_checkpoint": tmp_path / "model.ckpt", "format": "tfhub",
             "export_dir": tmp_path / "out"}
    assert_one_line_error("run.export_savedmodel", dict(flags, task="classifier"),
                          "--task: the TF Hub format exports the encoder (task encoder), not "
                          "classifier")
    assert_one_line_error("run.export_savedmodel", dict(flags, quantization="int8"),
                          "--quantization: the TF Hub encoder is exported to be fine-tuned")
    assert_one_line_error("run.export_savedmodel", dict(flags, litert_signature="serve_text"),
                          "--litert_signature: is for format litert, not tfhub")
    assert not (tmp_path / "out").exists()


def test_the_export_folder_check_accepts_an_earlier_tfhub_export_and_refuses_a_users(
        hub_export, tmp_path):
    """The check before an export: a TF Hub export of ours may be replaced, a user's folder
    not (the replacement itself: tests/test_nothing_lost.py)."""
    from bert_tf.errors import InputError
    from bert_tf.serving.export_folders import check_export_dir
    check_export_dir(hub_export["root"] / "hub")  # ours: may be replaced
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(InputError, match="not empty and not an export of bert_tf"):
        check_export_dir(tmp_path / "mine")


def test_our_packing_is_tensorflow_text_round_robin_for_two_nonempty_segments(uncased_vocab,
                                                                             shared_data):
    """TF Hub's preprocessors trim with tensorflow-text's RoundRobinTrimmer and combine_segments
    (Model Garden's BertPackInputs): the same inputs as the original's _truncate_seq_pair for one
    or two segments that have pieces; an empty second segment differs ([CLS] a [SEP] [SEP])."""
    text = require_module("tensorflow_text", "the round-robin trimmer of TF Hub's preprocessors")
    import tensorflow as tf

    from bert_tf.text.graph_tokenization import GraphTokenizer
    tokenizer = GraphTokenizer(str(uncased_vocab))
    pairs = read_tsv(shared_data / "glue_data" / "MRPC" / "dev.tsv", (3, 4), limit=200)
    ids_a = tokenizer.tokenize(tf.constant([a for a, _ in pairs]))
    ids_b = tokenizer.tokenize(tf.constant([b for _, b in pairs]))

    def round_robin(segments, seq_length):
        trimmed = text.RoundRobinTrimmer(seq_length - len(segments) - 1).trim(segments)
        combined, segment_ids = text.combine_segments(trimmed, tokenizer.cls_id,
                                                      tokenizer.sep_id)
        ids, mask = text.pad_model_inputs(combined, seq_length)
        segment_ids, _ = text.pad_model_inputs(segment_ids, seq_length)
        return {"input_ids": ids, "input_mask": mask, "segment_ids": segment_ids}

    for seq_length in (8, 16, 33, 64, 128):  # from almost every pair cut to none
        for segments in ([ids_a], [ids_a, ids_b], [ids_b, ids_a]):
            ours = tokenizer.pack(*segments, max_seq_length=seq_length)
            theirs = round_robin(segments, seq_length)
            for name in ours:
                np.testing.assert_array_equal(ours[name].numpy(), theirs[name].numpy(),
                                              err_msg=f"{name}, {len(segments)} segments, "
                                                      f"seq_length {seq_length}")
    empty = tf.ragged.constant([[]], tf.int32, row_splits_dtype=tf.int64)
    first = ids_a[:1]
    assert tokenizer.pack(first, empty, max_seq_length=128)["input_mask"].numpy().sum() == (
        round_robin([first, empty], 128)["input_mask"].numpy().sum() - 1)

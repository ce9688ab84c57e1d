"""data_tools.extend_vocab: domain words in the [unusedN] slots, or appended with the checkpoint
resized.

Oracles: the reference release's tokenizer (its BasicTokenizer counts the corpus words and its
WordpieceTokenizer splits them, for an independent ranking; its FullTokenizer must see each
new word as one piece, in the corpus's own sentences too); the reference's BertModel, which
must restore the resized checkpoint with the new vocab_size; the original vocabulary and
checkpoint for what must not change; the original's initializer's statistics for new rows.
Real text: the first 600 lines of WikiText-2 valid.
"""
import collections
import json

import numpy as np
import pytest

from conftest import assert_one_line_error, run_command_line

NUM_WORDS = 40
TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "max_position_embeddings": 64,
        "type_vocab_size": 2, "initializer_range": 0.02}


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    lines = (shared_data / "wikitext-2" / "valid.txt").read_text("utf-8").splitlines()[:600]
    path = tmp_path_factory.mktemp("corpus") / "domain.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def reference_ranking(ref, vocab_file, corpus, min_count=2):
    """The words the module docstring of bert_tf.text.vocab_extension describes, from the
    reference's own tokenizers: basic tokens counted over the lines, split by its WordPiece,
    count * (pieces - 1) ([UNK]: count), best first, ties by count then word."""
    tokenizer = ref.FullTokenizer(str(vocab_file), do_lower_case=True)
    counts = collections.Counter()
    for line in corpus.read_text("utf-8").splitlines():
        counts.update(tokenizer.basic_tokenizer.tokenize(line))
    ranked = []
    for word, count in counts.items():
        pieces = tokenizer.wordpiece_tokenizer.tokenize(word)
        if count >= min_count and (len(pieces) >= 2 or pieces == ["[UNK]"]):
            ranked.append((-count * (1 if pieces == ["[UNK]"] else len(pieces) - 1), -count,
                           word))
    return [word for *_, word in sorted(ranked)]


def assert_one_piece_each(ref, vocab_file, words, corpus):
    """The reference's FullTokenizer of the new vocabulary: each word alone is one piece, and
    so it is in every corpus line that has it."""
    tokenizer = ref.FullTokenizer(str(vocab_file), do_lower_case=True)
    for word in words:
        assert tokenizer.tokenize(word) == [word], word
    seen = set()
    for line in corpus.read_text("utf-8").splitlines():
        basic = tokenizer.basic_tokenizer.tokenize(line)
        pieces = tokenizer.tokenize(line)
        for word in set(words) & set(basic):
            assert pieces.count(word) == basic.count(word), (word, line)
            seen.add(word)
    assert seen == set(words)


def test_unused_slots_take_the_worst_split_words(ref, uncased_vocab, corpus, tmp_path):
    output = tmp_path / "domain_vocab.txt"
    status, log = run_command_line("data_tools.extend_vocab", dict(
        vocab_file=uncased_vocab, input_file=corpus, output_vocab_file=output,
        num_words=NUM_WORDS))
    assert status == 0, log[-3000:]
    old = uncased_vocab.read_text("utf-8").splitlines()
    new = output.read_text("utf-8").splitlines()
    assert len(new) == len(old) == 30522
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    # The first NUM_WORDS [unusedN] slots (ids 1..40 in the released vocabulary), and no other.
    assert changed == [i for i, token in enumerate(old) if token.startswith("[unused")][:NUM_WORDS]
    words = [new[i] for i in changed]
    assert words == reference_ranking(ref, uncased_vocab, corpus)[:NUM_WORDS]
    assert_one_piece_each(ref, output, words, corpus)
    assert f"words_added={NUM_WORDS}" in log and "id 1: " in log


def test_unused_words_and_preserve_unused_tokens(uncased_vocab, corpus, tmp_path):
    """A replaced slot's literal text is split like any text; the other slots stay whole with
    preserve_unused_tokens (the module docstring's note)."""
    from bert_tf.model.extended_vocab import extend_vocab
    from bert_tf.tokenization import FullTokenizer
    output = tmp_path / "vocab.txt"
    summary = extend_vocab(str(uncased_vocab), [str(corpus)], str(output), num_words=2,
                           log=lambda message: None)
    assert [w["id"] for w in summary["words"]] == [1, 2]
    tokenizer = FullTokenizer(str(output), preserve_unused_tokens=True)
    assert tokenizer.tokenize("[unused0] [unused2] x") == ["[", "unused", "##0", "]",
                                                           "[unused2]", "x"]


def write_tiny_checkpoint(folder):
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bert_config.json").write_text(json.dumps(TINY))
    model = BertPretrainer(BertConfig.from_dict(TINY))
    model.masked_lm.output_bias.assign(np.linspace(-1, 1, TINY["vocab_size"]))
    return model, write_tf1_checkpoint(model, folder / "bert_model.ckpt")


def test_append_resizes_the_checkpoint(refbert, ref, uncased_vocab, corpus, tmp_path):
    from bert_tf.model.checkpoints import load_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertPretrainer
    original, checkpoint = write_tiny_checkpoint(tmp_path / "model")
    num_words = 300
    status, log = run_command_line("data_tools.extend_vocab", dict(
        mode="append", init_checkpoint=checkpoint, bert_config_file=tmp_path / "model" /
        "bert_config.json", vocab_file=uncased_vocab, input_file=corpus, num_words=num_words,
        output_dir=tmp_path / "domain"))
    assert status == 0, log[-3000:]
    domain = tmp_path / "domain"
    assert sorted(p.name for p in domain.iterdir()) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index",
        "bert_tf_model.json", "checkpoint", "vocab.txt"]
    assert json.loads((domain / "bert_tf_model.json").read_text()) == {"do_lower_case": True}
    old = uncased_vocab.read_text("utf-8").splitlines()
    new = (domain / "vocab.txt").read_text("utf-8").splitlines()
    ranking = reference_ranking(ref, uncased_vocab, corpus)
    assert 40 < len(ranking) < num_words  # the corpus has fewer: all of them are added
    assert new[:len(old)] == old and new[len(old):] == ranking
    assert f"words_added={len(ranking)}  words_asked={num_words}" in log
    words = ranking
    assert_one_piece_each(ref, domain / "vocab.txt", words[:25], corpus)
    config = json.loads((domain / "bert_config.json").read_text())
    assert {key: config[key] for key in TINY} == dict(TINY, vocab_size=len(new))

    # Our loader: every variable, old rows as they were.
    model = BertPretrainer(BertConfig.from_dict(config))
    report = load_checkpoint(model, str(domain))
    assert not report.new and not report.unused, report
    table = model.encoder.word_embeddings.numpy()
    np.testing.assert_array_equal(table[:len(old)], original.encoder.word_embeddings.numpy())
    bias = model.masked_lm.output_bias.numpy()
    np.testing.assert_array_equal(bias[:len(old)], original.masked_lm.output_bias.numpy())
    np.testing.assert_array_equal(bias[len(old):], 0.0)  # the original's zeros_initializer
    # New rows: the original's create_initializer, truncated normal (stddev 0.02, cut at 2
    # stddev: the kept values' stddev is 0.88 of it) with mean 0.
    rows = table[len(old):]
    assert np.abs(rows).max() <= 2 * 0.02
    assert 0.016 < rows.std() < 0.0192 and abs(rows.mean()) < 0.001
    assert len(np.unique(rows[:, 0])) == len(words)  # drawn, not copied
    for name in ("bert/encoder/layer_1/output/dense/kernel", "bert/pooler/dense/bias"):
        reader_new = refbert.v1.train.load_checkpoint(str(domain / "bert_model.ckpt"))
        reader_old = refbert.v1.train.load_checkpoint(str(checkpoint))
        np.testing.assert_array_equal(reader_new.get_tensor(name), reader_old.get_tensor(name))

    # The reference's BertModel of the new config restores it, every variable.
    v1, modeling = refbert.v1, refbert.modeling
    with v1.Graph().as_default():
        ids = v1.constant([[101, len(old), len(new) - 1, 102]])
        bert = modeling.BertModel(modeling.BertConfig.from_dict(config), is_training=False,
                                  input_ids=ids)
        assignment, initialized = modeling.get_assignment_map_from_checkpoint(
            v1.trainable_variables(), str(domain / "bert_model.ckpt"))
        assert len(initialized) // 2 == len(v1.trainable_variables())
        v1.train.init_from_checkpoint(str(domain / "bert_model.ckpt"), assignment)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            restored = session.run(bert.get_embedding_table())
    np.testing.assert_array_equal(restored, table)


@pytest.mark.slow
def test_append_draws_the_new_rows_from_the_seed(uncased_vocab, corpus, tmp_path):
    """--mode=append with --random_seed=1 and the library's extend_vocab with seed=1
    give the same new embedding rows, bit for bit; seed=2 other ones; the old rows are the
    original's in each."""
    import tensorflow as tf

    from bert_tf.model.config import BertConfig
    from bert_tf.model.extended_vocab import extend_vocab
    original, checkpoint = write_tiny_checkpoint(tmp_path / "model")
    old_rows = original.encoder.word_embeddings.numpy()
    status, log = run_command_line("data_tools.extend_vocab", dict(
        mode="append", init_checkpoint=checkpoint, bert_config_file=tmp_path / "model" /
        "bert_config.json", vocab_file=uncased_vocab, input_file=corpus, num_words=20,
        output_dir=tmp_path / "command_line", random_seed=1))
    assert status == 0, log[-3000:]
    for run, seed in (("again", 1), ("other", 2)):
        extend_vocab(str(uncased_vocab), [str(corpus)], str(tmp_path / run / "vocab.txt"),
                     mode="append", num_words=20, init_checkpoint=checkpoint,
                     bert_config=BertConfig.from_dict(TINY), output_dir=str(tmp_path / run),
                     seed=seed, log=lambda message: None)
    new = {}
    for run in ("command_line", "again", "other"):
        table = tf.train.load_checkpoint(str(tmp_path / run / "bert_model.ckpt")).get_tensor(
            "bert/embeddings/word_embeddings")
        assert table.shape == (len(old_rows) + 20, TINY["hidden_size"])
        np.testing.assert_array_equal(table[:len(old_rows)], old_rows)
        new[run] = table[len(old_rows):]
    np.testing.assert_array_equal(new["again"], new["command_line"])
    assert (new["other"] != new["command_line"]).mean() > 0.99
    assert np.abs(new["command_line"]).max() > 0  # drawn, not zeros


def test_checkpoint_weights_of_every_format_are_the_same(tmp_path):
    """A TF2 object checkpoint reads as the same original-named weights as the TF1 one."""
    import tensorflow as tf

    from bert_tf.model.extended_vocab import vocabulary_checkpoint_weights
    from bert_tf.model.config import BertConfig
    model, tf1 = write_tiny_checkpoint(tmp_path / "tf1")
    tf2 = tf.train.Checkpoint(model=model).write(str(tmp_path / "tf2" / "ckpt"))
    config = BertConfig.from_dict(TINY)
    weights_tf1, left_tf1 = vocabulary_checkpoint_weights(tf1, config)
    weights_tf2, left_tf2 = vocabulary_checkpoint_weights(tf2, config)
    assert sorted(weights_tf1) == sorted(weights_tf2) and len(weights_tf1) > 30
    for name, value in weights_tf1.items():
        np.testing.assert_array_equal(weights_tf2[name], value, err_msg=name)
    assert left_tf1 == [] and left_tf2 == []


def vocab_with_slots(path, slots):
    tokens = (["[PAD]"] + [f"[unused{i}]" for i in range(slots)]
              + ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "a", "##s"])
    path.write_text("\n".join(tokens) + "\n")
    return path


@pytest.mark.parametrize("name,flags,expected", [
    ("too few slots", {"vocab": 3, "num_words": 5},
     "--num_words: VOCAB has only 3 free [unusedN] slots for the 5 words asked: ask for at "
     "most 3, or use --mode=append"),
    ("no slot", {"vocab": 0, "num_words": 1}, "has no free [unusedN] slot for the 1 words"),
    ("unknown mode", {"vocab": 3, "mode": "extend"}, "--mode"),
    ("checkpoint in unused mode", {"vocab": 3, "init_checkpoint": "CHECKPOINT"},
     "--init_checkpoint: only with --mode=append"),
    ("zero words", {"vocab": 3, "num_words": 0}, "--num_words"),
    ("checkpoint of another vocabulary", {"vocab": 3, "mode": "append",
                                          "init_checkpoint": "CHECKPOINT"},
     "--bert_config_file: TMP/small.json is not the config of the model in "
     "--init_checkpoint=TMP/model (vocab_size 20 vs 30522, TMP/model/bert_config.json)"),
    ("checkpoint of another vocabulary, no config beside it",
     {"vocab": 3, "mode": "append", "init_checkpoint": "CHECKPOINT", "config_beside": False},
     "bert/embeddings/word_embeddings is [30522, 32], not [vocab_size, hidden_size] = [20, 32]"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, corpus, name, flags, expected):
    flags = dict(flags)
    vocab = vocab_with_slots(tmp_path / "vocab.txt", flags.pop("vocab"))
    if flags.get("init_checkpoint") == "CHECKPOINT":
        _, flags["init_checkpoint"] = write_tiny_checkpoint(tmp_path / "model")
        if not flags.pop("config_beside", True):
            (tmp_path / "model" / "bert_config.json").unlink()
    if flags.get("mode") == "append":
        (tmp_path / "small.json").write_text(json.dumps(dict(TINY, vocab_size=20)))
        flags.update(bert_config_file=tmp_path / "small.json", output_dir=tmp_path / "out")
    flags.update(vocab_file=vocab, input_file=corpus, output_vocab_file=tmp_path / "new.txt")
    assert_one_line_error("data_tools.extend_vocab", flags, expected.replace(
        "VOCAB", str(vocab)).replace("TMP", str(tmp_path)))
    assert not (tmp_path / "new.txt").exists() and not (tmp_path / "out").exists()


def test_append_refuses_a_folder_in_use_before_reading_the_corpus(uncased_vocab, tmp_path):
    from bert_tf.errors import InputError
    from bert_tf.model.config import BertConfig
    from bert_tf.model.extended_vocab import extend_vocab
    _, checkpoint = write_tiny_checkpoint(tmp_path / "model")
    for output_dir in (tmp_path / "model", tmp_path / "used"):
        (tmp_path / "used").mkdir(exist_ok=True)
        (tmp_path / "used" / "notes.txt").write_text("mine")
        with pytest.raises(InputError, match=r"^output_dir: .* must be a new or empty folder"):
            extend_vocab(str(uncased_vocab), [str(tmp_path / "no_corpus.txt")],
                         str(tmp_path / "new.txt"), mode="append", init_checkpoint=checkpoint,
                         bert_config=BertConfig.from_dict(TINY), output_dir=str(output_dir))
    assert sorted(p.name for p in (tmp_path / "used").iterdir()) == ["notes.txt"]
    assert not (tmp_path / "new.txt").exists()


def test_the_appended_folder_is_a_movable_model_directory(uncased_vocab, corpus, tmp_path):
    """extend_vocab --mode=append's output folder is a model directory (config,
    vocabulary, casing beside the checkpoint) that extract_features takes alone, and its
    `checkpoint` file names the checkpoint relative to the folder: moved elsewhere, it gives
    the same features, without "Couldn't match files"."""
    from bert_tf.model.config import BertConfig
    from bert_tf.model.extended_vocab import extend_vocab
    _, checkpoint = write_tiny_checkpoint(tmp_path / "model")
    domain = tmp_path / "domain"
    extend_vocab(str(uncased_vocab), [str(corpus)], str(domain / "vocab.txt"), mode="append",
                 num_words=20, init_checkpoint=checkpoint, bert_config=BertConfig.from_dict(TINY),
                 output_dir=str(domain), log=lambda message: None)
    assert "/" not in (domain / "checkpoint").read_text()
    lines = corpus.read_text("utf-8").splitlines()
    text = tmp_path / "text.txt"
    text.write_text("\n".join(line for line in lines if line.strip())[:2000] + "\n",
                    encoding="utf-8")
    features = {}
    for name in ("here", "moved"):
        if name == "moved":
            (tmp_path / "elsewhere").mkdir()
            domain = domain.rename(tmp_path / "elsewhere" / "domain_model")
        status, log = run_command_line("run.extract_features", dict(
            input_file=text, output_file=tmp_path / f"{name}.jsonl", init_checkpoint=domain,
            layers="-1", max_seq_length=32))
        assert status == 0, log[-3000:]
        assert "Couldn't match files" not in log
        features[name] = (tmp_path / f"{name}.jsonl").read_text()
    assert features["here"] == features["moved"] and len(features["here"]) > 1000


@pytest.mark.parametrize("layers", [1, 3])
def test_append_refuses_a_config_that_does_not_describe_the_checkpoint(uncased_vocab, corpus,
                                                                        tmp_path, layers):
    """In extend_vocab: a config of 1 or 3 layers for a checkpoint of 2 would write a
    resized checkpoint that its new config does not describe: refused naming the checkpoint
    and both counts, no --output_dir made."""
    _, checkpoint = write_tiny_checkpoint(tmp_path / "model")
    # The checkpoint alone: its folder's own config would refuse the given one first.
    (tmp_path / "model" / "bert_config.json").unlink()
    (tmp_path / "edited.json").write_text(json.dumps(dict(TINY, num_hidden_layers=layers)))
    assert_one_line_error("data_tools.extend_vocab", dict(
        mode="append", init_checkpoint=checkpoint, bert_config_file=tmp_path / "edited.json",
        vocab_file=uncased_vocab, input_file=corpus, num_words=20,
        output_dir=tmp_path / "domain"),
        f"error: {checkpoint}: holds 2 encoder layers but the model's config describes "
        f"{layers} (num_hidden_layers)")
    assert not (tmp_path / "domain").exists()

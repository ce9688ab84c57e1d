"""run_classifier's long texts in windows (--doc_stride): eval and predict through the task.

- Texts that fit give exactly today's output: a tiny BERT evaluates and predicts the same SST-2
  dev sentences from records written with and without windows; eval_results and
  test_results.tsv are identical.
- A long text gives the one-window answer where windows are not needed, exactly: a
  deterministic model whose logits are the max over the input's tokens of a per-token score
  (no attention: nothing depends on what is beside a token) sees every piece in some window,
  so max pooling over the windows gives the logits of the whole text in one window (packed at
  512 here, which this model allows), while today's truncation loses the tail. Mean pooling
  equals the mean of the windows' logits (numpy oracle), and an example's windows are
  consecutive records with its example_id.
- The command line: --doc_stride through run_classifier equals the run without it on every
  example that fits.
Long texts are clearly synthetic: consecutive SST-2 dev sentences joined into documents.
"""
import numpy as np
import pytest

from bert_tf.tasks.classification import task as classification
from bert_tf.tasks.classification.reader import InputExample

from conftest import run_command_line

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "max_position_embeddings": 64, "type_vocab_size": 2}


@pytest.fixture(scope="module")
def sentences(shared_data):
    with open(shared_data / "glue_data" / "SST-2" / "dev.tsv", encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f][1:]
    return [(text.strip(), label) for text, label in rows]


@pytest.fixture(scope="module")
def tokenizer(uncased_vocab):
    from bert_tf.tokenization import FullTokenizer
    return FullTokenizer(str(uncased_vocab), do_lower_case=True)


def run_task(task, model, output_dir, batch_size=8):
    """eval_results and test_results.tsv lines of `task` on its records, as the runner makes
    them (the loop's gathered outputs, then the task)."""
    import tensorflow as tf

    from bert_tf.training import gathering

    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    results = {}
    for mode in ("eval", "predict"):
        steps = task.config.records[mode].count // batch_size
        outputs = gathering.gather_outputs(strategy, model, task, task.dataset_fn(mode, batch_size),
                                       steps, mode)
        if mode == "eval":
            results = task.eval_results(outputs, 0, batch_size)
        else:
            task.write_predictions(outputs, str(output_dir))
    return results, (output_dir / "test_results.tsv").read_text().splitlines()


def prepare(examples, labels, tokenizer, max_seq_length, output_dir, bert_config=None, **options):
    return classification.prepare_task(
        bert_config, {"eval": examples, "predict": examples}, labels, tokenizer, max_seq_length,
        output_dir, eval_batch_size=8, predict_batch_size=8, log=lambda line: None,
        **options).task


def test_combine_windows_against_numpy():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(9, 3)).astype(np.float32)
    example_ids = np.array([0, 1, 1, 1, 2, 3, 3, -1, -1])
    for pooling, reduce in (("mean", np.mean), ("max", np.max)):
        combined, first = classification.combine_windows(values, example_ids, pooling)
        assert first.tolist() == [0, 1, 4, 5, 7]
        expected = [reduce(values[example_ids == i].astype(np.float64), axis=0)
                    for i in (0, 1, 2, 3, -1)]
        np.testing.assert_allclose(combined, expected, rtol=1e-7)
        assert combined.dtype == np.float32
        np.testing.assert_array_equal(combined[[0, 2]], values[[0, 4]])  # one window: exact
    with pytest.raises(ValueError, match="not consecutive"):
        classification.combine_windows(values[:3], [0, 1, 0])


def test_texts_that_fit_give_exactly_todays_output(sentences, tokenizer, tmp_path):
    import keras

    from bert_tf.model.config import BertConfig

    bert_config = BertConfig.from_dict(TINY)
    examples = [InputExample(f"dev-{i}", text, None, label)
                for i, (text, label) in enumerate(sentences[:45])]
    plain = prepare(examples, ["0", "1"], tokenizer, 64, tmp_path / "plain", bert_config)
    windowed = prepare(examples, ["0", "1"], tokenizer, 64, tmp_path / "windowed", bert_config,
                       doc_stride=16)
    assert windowed.config.records["eval"].count == plain.config.records["eval"].count == 48
    keras.utils.set_random_seed(0)
    model = plain.build_model()
    model.classifier.projection.output_bias.assign([0.05, -0.05])
    expected_results, expected_lines = run_task(plain, model, tmp_path / "plain")
    results, lines = run_task(windowed, model, tmp_path / "windowed")
    assert len(lines) == 45 and lines == expected_lines
    # The same results; the losses are means summed in another order (per example, then
    # over the examples), which may move their last bit (measured: 1 unit in the last place).
    assert results.keys() == expected_results.keys()
    for key, value in results.items():
        assert value == pytest.approx(expected_results[key], rel=1e-6, abs=0), key


class TokenMaxModel:
    """logits[c] = the max over the input's tokens (input_mask 1) of score[token id, c]: a
    deterministic model without attention, so a token's contribution does not depend on its
    neighbours or its position."""

    def __init__(self, num_labels, seed=0):
        import tensorflow as tf
        rng = np.random.default_rng(seed)
        self.scores = tf.constant(rng.normal(size=(TINY["vocab_size"], num_labels)),
                                  tf.float32)

    def __call__(self, inputs, training=False, return_encoder_outputs=False):
        import tensorflow as tf
        per_token = tf.gather(self.scores, inputs["input_ids"])
        mask = tf.cast(inputs["input_mask"], tf.bool)[:, :, None]
        return {"logits": tf.reduce_max(tf.where(mask, per_token, -1e9), axis=1)}


@pytest.mark.parametrize("multi_label", [False, True], ids=["softmax", "multi-label"])
def test_long_texts_give_the_one_window_answer(sentences, tokenizer, tmp_path, multi_label):
    documents = [" ".join(text for text, _ in sentences[i:i + 6]) for i in range(0, 60, 6)]
    labels = ["0", "1", "2"]
    examples = [InputExample(f"doc-{i}", text, None, (labels[i % 3],) if multi_label
                             else labels[i % 3]) for i, text in enumerate(documents)]
    # Pairs: a short first text (kept whole: at most half the room) beside windows over a
    # long second one.
    short = [text for text, _ in sentences[100:] if len(text.split()) <= 8]
    examples += [InputExample(f"pair-{i}", short[i], text,
                              (labels[i % 3],) if multi_label else labels[i % 3])
                 for i, text in enumerate(documents[:5])]
    options = dict(multi_label=multi_label)
    model = TokenMaxModel(len(labels))
    _, whole = run_task(prepare(examples, labels, tokenizer, 512, tmp_path / "whole",
                                **options), model, tmp_path / "whole")
    _, truncated = run_task(prepare(examples, labels, tokenizer, 32, tmp_path / "truncated",
                                    **options), model, tmp_path / "truncated")
    windowed_task = prepare(examples, labels, tokenizer, 32, tmp_path / "max", doc_stride=10,
                            window_pooling="max", bucket_by_length=True, **options)
    _, windowed = run_task(windowed_task, model, tmp_path / "max")
    assert len(whole) == len(windowed) == len(examples) == 15
    assert windowed == whole
    assert sum(a != b for a, b in zip(truncated, whole)) >= 5  # truncation loses the tail

    # Mean pooling: the mean of the windows' logits, computed here from the records.
    import tensorflow as tf

    mean_task = prepare(examples, labels, tokenizer, 32, tmp_path / "mean", doc_stride=10,
                        **options)
    records = [tf.io.parse_single_example(r, mean_task.feature_spec("predict")) for r in
               tf.data.TFRecordDataset(mean_task.config.records["predict"].paths[0])]
    example_ids = np.array([int(r["example_id"]) for r in records])
    assert example_ids.tolist() == sorted(example_ids.tolist(), key=lambda i: (i < 0, i))
    real = example_ids >= 0
    assert np.bincount(example_ids[real]).min() >= 3  # every text in windows
    logits = np.concatenate([model({k: tf.cast(r[k][None], tf.int32) for k in
                                    ("input_ids", "input_mask")})["logits"].numpy()
                             for r in records])
    means = np.array([logits[example_ids == i].astype(np.float64).mean(axis=0)
                      for i in range(len(examples))], np.float32)
    expected = (tf.sigmoid(means) if multi_label else tf.nn.softmax(means)).numpy()
    _, lines = run_task(mean_task, model, tmp_path / "mean")
    np.testing.assert_allclose([[float(v) for v in line.split("\t")] for line in lines],
                               expected, rtol=1e-6)


@pytest.mark.slow
def test_run_classifier_doc_stride_equals_the_plain_run_where_texts_fit(sentences, tokenizer,
                                                                         tmp_path,
                                                                         uncased_vocab):
    """Eval and predict of a classifier checkpoint on short sentences and long documents
    through the command line with --doc_stride: test_results.tsv has a line per example,
    equal to the plain task's (in process, the same checkpoint) where the text fits; the log
    counts the windows; eval_results.txt has the plain run's keys."""
    import json

    from bert_tf.model.checkpoints import load_checkpoint, write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertClassifier

    bert_config = BertConfig.from_dict(TINY)
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY))
    checkpoint = write_tf1_checkpoint(BertClassifier(bert_config, 2),
                                      tmp_path / "model" / "model.ckpt")
    data = tmp_path / "data"
    data.mkdir()
    rows = sentences[:20] + [(" ".join(t for t, _ in sentences[i:i + 5]), "1")
                             for i in range(20, 40, 5)]
    for name in ("dev.tsv", "test.tsv"):
        (data / name).write_text("".join(f"{text}\t{label}\n" for text, label in rows))
    status, log = run_command_line("run.run_classifier", dict(
        task_name="tsv", data_dir=data, text_a_column=0, label_column=1, label_list="0,1",
        vocab_file=uncased_vocab, bert_config_file=tmp_path / "bert_config.json",
        init_checkpoint=checkpoint, output_dir=tmp_path / "windowed", max_seq_length=48,
        do_eval=True, do_predict=True, doc_stride=16))
    assert status == 0, log[-3000:]
    assert "eval: 24 examples in " in log and " windows (+" in log
    lines = (tmp_path / "windowed" / "test_results.tsv").read_text().splitlines()

    examples = [InputExample(f"dev-{i}", text, None, label)
                for i, (text, label) in enumerate(rows)]
    plain = prepare(examples, ["0", "1"], tokenizer, 48, tmp_path / "plain", bert_config)
    model = plain.build_model()
    load_checkpoint(model, checkpoint)
    plain_results, plain_lines = run_task(plain, model, tmp_path / "plain")
    assert len(lines) == len(plain_lines) == 24
    assert lines[:20] == plain_lines[:20]  # the sentences fit in one window
    assert lines[20:] != plain_lines[20:]
    keys = [line.split(" = ")[0] for line in (tmp_path / "windowed" / "eval_results.txt")
            .read_text().splitlines()]
    assert keys == sorted(plain_results)

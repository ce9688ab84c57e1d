"""run.run_squad end to end against the original's run_squad (subprocesses for ours).

The oracle is the reference release's own pipeline: read_squad_examples,
convert_examples_to_features and FeatureWriter write the records, its model_fn (create_model,
driven without Estimator as TPUEstimator would) gives the logits from a TF1 checkpoint in the
original naming with the SQuAD head (cls/squad/output_weights, output_bias), and its
write_predictions writes the files. On slices of the real dev v1.1 and v2.0 sets, with windows
small enough that long paragraphs take several:
- our predictions.json equals the original's; nbest_predictions.json has the same answers in
  the same order with the same probabilities and logits (float tolerance), and so has
  null_odds.json (v2.0);
- eval_results.txt holds the official evaluation of those predictions;
- our training loss on a batch equals the original's total_loss on it;
- training then predicting runs end to end and answers every question.
"""
import json
import os
import sys

import numpy as np
import pytest

from conftest import eval_history, read_eval_results, stub_estimator
from test_classifier_run import run, tf1_tensor_shapes

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 30522, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
        "type_vocab_size": 2, "initializer_range": 0.02}
WINDOWS = {"max_seq_length": 96, "doc_stride": 32, "max_query_length": 24}
GLOBAL_STEP = 5


@pytest.fixture(scope="module")
def reference(rs):
    """(run_squad module, a stand-in for tf.estimator's names)."""
    return rs, stub_estimator(rs)


def dev_slice(shared_data, version, articles, paragraphs):
    data = json.loads((shared_data / "SQuAD" / f"dev-v{version}.json").read_text("utf-8"))
    return {"version": version,
            "data": [dict(a, paragraphs=a["paragraphs"][:paragraphs])
                     for a in data["data"][:articles]]}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, shared_data, uncased_vocab, refbert, reference):
    """Dev slices (v1.1, v2.0, and v1.1 in the training format: first answer only), the tiny
    config, and a TF1 checkpoint of the original's SQuAD graph (random weights, a non-zero
    head bias, global_step 5)."""
    rs, _ = reference
    root = tmp_path_factory.mktemp("run_squad")
    files = {}
    for version in ("1.1", "2.0"):
        files[version] = root / f"dev-v{version}.json"
        files[version].write_text(json.dumps(dev_slice(shared_data, version, 2, 3)), "utf-8")
    train = dev_slice(shared_data, "1.1", 1, 6)
    for paragraph in train["data"][0]["paragraphs"]:
        for qa in paragraph["qas"]:
            qa["answers"] = qa["answers"][:1]
    files["train"] = root / "train-v1.1.json"
    files["train"].write_text(json.dumps(train), "utf-8")
    config = root / "bert_config.json"
    config.write_text(json.dumps(TINY))
    v1 = refbert.v1
    with v1.Graph().as_default(), tf1_tensor_shapes(v1):
        v1.set_random_seed(5)
        ids = v1.zeros([1, WINDOWS["max_seq_length"]], v1.int32)
        rs.create_model(refbert.modeling.BertConfig.from_dict(TINY), False, ids, ids, ids, False)
        bias = [v for v in v1.global_variables() if v.name == "cls/squad/output_bias:0"][0]
        step = v1.train.get_or_create_global_step()
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run([bias.assign([0.4, -0.3]), step.assign(GLOBAL_STEP)])
            checkpoint = v1.train.Saver().save(sess, str(root / "original" / "model.ckpt"),
                                               global_step=GLOBAL_STEP)
    return {"root": root, "files": files, "config": str(config), "checkpoint": checkpoint,
            "vocab": str(uncased_vocab)}


def reference_features(rs, refbert, workspace, path, is_training, records):
    """The original's examples and features of `path`, its records written to `records`."""
    examples = rs.read_squad_examples(str(path), is_training=is_training)
    tokenizer = refbert.tokenization.FullTokenizer(workspace["vocab"], do_lower_case=True)
    writer = rs.FeatureWriter(filename=str(records), is_training=is_training)
    features = []

    def append(feature):
        features.append(feature)
        writer.process_feature(feature)

    rs.convert_examples_to_features(examples, tokenizer, is_training=is_training,
                                    output_fn=append, **WINDOWS)
    writer.close()
    return examples, features


def reference_predictions(reference, refbert, ref_flags, workspace, version, out_dir,
                          path=None):
    """The original's three files for the dev slice of `version` (or `path`), from its
    model's logits."""
    rs, spec = reference
    v1 = refbert.v1
    ref_flags(version_2_with_negative=version == "2.0", verbose_logging=False,
              null_score_diff_threshold=0.0)
    records = out_dir / "eval.tf_record"
    examples, features = reference_features(rs, refbert, workspace,
                                            path or workspace["files"][version], False, records)
    results = []
    with v1.Graph().as_default(), tf1_tensor_shapes(v1):
        input_fn = rs.input_fn_builder(str(records), WINDOWS["max_seq_length"], False, False)
        batch = v1.data.make_one_shot_iterator(input_fn({"batch_size": 8})).get_next()
        model_fn = rs.model_fn_builder(refbert.modeling.BertConfig.from_dict(TINY),
                                       workspace["checkpoint"], 5e-5, None, None, False, False)
        model_fn(batch, None, "infer", {})
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            while True:
                try:
                    out = sess.run(spec.last["predictions"])
                except v1.errors.OutOfRangeError:
                    break
                for u, s, e in zip(out["unique_ids"], out["start_logits"], out["end_logits"]):
                    results.append(rs.RawResult(unique_id=int(u),
                                                start_logits=[float(x) for x in s],
                                                end_logits=[float(x) for x in e]))
    names = ("predictions.json", "nbest_predictions.json", "null_odds.json")
    rs.write_predictions(examples, features, results, 20, 30, True,
                         *(str(out_dir / name) for name in names))
    return {name: json.loads((out_dir / name).read_text()) for name in names
            if (out_dir / name).exists()}


def squad_command(workspace, output_dir, **flags):
    line = [sys.executable, "-m", "run.run_squad", f"--vocab_file={workspace['vocab']}",
            f"--bert_config_file={workspace['config']}", "--do_lower_case",
            f"--output_dir={output_dir}"]
    line += [f"--{name}={value}" for name, value in WINDOWS.items()]
    for name, value in flags.items():
        line.append(f"--{name}" if value is True else f"--{name}={value}")
    return line


@pytest.mark.parametrize("version", ["1.1", "2.0"])
def test_predictions_equal_the_originals(reference, refbert, ref_flags, workspace, version,
                                         tmp_path_factory):
    from bert_tf.tasks.squad import metrics as squad_metrics

    theirs = reference_predictions(reference, refbert, ref_flags, workspace, version,
                                   tmp_path_factory.mktemp(f"reference_{version}"))
    output_dir = tmp_path_factory.mktemp(f"ours_{version}")
    extra = {"version_2_with_negative": True} if version == "2.0" else {}
    log = run(squad_command(workspace, output_dir, do_predict=True,
                            predict_file=workspace["files"][version],
                            init_checkpoint=workspace["checkpoint"], predict_batch_size=8,
                            **extra))
    assert "post-processing:" in log

    ours = json.loads((output_dir / "predictions.json").read_text())
    assert ours == theirs["predictions.json"]
    assert len(ours) > 40 and sum(bool(text) for text in ours.values()) > 10

    ours_nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    assert list(ours_nbest) == list(theirs["nbest_predictions.json"])
    for qid, entries in theirs["nbest_predictions.json"].items():
        mine = ours_nbest[qid]
        assert [e["text"] for e in mine] == [e["text"] for e in entries], qid
        for key in ("probability", "start_logit", "end_logit"):
            np.testing.assert_allclose([e[key] for e in mine], [e[key] for e in entries],
                                       rtol=1e-5, atol=1e-5)
    if version == "2.0":
        ours_odds = json.loads((output_dir / "null_odds.json").read_text())
        assert list(ours_odds) == list(theirs["null_odds.json"])
        np.testing.assert_allclose(list(ours_odds.values()),
                                   list(theirs["null_odds.json"].values()), atol=1e-5)
    else:
        assert not (output_dir / "null_odds.json").exists()

    dataset = json.loads(workspace["files"][version].read_text())["data"]
    expected = (squad_metrics.evaluate_v2(dataset, theirs["predictions.json"],
                                          na_probs=theirs["null_odds.json"])
                if version == "2.0" else
                squad_metrics.evaluate_v1(dataset, theirs["predictions.json"]))
    written = read_eval_results(output_dir / "eval_results.txt")
    assert set(written) == set(expected)
    for key, value in expected.items():
        assert float(written[key]) == pytest.approx(float(value), abs=1e-9), key


def with_windowless_questions(workspace, version):
    """The dev slice of `version` with two paragraphs whose questions get no window (an empty
    context, a context of spaces) inserted before and after the others; its path."""
    data = json.loads(workspace["files"][version].read_text())
    paragraphs = data["data"][0]["paragraphs"]
    paragraphs.insert(0, {"context": "", "qas": [{"id": "no_window_1", "question": "Who?",
                                                 "answers": [], "is_impossible": True}]})
    paragraphs.append({"context": "  \t ", "qas": [{"id": "no_window_2", "question": "When?",
                                                    "answers": [], "is_impossible": True}]})
    if version == "1.1":  # v1.1 scoring needs an answer for every question
        for qa in paragraphs[0]["qas"] + paragraphs[-1]["qas"]:
            del qa["is_impossible"]
            qa["answers"] = [{"text": "nowhere", "answer_start": 0}]
    path = workspace["root"] / f"windowless-v{version}.json"
    path.write_text(json.dumps(data), "utf-8")
    return path


def test_questions_without_a_window_predicted_as_the_original(reference, refbert, ref_flags,
                                                               workspace, tmp_path_factory):
    """A question without a window among others (v1.1): the original's nonce answer "empty",
    the other questions as the original predicts them; all three files equal."""
    path = with_windowless_questions(workspace, "1.1")
    theirs = reference_predictions(reference, refbert, ref_flags, workspace, "1.1",
                                   tmp_path_factory.mktemp("reference_windowless"), path=path)
    output_dir = tmp_path_factory.mktemp("ours_windowless")
    log = run(squad_command(workspace, output_dir, do_predict=True, predict_file=path,
                            init_checkpoint=workspace["checkpoint"], predict_batch_size=8))
    ours = json.loads((output_dir / "predictions.json").read_text())
    assert ours == theirs["predictions.json"]
    assert ours["no_window_1"] == ours["no_window_2"] == "empty"
    assert sum(text != "empty" for text in ours.values()) > 40
    ours_nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    assert list(ours_nbest) == list(theirs["nbest_predictions.json"])
    for qid in ("no_window_1", "no_window_2"):
        assert ours_nbest[qid] == theirs["nbest_predictions.json"][qid] == [
            {"text": "empty", "probability": 1.0, "start_logit": 0.0, "end_logit": 0.0}]
    assert "eval_results.txt" in log


def test_questions_without_a_window_squad_2(reference, refbert, ref_flags, workspace,
                                            tmp_path_factory):
    """SQuAD 2.0: the original fails on a question without a window (IndexError: its null
    candidate indexes the question's windows); ours predicts "" (no answer: there is no
    context), its null odds the original's initial null score, and every other question as
    the original."""
    path = with_windowless_questions(workspace, "2.0")
    with pytest.raises(IndexError):
        reference_predictions(reference, refbert, ref_flags, workspace, "2.0",
                              tmp_path_factory.mktemp("reference_windowless_2"), path=path)
    theirs = reference_predictions(reference, refbert, ref_flags, workspace, "2.0",
                                   tmp_path_factory.mktemp("reference_2"))
    output_dir = tmp_path_factory.mktemp("ours_windowless_2")
    run(squad_command(workspace, output_dir, do_predict=True, predict_file=path,
                      init_checkpoint=workspace["checkpoint"], predict_batch_size=8,
                      version_2_with_negative=True))
    ours = json.loads((output_dir / "predictions.json").read_text())
    odds = json.loads((output_dir / "null_odds.json").read_text())
    nbest = json.loads((output_dir / "nbest_predictions.json").read_text())
    for qid in ("no_window_1", "no_window_2"):
        assert ours.pop(qid) == ""
        assert odds.pop(qid) == 1000000
        assert nbest[qid] == [{"text": "", "probability": 1.0, "start_logit": 0.0,
                               "end_logit": 0.0}]
    assert ours == theirs["predictions.json"]
    np.testing.assert_allclose([odds[q] for q in theirs["null_odds.json"]],
                               list(theirs["null_odds.json"].values()), atol=1e-5)


def test_training_loss_equals_the_originals(reference, refbert, ref_flags, workspace, tmp_path):
    """Without dropout (the config's probabilities 0), our loss on the original's training
    records equals its model_fn's total_loss."""
    import tensorflow as tf

    from bert_tf.model.config import BertConfig
    from bert_tf.tasks.squad.preprocessor import squad_feature_spec
    from bert_tf.tasks.base import Records
    from bert_tf.tasks.squad.task import SquadConfig, SquadTask

    rs, spec = reference
    v1 = refbert.v1
    ref_flags(version_2_with_negative=False)
    records = tmp_path / "train.tf_record"
    reference_features(rs, refbert, workspace, workspace["files"]["train"], True, records)
    no_dropout = dict(TINY, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    feature_spec = squad_feature_spec(WINDOWS["max_seq_length"], True)

    def first_batch(parse):  # the first 16 records, in file order
        return tf.data.TFRecordDataset(str(records)).take(16).batch(16).map(
            lambda r: {k: tf.cast(v, tf.int32) for k, v in parse(r, feature_spec).items()})

    with v1.Graph().as_default(), tf1_tensor_shapes(v1):
        batch = v1.data.make_one_shot_iterator(first_batch(v1.io.parse_example)).get_next()
        model_fn = rs.model_fn_builder(refbert.modeling.BertConfig.from_dict(no_dropout),
                                       workspace["checkpoint"], 5e-5, 10, 1, False, False)
        model_fn(batch, None, "train", {})
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            theirs = float(sess.run(spec.last["loss"]))

    task = SquadTask(SquadConfig(bert_config=BertConfig.from_dict(no_dropout),
                                 max_seq_length=WINDOWS["max_seq_length"],
                                 records={"train": Records((str(records),))}))
    model = task.build_model()
    task.initialize(model, workspace["checkpoint"], log=lambda message: None)
    batch = next(iter(first_batch(tf.io.parse_example)))
    outputs = task.outputs(model, batch, training=True)
    ours = float(task.train_metrics(batch, outputs, task.normalizers(batch))["loss"])
    assert ours == pytest.approx(theirs, rel=1e-5)
    assert 1.0 < ours < 20.0


def test_train_then_predict_answers_every_question(workspace, tmp_path):
    output_dir = tmp_path / "out"
    log = run(squad_command(workspace, output_dir, do_train=True, do_predict=True,
                            train_file=workspace["files"]["train"],
                            predict_file=workspace["files"]["1.1"],
                            init_checkpoint=workspace["checkpoint"], train_batch_size=8,
                            num_train_epochs=0.5, save_checkpoints_steps=1000,
                            export_dir=tmp_path / "exported"))
    assert "[train] done:" in log
    questions = [qa["id"] for a in json.loads(workspace["files"]["1.1"].read_text())["data"]
                 for p in a["paragraphs"] for qa in p["qas"]]
    predictions = json.loads((output_dir / "predictions.json").read_text())
    assert sorted(predictions) == sorted(questions)
    assert os.path.exists(output_dir / "train.tf_record")
    results = read_eval_results(output_dir / "eval_results.txt")
    assert set(results) == {"exact_match", "f1"}
    check_export_packs_as_run_squad(workspace, output_dir, tmp_path / "exported")


def test_eval_and_predict_infer_once(workspace, tmp_path):
    """--do_eval --do_predict read the same windows with the same weights: one inference pass
    and one post-processing, and predictions.json scores (the official v1.1 evaluation) as
    eval_results.txt says."""
    from bert_tf.tasks.squad import metrics as squad_metrics

    output_dir = tmp_path / "out"
    log = run(squad_command(workspace, output_dir, do_train=True, do_eval=True, do_predict=True,
                            train_file=workspace["files"]["train"],
                            predict_file=workspace["files"]["1.1"],
                            init_checkpoint=workspace["checkpoint"], train_batch_size=8,
                            eval_batch_size=6, predict_batch_size=4, num_train_epochs=0.5,
                            save_checkpoints_steps=1000))
    assert log.count("***** Running evaluation") == 1
    assert "***** Running prediction" not in log
    assert log.count("post-processing:") == 1
    results = read_eval_results(output_dir / "eval_results.txt")
    dataset = json.loads(workspace["files"]["1.1"].read_text())["data"]
    predictions = json.loads((output_dir / "predictions.json").read_text())
    scores = squad_metrics.evaluate_v1(dataset, predictions)
    assert scores["f1"] == pytest.approx(float(results["f1"]), abs=1e-6)
    assert scores["exact_match"] == pytest.approx(float(results["exact_match"]), abs=1e-6)
    assert (output_dir / "nbest_predictions.json").exists()


def check_export_packs_as_run_squad(workspace, output_dir, exported):
    """The --export_dir's serve_text_pair packs a question as the run did: cut to its
    --max_query_length (24 here, not export_savedmodel's default 64): its logits are the
    trained model's on that packing."""
    import tensorflow as tf

    from bert_tf import tokenization
    from bert_tf.model.config import BertConfig
    from bert_tf.model.models import BertSpanLabeler

    tokenizer = tokenization.FullTokenizer(str(workspace["vocab"]), do_lower_case=True)
    question = " ".join(["which of the many famous old stadiums"] * 6)  # > 24 pieces
    context = "The game was played at Levi's Stadium in Santa Clara, California."
    query = tokenizer.tokenize(question)
    assert len(query) > WINDOWS["max_query_length"]
    query = query[:WINDOWS["max_query_length"]]
    doc = tokenizer.tokenize(context)
    tokens = ["[CLS]"] + query + ["[SEP]"] + doc + ["[SEP]"]
    length, pad = len(tokens), WINDOWS["max_seq_length"] - len(tokens)
    inputs = {"input_ids": np.array([tokenizer.convert_tokens_to_ids(tokens) + [0] * pad]),
              "input_mask": np.array([[1] * length + [0] * pad]),
              "segment_ids": np.array([[0] * (len(query) + 2) + [1] * (len(doc) + 1)
                                       + [0] * pad])}
    model = BertSpanLabeler(BertConfig.from_json_file(str(workspace["config"])))
    model({name: tf.constant(value, tf.int32) for name, value in inputs.items()})
    tf.train.Checkpoint(model=model).restore(
        tf.train.latest_checkpoint(str(output_dir))).expect_partial()
    outputs = model({name: tf.constant(value, tf.int32) for name, value in inputs.items()},
                    training=False)
    served = tf.saved_model.load(str(exported)).signatures["serve_text_pair"](
        text_a=tf.constant([question]), text_b=tf.constant([context]))
    start_logits = outputs["start_logits"].numpy()[0]
    end_logits = outputs["end_logits"].numpy()[0]
    context_positions = range(len(query) + 2, length - 1)
    def best(logits):  # the n-best (20) among the context's positions
        return [p for p in np.argsort(-logits, kind="stable") if p in context_positions][:20]

    scores = [start_logits[s] + end_logits[e]  # the original's max answer length (30)
              for s in best(start_logits) for e in best(end_logits) if s <= e < s + 30]
    np.testing.assert_allclose(served["score"].numpy()[0], max(scores) if scores else 0.0,
                               rtol=1e-5, atol=1e-5)


def test_eval_during_training_keeps_the_best_f1(workspace, tmp_path):
    """--do_eval scores --predict_file after every checkpoint (the official v1.1 numbers);
    the kept checkpoint is the first of the best F1 among them, and the predictions come from
    it: their F1 (the official evaluation of predictions.json) is that evaluation's."""
    from bert_tf.tasks.squad import metrics as squad_metrics

    output_dir = tmp_path / "out"
    log = run(squad_command(workspace, output_dir, do_train=True, do_eval=True, do_predict=True,
                            eval_during_training=True, keep_best_checkpoint=True,
                            early_stopping_patience=3, train_file=workspace["files"]["train"],
                            predict_file=workspace["files"]["1.1"],
                            init_checkpoint=workspace["checkpoint"], train_batch_size=8,
                            eval_batch_size=6, predict_batch_size=4, num_train_epochs=2,
                            learning_rate=3e-3, warmup_proportion=0, save_checkpoints_steps=1,
                            seed=3))
    history = eval_history(log, "f1")
    best_step = min(history, key=lambda step: (-history[step], step))
    # The oracle of the stop: the third evaluation in a row not above the best before it.
    best, without, stop = -1.0, 0, None
    for step in sorted(history):
        without = 0 if history[step] > best else without + 1
        best = max(best, history[step])
        if without == 3:
            stop = step
            break
    # The data make it stop early, after a best that is not the last evaluation.
    assert stop is not None and stop == max(history) and best_step < stop, history
    results = read_eval_results(output_dir / "eval_results.txt")
    assert int(results["best_step"]) == int(results["global_step"]) == best_step
    assert int(results["early_stopping_step"]) == stop
    assert float(results["f1"]) == pytest.approx(history[best_step], abs=1e-6)
    dataset = json.loads(workspace["files"]["1.1"].read_text())["data"]
    predictions = json.loads((output_dir / "predictions.json").read_text())
    assert squad_metrics.evaluate_v1(dataset, predictions)["f1"] == pytest.approx(
        history[best_step], abs=1e-6)
    with open(output_dir / "best" / "best_checkpoint.json") as f:
        assert json.load(f)["checkpoint"] == f"model.ckpt-{best_step}"


@pytest.mark.parametrize("flags, expected", [
    ({"do_eval": True, "predict_file": "TRAIN"}, None),
    ({"do_train": True, "train_file": "TRAIN", "keep_best_checkpoint": True},
     "--keep_best_checkpoint"),
])
def test_eval_needs_a_scored_predict_file(workspace, tmp_path, flags, expected):
    """--do_eval with a --predict_file whose questions have no answers (a test file), and the
    best checkpoint without evaluation: one error line, nothing written (--do_eval without
    --predict_file: tests/test_finetuning_errors.py)."""
    from conftest import assert_one_line_error
    test_file = tmp_path / "test.json"
    data = json.loads(workspace["files"]["1.1"].read_text())
    for article in data["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                del qa["answers"]
    test_file.write_text(json.dumps(data), "utf-8")
    flags = {name: test_file if value == "TRAIN" and name == "predict_file" else
             workspace["files"]["train"] if value == "TRAIN" else value
             for name, value in flags.items()}
    output_dir = tmp_path / "out"
    line = assert_one_line_error("run.run_squad", dict(
        vocab_file=workspace["vocab"], bert_config_file=workspace["config"],
        output_dir=output_dir, **WINDOWS, **flags), expected or "--predict_file")
    if expected is None:
        assert f"{test_file}: no question has an answer" in line
    assert not output_dir.exists() or not os.listdir(output_dir)

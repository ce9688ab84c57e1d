"""Feature extraction as a task on the runner
(bert_tf.tasks.encoder.extraction.FeatureExtractionTask): a predict-only run without an
output_dir, whose predictions stream to the JSONL file; the same lines on one device and on two
replicas. (run.extract_features against the original release:
tests/tasks/encoder/test_extract_features.py.)"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import PROJECT_ROOT

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 20, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 32, "max_position_embeddings": 16, "type_vocab_size": 2}
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "man", "went", "to", "store",
         "he", "bought", "milk", ".", ",", "a", "##s", "hello", "world", "!"]
LINES = ["Hello world!", "The man went to the store. ||| He bought milk.", "",
         "the stores , the man ||| a", "hello " * 20, "milk"]
SEQ = 12

RUN = """
import sys
from bert_tf.model.config import BertConfig
from bert_tf.tasks.encoder.extraction import prepare_task, read_examples
from bert_tf.text.fast_tokenization import FastTokenizer
from bert_tf.training import distribution, runner
from bert_tf.training.settings import RunSettings
root, strategy, output = sys.argv[1:4]
config = BertConfig.from_json_file(root + "/bert_config.json")
settings = RunSettings(output_dir=None, do_predict=True, init_checkpoint=root + "/ckpt",
                       predict_batch_size=4, distribution_strategy=strategy, num_cpu_devices=2)
runner.build_strategy(settings)  # before the data's ops: Mirrored splits the CPU first
task = prepare_task(config, FastTokenizer(root + "/vocab.txt"), SEQ, layer_indexes=[-1, 0],
                    predict_batch_size=4, output_file=output,
                    examples=read_examples(root + "/input.txt"), progress=False).task
runner.run(task, settings)
"""


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    from bert_tf.model.checkpoints import write_tf1_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder

    root = tmp_path_factory.mktemp("features")
    (root / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (root / "bert_config.json").write_text(json.dumps(TINY))
    (root / "input.txt").write_text("\n".join(LINES) + "\n")
    write_tf1_checkpoint(BertEncoder(BertConfig.from_dict(TINY)), root / "ckpt" / "model.ckpt")
    return root


def run_in_subprocess(root, strategy, output):
    script = RUN.replace("SEQ", str(SEQ))
    result = subprocess.run([sys.executable, "-c", script, str(root), strategy, str(output)],
                            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                            env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"with {1 + (strategy == 'mirrored')} replica(s)" in result.stderr
    return output.read_bytes()


def test_the_task_streams_the_encoder_outputs_of_every_line_in_order(model_files, tmp_path):
    """In process: every line once, in order, padding dropped, the values those of the
    encoder's layers on the packed inputs; only the output file is written."""
    import tensorflow as tf

    from bert_tf.model.checkpoints import load_checkpoint
    from bert_tf.model.config import BertConfig
    from bert_tf.model.encoder import BertEncoder
    from bert_tf.tasks.encoder.extraction import feature_json, prepare_task
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.training import runner
    from bert_tf.training.settings import RunSettings

    config = BertConfig.from_json_file(str(model_files / "bert_config.json"))
    tokenizer = FastTokenizer(str(model_files / "vocab.txt"))
    output = tmp_path / "out" / "features.jsonl"
    task = prepare_task(config, tokenizer, SEQ, layer_indexes=[-1, 0], predict_batch_size=4,
                        output_file=str(output), input_file=str(model_files / "input.txt"),
                        progress=False).task
    settings = RunSettings(output_dir=None, do_predict=True, predict_batch_size=4,
                           init_checkpoint=str(model_files / "ckpt"))
    messages = []
    runner.run(task, settings, log=messages.append)
    assert os.listdir(tmp_path) == ["out"] and os.listdir(tmp_path / "out") == [output.name]
    assert any("0 new" in message for message in messages), messages  # the report line

    lines = output.read_text().splitlines(keepends=True)
    assert [json.loads(line)["linex_index"] for line in lines] == list(range(len(LINES)))
    # The same lines from the encoder called directly, one example at a time.
    encoder = BertEncoder(config)
    load_checkpoint(encoder, str(model_files / "ckpt"))
    examples, arrays = task.lines, task.arrays
    for k, (example, line) in enumerate(zip(examples, lines)):
        inputs = {name: tf.constant(arrays[name][k:k + 1])
                  for name in ("input_ids", "input_mask", "segment_ids")}
        layers = encoder(inputs, training=False)["encoder_outputs"]
        expected = feature_json(example, [-1, 0], [layers[-1][0].numpy(), layers[0][0].numpy()])
        got, want = json.loads(line), json.loads(expected)
        assert [f["token"] for f in got["features"]] == [f["token"] for f in want["features"]]
        for a, b in zip(got["features"], want["features"]):
            for la, lb in zip(a["layers"], b["layers"]):
                assert la["index"] == lb["index"]
                np.testing.assert_allclose(la["values"], lb["values"], atol=2.01e-6)
    assert [len(json.loads(line)["features"]) for line in lines] == [5, 12, 2, 10, 12, 3]
    # The writer gives the same bytes for outputs streamed batch by batch and for all of
    # them at once (a runner that does not stream); the values here from eager calls.
    model = task.build_model()
    load_checkpoint(model, str(model_files / "ckpt"))
    batches = [{name: value.numpy() for name, value in task.predict_outputs(
        batch, task.outputs(model, batch, training=False)).items()}
        for batch in task.dataset_fn("predict", 4)(None)]
    assert [len(batch["position"]) for batch in batches] == [4, 4]
    streamed, at_once = tmp_path / "streamed.jsonl", tmp_path / "at_once.jsonl"
    task.config.output_file = str(streamed)
    task.write_predictions(iter(batches), None)
    task.config.output_file = str(at_once)
    task.write_predictions({name: np.concatenate([b[name] for b in batches])
                            for name in batches[0]}, None)
    assert streamed.read_bytes() == at_once.read_bytes()
    assert len(streamed.read_bytes().splitlines()) == len(LINES)


def test_two_replicas_write_the_lines_of_one_device(model_files, tmp_path):
    one = run_in_subprocess(model_files, "one_device", tmp_path / "one.jsonl")
    two = run_in_subprocess(model_files, "mirrored", tmp_path / "two.jsonl")
    assert len(one.splitlines()) == len(two.splitlines()) == len(LINES)
    for line_one, line_two in zip(one.splitlines(), two.splitlines()):
        a, b = json.loads(line_one), json.loads(line_two)
        assert a["linex_index"] == b["linex_index"]
        assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
        for fa, fb in zip(a["features"], b["features"]):  # two examples a step instead of 4
            for la, lb in zip(fa["layers"], fb["layers"]):
                assert la["index"] == lb["index"]
                np.testing.assert_allclose(la["values"], lb["values"], atol=2.01e-6)


def test_settings_without_output_dir_only_predict(tmp_path):
    from bert_tf.errors import InputError
    from bert_tf.training.settings import RunSettings

    with pytest.raises(InputError, match="output_dir: required to train or evaluate"):
        RunSettings(output_dir=None, do_eval=True, init_checkpoint="x").validate()
    with pytest.raises(InputError, match="init_checkpoint: required without output_dir"):
        RunSettings(output_dir=None, do_predict=True).validate()
    RunSettings(output_dir=None, do_predict=True, init_checkpoint="x").validate()

"""run.extract_features against the original's extract_features logic on the same checkpoint.

The reference side uses the release's own `read_examples` and `convert_examples_to_features`,
its `modeling.BertModel` restored from the checkpoint as its `model_fn` does, and its JSON
formatting loop (copied from its `main`, which needs TPUEstimator, gone from TF 2.x).
"""
import collections
import json
import os
import subprocess
import sys

import numpy as np

from command_lines import run_line
from conftest import PROJECT_ROOT, command_env, strategy_line
from test_model import SMALL_CONFIG, build_reference, make_inputs

INPUT_LINES = [
    "Hello world, this is BERT.",
    "The man went to the store. ||| He bought a gallon of milk.",
    "",
    "Ünïcödé and 中文 characters are split ||| differently",
    " ".join(["a long sentence that will be truncated"] * 10) + " ||| and a second part too",
    "ends with no newline",
]
LAYERS = "-1,0,-3"
MAX_SEQ_LENGTH = 24


def reference_outputs(refbert, input_file, vocab_file, checkpoint, config,
                      layer_indexes=(-1, 0, -3)):
    """The original's features of each line (its read_examples and
    convert_examples_to_features) and its model's hidden states of `layer_indexes`
    ([lines, MAX_SEQ_LENGTH, hidden] each), restored from the checkpoint as its model_fn does."""
    v1, modeling = refbert.v1, refbert.modeling
    extract = refbert.import_reference("extract_features")
    tokenizer = refbert.tokenization.FullTokenizer(vocab_file=vocab_file, do_lower_case=True)
    examples = extract.read_examples(input_file)
    features = extract.convert_examples_to_features(examples, MAX_SEQ_LENGTH, tokenizer)
    with v1.Graph().as_default():
        model = modeling.BertModel(
            config=modeling.BertConfig.from_dict(config), is_training=False,
            input_ids=v1.constant([f.input_ids for f in features]),
            input_mask=v1.constant([f.input_mask for f in features]),
            token_type_ids=v1.constant([f.input_type_ids for f in features]))
        assignment_map, _ = modeling.get_assignment_map_from_checkpoint(
            v1.trainable_variables(), checkpoint)
        v1.train.init_from_checkpoint(checkpoint, assignment_map)
        all_layers = model.get_all_encoder_layers()
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            outputs = session.run([all_layers[i] for i in layer_indexes])
    return features, outputs


def reference_jsonl(refbert, input_file, vocab_file, checkpoint, config):
    """What the original's extract_features writes (its functions, its model, its format)."""
    layer_indexes = [int(x) for x in LAYERS.split(",")]
    features, outputs = reference_outputs(refbert, input_file, vocab_file, checkpoint, config,
                                          layer_indexes)
    lines = []
    for n, feature in enumerate(features):
        result = {"layer_output_%d" % j: outputs[j][n] for j in range(len(layer_indexes))}
        # --- from the original's main() ---
        output_json = collections.OrderedDict()
        output_json["linex_index"] = feature.unique_id
        all_features = []
        for (i, token) in enumerate(feature.tokens):
            all_layers_json = []
            for (j, layer_index) in enumerate(layer_indexes):
                layer_output = result["layer_output_%d" % j]
                layers = collections.OrderedDict()
                layers["index"] = layer_index
                layers["values"] = [
                    round(float(x), 6) for x in layer_output[i:(i + 1)].flat
                ]
                all_layers_json.append(layers)
            features_json = collections.OrderedDict()
            features_json["token"] = token
            features_json["layers"] = all_layers_json
            all_features.append(features_json)
        output_json["features"] = all_features
        lines.append(json.dumps(output_json) + "\n")
    return lines


def run_cli(*args):
    return run_line([sys.executable, "-m", "run.extract_features", *args], command_env())


def test_extract_features_matches_original(refbert, uncased_vocab, tmp_path):
    config = dict(SMALL_CONFIG, vocab_size=30522, max_position_embeddings=MAX_SEQ_LENGTH,
                  type_vocab_size=2)
    checkpoint = tmp_path / "ckpt" / "bert_model.ckpt"
    build_reference(refbert, checkpoint, make_inputs(config=config), config=config)
    config_file = tmp_path / "bert_config.json"
    config_file.write_text(json.dumps(config))
    input_file = tmp_path / "input.txt"
    input_file.write_text("\n".join(INPUT_LINES), encoding="utf-8")
    output_file = tmp_path / "out" / "features.jsonl"

    result = run_cli(f"--input_file={input_file}", f"--output_file={output_file}",
                     f"--vocab_file={uncased_vocab}", f"--bert_config_file={config_file}",
                     f"--init_checkpoint={checkpoint}", f"--layers={LAYERS}",
                     f"--max_seq_length={MAX_SEQ_LENGTH}", "--batch_size=4")
    assert result.returncode == 0, result.stderr
    assert "[extract_features] done: 6 examples" in result.stderr
    assert "optimizer" not in strategy_line(result.stderr)  # it trains nothing

    expected = reference_jsonl(refbert, str(input_file), str(uncased_vocab), str(checkpoint),
                               config)
    ours = output_file.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(ours) == len(expected) == len(INPUT_LINES)
    exact = 0
    total = 0
    for our_line, their_line in zip(ours, expected):
        a, b = json.loads(our_line), json.loads(their_line)
        assert list(a) == ["linex_index", "features"]
        assert a["linex_index"] == b["linex_index"]
        assert [f["token"] for f in a["features"]] == [f["token"] for f in b["features"]]
        for fa, fb in zip(a["features"], b["features"]):
            assert [layer["index"] for layer in fa["layers"]] == [-1, 0, -3]
            for la, lb in zip(fa["layers"], fb["layers"]):
                assert la["index"] == lb["index"]
                va, vb = np.array(la["values"]), np.array(lb["values"])
                assert va.shape == vb.shape == (SMALL_CONFIG["hidden_size"],)
                # Same rounding; float32 op order may move the 6th decimal by one unit.
                assert np.max(np.abs(va - vb)) <= 2.01e-6
                exact += int(np.sum(va == vb))
                total += va.size
    # Rounded to 6 places, float32 values (|x| ~ 1) whose last bits differ round alike ~93% of
    # the time here; a different model (say, no attention mask) would get almost none equal.
    assert exact / total > 0.85


def test_extract_features_bad_input(tmp_path):
    result = run_cli(f"--input_file={tmp_path / 'missing.txt'}",
                     f"--output_file={tmp_path / 'out.jsonl'}", f"--init_checkpoint={tmp_path}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "missing.txt: input file not found" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


ROUNDING_CHECK = """
import json, sys
import numpy as np
from run.extract_features import round6
rng = np.random.RandomState(0)
values = np.concatenate([
    rng.randn(100000).astype(np.float32),
    (rng.randint(-5000, 5000, 20000) / 128).astype(np.float32),  # exact ties (x.5e-6)
    (rng.randn(20000) * 1e-5).astype(np.float32),  # tiny: repr uses exponents
    (rng.randn(20000) * 1e3).astype(np.float32),
    np.array([0.0, -0.0, 5e-7, -5e-7, 1.5e-6, 2.5e-6, 1e-7, -1e-7], np.float32)])
ours = json.dumps(round6(values).tolist())
original = json.dumps([round(float(x), 6) for x in values])
print("same" if ours == original else "different")
"""


def test_vectorised_rounding_is_pythons_round():
    """The writer's numpy rounding gives exactly the original's round(float(x), 6) strings.

    In a subprocess: run.extract_features defines the same absl flags as the reference's.
    """
    result = subprocess.run([sys.executable, "-c", ROUNDING_CHECK], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120,
                            env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    assert result.stdout.strip() == "same", result.stderr

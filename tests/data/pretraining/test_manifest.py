"""The records' manifest and the named recipes: create_pretraining_data says how its records were
made, run_pretraining takes its settings from that and refuses what contradicts it.

Oracles: the flags given, the records counted and parsed by tf.data, the vocabulary's tokens
hashed here, and the output folder a user would load.
"""
import hashlib
import json
import shutil

import pytest
import tensorflow as tf

from conftest import PRETRAINING_CONFIG, assert_refused, run_command_line

CREATE = "data_tools.create_pretraining_data"
TRAIN = "run.run_pretraining"


def tokens_sha256(path):
    lines = open(path, "rb").read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return hashlib.sha256(b"\n".join(line.strip() for line in lines)).hexdigest()


def create(corpus, vocab, output, **flags):
    status, log = run_command_line(CREATE, dict(input_file=corpus, output_file=output,
                                                vocab_file=vocab, **flags))
    assert status == 0, log[-3000:]
    return json.loads((output.parent / (output.name + ".manifest.json")).read_text()), log


@pytest.fixture(scope="module")
def made(tmp_path_factory, shared_data, uncased_vocab):
    """Records with dynamic masks at 30% and length 64 in `dynamic/`, the original's in
    `original/`, a config, and a vocabulary whose tokens differ from the records'."""
    root = tmp_path_factory.mktemp("manifest")
    corpus = shared_data / "sample_text.txt"
    manifest, log = create(corpus, uncased_vocab, root / "dynamic" / "train.tfrecord",
                           objective="mlm", masking="dynamic", masked_lm_prob=0.3,
                           max_seq_length=64, max_predictions_per_seq=20, random_seed=3)
    original, _ = create(corpus, uncased_vocab, root / "original" / "train.tfrecord",
                         max_seq_length=64, dupe_factor=1)
    (root / "bert_config.json").write_text(json.dumps(PRETRAINING_CONFIG))
    lines = uncased_vocab.read_text(encoding="utf-8").splitlines()
    lines[1000], lines[1001] = lines[1001], lines[1000]
    (root / "other_vocab.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dict(root=root, corpus=corpus, manifest=manifest, original=original, log=log)


def train_flags(made, records, output_dir, **flags):
    return dict(dict(bert_config_file=made["root"] / "bert_config.json",
                     input_file=f"{records}/*", output_dir=output_dir, do_train=True,
                     num_train_steps=2, train_batch_size=4), **flags)


def test_the_manifest_says_how_the_records_were_made(made, uncased_vocab):
    manifest, folder = made["manifest"], made["root"] / "dynamic"
    expected = dict(recipe="original", objective="mlm", masking="dynamic", masked_lm_prob=0.3,
                    max_predictions_per_seq=20, max_seq_length=64, pack_sequences=False,
                    do_lower_case=True, dupe_factor=1, random_seed=3, cut="sentences",
                    vocabulary_sha256=tokens_sha256(uncased_vocab), vocab_size=30522,
                    mask_id=uncased_vocab.read_text().splitlines().index("[MASK]"))
    assert {key: manifest[key] for key in expected} == expected
    records = folder / "train.tfrecord"
    count = sum(1 for _ in tf.data.TFRecordDataset(str(records)))
    assert manifest["files"] == {"train.tfrecord": {"records": count,
                                                    "bytes": records.stat().st_size}}
    assert manifest["vocabulary"] == "train.tfrecord.vocab.txt"
    assert tokens_sha256(folder / "train.tfrecord.vocab.txt") == tokens_sha256(uncased_vocab)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["train.tfrecord", "train.tfrecord.manifest.json", "train.tfrecord.vocab.txt"])
    assert made["original"]["cut"] == "sentences"
    assert (made["original"]["objective"], made["original"]["masking"]) == ("mlm_nsp", "static")


def test_run_pretraining_needs_no_flag_repeated(made, uncased_vocab, tmp_path):
    """Only the config, the records and the steps: the length, the masking rate, the objective,
    the vocabulary and the casing come from the manifest; the output folder is a model
    directory with them."""
    folder = made["root"] / "dynamic"
    status, log = run_command_line(TRAIN, train_flags(made, folder, tmp_path / "out"))
    assert status == 0, log[-3000:]
    taken = [line for line in log.splitlines() if line.startswith("*** from ")
             and "manifest" in line]
    assert len(taken) == 1, log[-3000:]
    for flag in ("--max_seq_length=64", "--max_predictions_per_seq=20", "--objective=mlm",
                 "--masked_lm_prob=0.3", "--do_lower_case", "--vocab_file="):
        assert flag in taken[0], taken[0]
    record = json.loads((tmp_path / "out" / "bert_tf_model.json").read_text())
    assert (record["objective"], record["max_seq_length"], record["do_lower_case"]) == (
        "mlm", 64, True)
    assert tokens_sha256(tmp_path / "out" / "vocab.txt") == tokens_sha256(uncased_vocab)
    assert record["vocabulary_sha256"] == made["manifest"]["vocabulary_sha256"]


def test_packed_records_pass_the_layout_check(made, uncased_vocab, tmp_path):
    """Packed rows of either objective train on their manifest: masked-LM rows hold no
    per-sequence slots (the manifest's max_sequences_per_row is not in them), sentence-pair rows
    one per sequence."""
    for objective, masking in (("mlm", "dynamic"), ("mlm_nsp", "static")):
        folder = tmp_path / objective
        manifest, _ = create(made["corpus"], uncased_vocab, folder / "train.tfrecord",
                             objective=objective, masking=masking, pack_sequences=True,
                             max_seq_length=64, max_predictions_per_seq=20, dupe_factor=1)
        assert manifest["pack_sequences"] and manifest["max_sequences_per_row"] > 1
        status, log = run_command_line(TRAIN, train_flags(made, folder,
                                                          tmp_path / f"out-{objective}"))
        assert status == 0, log[-3000:]


def test_flags_that_contradict_the_records_are_refused(made, tmp_path):
    folder = made["root"] / "dynamic"
    output_dir = tmp_path / "out"
    for flags, expected in (
            (dict(max_seq_length=128), "--max_seq_length: 128 contradicts the records: "),
            (dict(masked_lm_prob=0.15), "--masked_lm_prob: 0.15 contradicts the records"),
            (dict(objective="mlm_nsp"), "--objective: mlm_nsp contradicts the records"),
            (dict(do_lower_case="false"), "--do_lower_case: false contradicts the records"),
            (dict(vocab_file=made["root"] / "other_vocab.txt"),
             "is not the vocabulary the records were made with"),
            (dict(recipe="efficient"), "--recipe: efficient, but the records were made with "
                                       "--recipe=original")):
        line = assert_refused(TRAIN, train_flags(made, folder, output_dir, **flags), expected,
                              made["root"])
        assert "manifest.json" in line, line
        assert not output_dir.exists()
    assert_refused(TRAIN, train_flags(made, folder, output_dir, recipe="fast"),
                   "--recipe=fast: value should be one of", made["root"])
    assert not output_dir.exists()


def test_a_recipe_the_flags_cannot_honour_is_refused(made, uncased_vocab, tmp_path):
    create_flags = dict(input_file=made["corpus"], output_file=tmp_path / "r.tfrecord",
                        vocab_file=uncased_vocab)
    assert_refused(CREATE, dict(create_flags, recipe="efficient", objective="mlm_nsp"),
                   "--full_windows: needs --objective=mlm (full windows are masked-LM only) "
                   "(set by --recipe=efficient", tmp_path)
    assert_refused(CREATE, dict(create_flags, recipe="efficient", short_seq_prob=0.2),
                   "--short_seq_prob: cannot act: --full_windows", tmp_path)
    assert_refused(CREATE, dict(create_flags, recipe="quick"),
                   "--recipe=quick: value should be one of", tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_records_that_disagree_with_their_manifest_are_refused(made, tmp_path):
    # Records of two manifests that were made differently.
    mixed = tmp_path / "mixed"
    shutil.copytree(made["root"] / "dynamic", mixed)
    create(made["corpus"], made["root"] / "dynamic" / made["manifest"]["vocabulary"],
           mixed / "other.tfrecord", objective="mlm", masking="dynamic", masked_lm_prob=0.2,
           max_seq_length=64)
    assert_refused(TRAIN, train_flags(made, mixed, tmp_path / "out"),
                   "masked_lm_prob 0.3 for", tmp_path)
    # A record file no manifest names, among records that have one.
    (mixed / "other.tfrecord.manifest.json").unlink()
    assert_refused(TRAIN, train_flags(made, mixed, tmp_path / "out"), "has no manifest, while",
                   tmp_path)
    # A record file changed after its manifest was written.
    changed = tmp_path / "changed"
    shutil.copytree(made["root"] / "dynamic", changed)
    with open(changed / "train.tfrecord", "ab") as f:
        f.write(b"\0")
    assert_refused(TRAIN, train_flags(made, changed, tmp_path / "out"),
                   "train.tfrecord: is ", tmp_path)
    # A manifest that describes other records than those beside it.
    swapped = tmp_path / "swapped"
    shutil.copytree(made["root"] / "dynamic", swapped)
    manifest_file = swapped / "train.tfrecord.manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest.update(masking="static")
    manifest_file.write_text(json.dumps(manifest))
    assert_refused(TRAIN, train_flags(made, swapped, tmp_path / "out"),
                   "its records hold dynamic masks, masked-LM only, but", tmp_path)


def test_recipes_set_defaults_that_flags_override(made, uncased_vocab, tmp_path):
    """--recipe=efficient on both tools: the records' defaults (each overridable: here the
    length and the rate), then run_pretraining's from the manifest's recipe."""
    manifest, log = create(made["corpus"], uncased_vocab, tmp_path / "efficient" / "r.tfrecord",
                           recipe="efficient", max_seq_length=64, masked_lm_prob=0.3)
    assert "*** from --recipe=efficient: " in log
    expected = dict(recipe="efficient", objective="mlm", masking="dynamic",
                    cut="full_windows", pack_sequences=True, dupe_factor=1,
                    masked_lm_prob=0.3, max_seq_length=64,
                    max_predictions_per_seq=20)  # 30% of 64, rounded up
    assert {key: manifest[key] for key in expected} == expected
    status, log = run_command_line(TRAIN, train_flags(made, tmp_path / "efficient",
                                                      tmp_path / "out", num_train_steps=50,
                                                      save_checkpoints_steps=1000,
                                                      learning_rate=5e-4))
    assert status == 0, log[-3000:]
    recipe_line = [line for line in log.splitlines() if line.startswith("*** from --recipe")]
    assert recipe_line == ["*** from --recipe=efficient: --optimizer=adam "
                           "--num_warmup_steps=5 --shuffle_buffer_size=10000"], log[-3000:]
    # (10% of 50; the rate given.) Records read unshuffled: no shuffle buffer set.
    from bert_tf.data.pretraining import recipes
    assert recipes.settle(recipes.RECIPES["efficient"].training_flags,
                          dict(num_train_steps=50, deterministic_input=True),
                          given={"learning_rate"}) == dict(optimizer="adam", num_warmup_steps=5)


def test_manifests_of_folders_shards_and_reruns(made, uncased_vocab, tmp_path):
    """One run writing into two folders leaves a manifest in each, which read as one set;
    shards share one manifest named without their -0000i-of-0000N; a rerun with another
    vocabulary under the same name replaces the copy; a file that two manifests name, and a
    user's own *.manifest.json, are told apart."""
    from bert_tf.data.pretraining import manifest
    corpus = made["corpus"]
    outputs = f"{tmp_path / 'a' / 'r1.tfrecord'},{tmp_path / 'b' / 'r2.tfrecord'}"
    status, log = run_command_line(CREATE, dict(input_file=corpus, output_file=outputs,
                                                vocab_file=uncased_vocab, dupe_factor=1))
    assert status == 0, log[-3000:]
    for folder, name in (("a", "r1.tfrecord"), ("b", "r2.tfrecord")):
        written = json.loads((tmp_path / folder / f"{name}.manifest.json").read_text())
        assert list(written["files"]) == [name]
    files = [str(tmp_path / "a" / "r1.tfrecord"), str(tmp_path / "b" / "r2.tfrecord")]
    globbed = sorted(str(p) for p in tmp_path.glob("*/*"))
    records = manifest.read_records(globbed)
    assert sorted(records.paths) == files and records.manifest["objective"] == "mlm_nsp"

    shards = tmp_path / "shards"
    status, log = run_command_line(CREATE, dict(input_file=corpus, output_file=shards / "s",
                                                vocab_file=uncased_vocab, dupe_factor=1,
                                                output_shards=2))
    assert status == 0, log[-3000:]
    assert sorted(p.name for p in shards.iterdir()) == [
        "s-00000-of-00002", "s-00001-of-00002", "s.manifest.json", "s.vocab.txt"]
    assert len(manifest.read_records([str(p) for p in shards.iterdir()]).paths) == 2

    other = made["root"] / "other_vocab.txt"
    create(corpus, other, tmp_path / "a" / "r1.tfrecord", dupe_factor=1)
    assert tokens_sha256(tmp_path / "a" / "r1.tfrecord.vocab.txt") == tokens_sha256(other)

    copied = json.loads((tmp_path / "a" / "r1.tfrecord.manifest.json").read_text())
    (tmp_path / "a" / "copy.manifest.json").write_text(json.dumps(copied))
    (tmp_path / "a" / "notes.manifest.json").write_text('{"mine": true}')
    with pytest.raises(ValueError, match="r1.tfrecord: is named by two manifests"):
        manifest.read_records([files[0]])
    (tmp_path / "a" / "copy.manifest.json").unlink()
    assert manifest.read_records([files[0]]).paths == [files[0]]

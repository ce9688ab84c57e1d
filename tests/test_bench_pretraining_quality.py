"""bench/training/pretraining_quality.py's own arithmetic and command lines, without training:
the report's TARGET, ratios, stalls and goal on curves whose answers are worked out by hand
below; which flags ours' run_pretraining line gives (a recipe's records carry their settings in
a manifest, the efficient recipe its own schedule); the --recipes syntax; older points.json
files read.
"""
import argparse
import json

import pytest

from conftest import import_bench

STEPS = (20, 40, 60, 80, 100)


def curve(*accuracies):
    """Points at STEPS; their wall `time` is 3 s a step (what a label without a step time uses)."""
    return [{"step": step, "accuracy": a, "time": 3.0 * step} for step, a in zip(STEPS, accuracies)]


@pytest.fixture(scope="module")
def bench():
    return import_bench("bench.training.pretraining_quality")


def test_report_figures_worked_by_hand(bench):
    curves = {
        # keras-hub: mean final (0.25 + 0.23) / 2 = 0.24, which its seed-mean curve (0.07,
        # 0.095, 0.145, 0.205, 0.24) first reaches at step 100: 100 s at 1 s/step.
        "keras_hub lr 0.001": {0: curve(0.07, 0.10, 0.15, 0.20, 0.25),
                               1: curve(0.07, 0.09, 0.14, 0.21, 0.23)},
        # transformers: its own final 0.10 at step 80, 160 s at 2 s/step: slower, so keras-hub
        # is the fastest peer and TARGET = 0.24.
        "transformers lr 0.0005": {0: curve(0.07, 0.08, 0.09, 0.10, 0.10)},
        # ours at 0.5 s/step: seed 0 reaches 0.24 at step 60 (30 s, 0.30x), seed 1 at step 100
        # (50 s, 0.50x) after three checkpoints below 0.075 past step 10: a stall, no goal.
        "ours efficient:recipe:0.001": {0: curve(0.08, 0.15, 0.24, 0.26, 0.28),
                                        1: curve(0.06, 0.07, 0.07, 0.20, 0.25)},
        # timed by its family's step time (the rate does not change the step): step 40, 20 s,
        # 0.20x in both seeds, no stall: the goal holds.
        "ours efficient:recipe:0.002": {0: curve(0.10, 0.24, 0.25, 0.26, 0.27),
                                        1: curve(0.09, 0.25, 0.25, 0.26, 0.27)},
        # no step time for its family: its wall times, step 80 at 3 s/step = 240 s, 2.40x.
        "ours original:adam:0.001": {0: curve(0.08, 0.10, 0.20, 0.24, 0.26)},
    }
    step_times = {"keras_hub lr 0.002": 1.0, "transformers lr 0.0005": 2.0,
                  "ours efficient:recipe:0.001": 0.5}
    figures = bench.summarise(curves, step_times, steps=100)
    assert figures["fastest"] == "keras_hub lr 0.001"
    assert figures["target"] == pytest.approx(0.24)
    assert figures["peer_seconds"] == pytest.approx(100.0)
    assert figures["own"]["transformers lr 0.0005"] == (pytest.approx(0.10), pytest.approx(160.0))
    assert figures["wall"] == ["ours original:adam:0.001"]
    rows = {(row["label"], row["seed"]): row for row in figures["rows"]}
    expected = {("ours efficient:recipe:0.001", 0): (60, 30.0, 0.30, 0),
                ("ours efficient:recipe:0.001", 1): (100, 50.0, 0.50, 3),
                ("ours efficient:recipe:0.002", 0): (40, 20.0, 0.20, 0),
                ("ours efficient:recipe:0.002", 1): (40, 20.0, 0.20, 0),
                ("ours original:adam:0.001", 0): (80, 240.0, 2.40, 0),
                ("keras_hub lr 0.001", 0): (100, 100.0, 1.00, 1),
                ("keras_hub lr 0.001", 1): (None, None, None, 1),
                ("transformers lr 0.0005", 0): (None, None, None, 1)}
    for key, (step, seconds, ratio, stall) in expected.items():
        row = rows[key]
        assert (row["step"], row["stall"]) == (step, stall), key
        assert row["seconds"] == (None if seconds is None else pytest.approx(seconds)), key
        assert row["ratio"] == (None if ratio is None else pytest.approx(ratio)), key
    summary = figures["summary"]
    assert summary["ours efficient:recipe:0.001"]["worst_ratio"] == pytest.approx(0.50)
    assert summary["ours efficient:recipe:0.001"]["stalls"] == 3
    assert summary["ours efficient:recipe:0.001"]["goal"] is False
    assert summary["ours efficient:recipe:0.002"]["goal"] is True
    assert summary["ours original:adam:0.001"]["goal"] is False
    assert summary["keras_hub lr 0.001"]["worst_ratio"] is None  # a seed never reached it
    assert summary["keras_hub lr 0.001"]["goal"] is None  # the goal is ours'


def test_without_step_times_the_wall_times_count(bench):
    curves = {"keras_hub lr 0.001": {0: curve(0.07, 0.10, 0.15, 0.20, 0.25)},
              "ours efficient:recipe:0.001": {0: curve(0.08, 0.26, 0.27, 0.28, 0.29)}}
    figures = bench.summarise(curves, {}, steps=200)
    assert figures["wall"] == sorted(curves)
    # keras-hub's 0.07 at step 20 is within the first 10% of 200 steps: no stall (at 100: one).
    assert [row["stall"] for row in figures["rows"]] == [0, 0]
    assert figures["peer_seconds"] == pytest.approx(300.0)  # step 100 at 3 s/step
    row = next(row for row in figures["rows"] if row["label"].startswith("ours"))
    assert (row["step"], row["seconds"], row["ratio"]) == (40, pytest.approx(120.0),
                                                           pytest.approx(0.40))


def args_for(tmp_path, steps=100):
    return argparse.Namespace(out_dir=tmp_path, model="L4-H256", batch=32, seq=128,
                              eval_every=20, steps=steps)


def flags_of(line):
    return dict((flag.lstrip("-").split("=", 1) + [None])[:2] for flag in line[3:])


MANIFEST_FLAGS = {"max_seq_length", "max_predictions_per_seq", "objective", "masked_lm_prob",
                  "vocab_file"}


def test_ours_command_lines(bench, tmp_path):
    """Records with a manifest: none of the flags run_pretraining takes from it; the efficient
    family: no optimizer or warmup either (the recipe's) unless the variant is that change;
    the others: the optimizer and the peers' 10% warmup. Records without a manifest: what it would
    have said."""
    args = args_for(tmp_path)
    with_manifest, without = tmp_path / "with", tmp_path / "without"
    with_manifest.mkdir()
    without.mkdir()
    (with_manifest / "train.tfrecord.manifest.json").write_text("{}")

    def line(spec, records=with_manifest):
        run = next(r for r in bench.parse_runs(argparse.ArgumentParser(), argparse.Namespace(
            systems="ours", recipes=spec, peer_lr="5e-4")))
        return flags_of(bench.train_line(args, run, records, tmp_path / "out", 100, 20, 7))

    efficient = line("efficient::2e-3")
    assert not (MANIFEST_FLAGS | {"optimizer", "num_warmup_steps", "shuffle_buffer_size"}
                ) & set(efficient)
    assert (efficient["learning_rate"], efficient["seed"], efficient["num_train_steps"],
            efficient["train_batch_size"]) == ("0.002", "7", "100", "32")
    assert json.loads(open(efficient["bert_config_file"]).read())["num_attention_heads"] == 4
    assert line("efficient-warmup6")["num_warmup_steps"] == "6"
    assert line("efficient-warmup20")["num_warmup_steps"] == "20"
    assert (line("efficient-warmup6-buffer100")["shuffle_buffer_size"]
            == "100")
    assert "dropout" not in efficient  # the config's
    assert line("efficient-nodropout")["dropout"] == "0"
    assert line("efficient-latedropout")["dropout_from_step"] == "33"  # a third of 100
    assert "num_warmup_steps" not in line("efficient-adamw")
    assert line("efficient-adamw")["optimizer"] == "adamw"
    assert line("efficient:adam")["optimizer"] == "adam"
    dynamic = line("mlm-dynamic:adam:1e-3")
    assert not MANIFEST_FLAGS & set(dynamic)
    assert (dynamic["optimizer"], dynamic["num_warmup_steps"]) == ("adam", "10")
    assert line("original")["optimizer"] == "adamw"
    assert "optimizer" not in line("original:recipe")
    old = line("mlm-dynamic:adam:1e-3", records=without)
    assert MANIFEST_FLAGS <= set(old)
    assert (old["max_seq_length"], old["max_predictions_per_seq"]) == ("128", "20")


def test_recipes_syntax(bench):
    def runs(recipes, peer_lr="5e-4", systems="ours"):
        return bench.parse_runs(argparse.ArgumentParser(), argparse.Namespace(
            systems=systems, recipes=recipes, peer_lr=peer_lr, steps=400, eval_every=100))

    efficient_rate = bench.library_recipe("efficient").training_flags["learning_rate"]
    assert [(r.recipe, r.optimizer, r.lr) for r in runs(
        "efficient,efficient::2e-3,efficient:recipe:5e-4,original,original:adam:1e-3")] == [
        ("efficient", None, efficient_rate), ("efficient", None, 2e-3),
        ("efficient", None, 5e-4), ("original", "adamw", 5e-4), ("original", "adam", 1e-3)]
    assert [r.label for r in runs("", "5e-4,1e-3", "keras_hub")] == [
        "keras_hub lr 0.0005", "keras_hub lr 0.001"]
    # STEPS: ours' own schedule, a multiple of --eval_every below --steps.
    shorter = runs("efficient::2e-3:300")[0]
    assert (shorter.steps, shorter.label) == (300, "ours efficient:recipe:0.002:300")
    assert bench.family(shorter.label) == bench.family(runs("efficient")[0].label)
    for bad in ("nosuch", "efficient:adam:fast", "efficient:adam:1e-3:x", "efficient::1e-3:250",
                "efficient::1e-3:400", "efficient::1e-3:500", "efficient::1e-3:300:1"):
        with pytest.raises(SystemExit) as exit_info:
            runs(bad)
        assert exit_info.value.code == 2


def test_older_points_files_are_read(bench, tmp_path):
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"keras_hub lr 0.0005": {
        "steps": 400, "eval_every": 50, "seed": 1, "points": [{"step": 50, "accuracy": 0.07,
                                                               "time": 40.0}]}}))
    entries = bench.load_points(path)
    args = argparse.Namespace(systems="ours,keras_hub", steps=400, eval_every=50,
                              model="L4-H256", batch=32, seq=128)
    assert bench.curves_at(entries, args) == {"keras_hub lr 0.0005": {1: [
        {"step": 50, "accuracy": 0.07, "time": 40.0}]}}
    args.model = "L2-H128"
    assert bench.curves_at(entries, args) == {}

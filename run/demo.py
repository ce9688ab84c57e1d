"""End-to-end demo on a small corpus that it generates: every stage a real command line.

    python -m run.demo [--output_dir=demo_output]

Stages (each prints the command it runs and that command's own progress):
  1. corpus      data_tools.demo_corpus        invented people, one sentence per line
  2. vocabulary  data_tools.build_vocab         WordPiece vocabulary learned from the corpus
  3. tokenize    FullTokenizer vs FastTokenizer  tokens, [UNK] rate, identical output, speed
  4. records     data_tools.create_pretraining_data   masked-LM TFRecords (--recipe=efficient)
  5. pretrain    run.run_pretraining            a small BERT, trained then evaluated
  6. features    run.extract_features           contextual vectors from the trained model
  7. finetune    run.run_ner                    the pretrained model fine-tuned to tag people and
                                                cities in sentences about new people (CoNLL files
                                                the corpus stage writes), evaluated (entity F1),
                                                predicted and exported as a SavedModel
A summary table closes the run. Nothing is downloaded.
"""
import json
import os
import shutil
import subprocess
import sys
import time

from absl import flags

from bert_tf.cli import run_main
from bert_tf.errors import flag_error
from bert_tf.io_utils import is_temporary_name

FLAGS = flags.FLAGS


def define_flags():
    """The demo's flags, defined when it runs (importing the module for its helpers, as the
    tests do, defines none: their names would clash with other command lines' flags)."""
    flags.DEFINE_string("output_dir", "demo_output",
                        "Where every demo artifact goes: a new or empty folder, or a previous "
                        "demo output (whose demo files are replaced; a folder holding anything "
                        "else is refused, nothing deleted).")
    flags.DEFINE_integer("num_documents", 3000, "Documents in the generated corpus.")
    flags.DEFINE_integer("vocab_size", 2000, "Size of the learned WordPiece vocabulary.")
    flags.DEFINE_integer("num_train_steps", 1500, "Pretraining steps for the small model.")
    flags.DEFINE_integer("max_seq_length", 64, "Sequence length of the pretraining records.")
    flags.DEFINE_float("finetune_epochs", 2.0, "Epochs of fine-tuning on the tagging task.")
    flags.DEFINE_integer("seed", 0, "Seed of every stage that takes one (corpus, records, "
                         "pretraining, fine-tuning): a rerun gives the same numbers.")


# A small BERT that learns the demo corpus in a few minutes on 2 CPU cores.
SMALL_BERT_CONFIG = {
    "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 512, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128,
    "type_vocab_size": 2, "initializer_range": 0.02,
}


# Written first into a new --output_dir: a folder without it is not a demo output, whatever
# its files are called (a user's own corpus.txt and vocab.txt are never taken for the demo's).
DEMO_MARKER = ".bert_tf_demo"
# Everything the demo writes into --output_dir (the only names it deletes on a rerun).
DEMO_ARTIFACTS = (DEMO_MARKER, "corpus.txt", "vocab.txt", "records",
                  "bert_config.json", "pretrained", "sentences.txt", "features.jsonl",
                  "tagging_task", "tagger", "exported_tagger")


def prepare_output_dir(out):
    """Creates `out`, or empties a previous demo output (it holds DEMO_MARKER) of the demo's
    own files, then marks it. A folder that holds anything else, or demo names without the
    marker, is refused (InputError naming --output_dir), and nothing is deleted."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise flag_error("output_dir", f"{out} is a file, not a directory")
    os.makedirs(out, exist_ok=True)
    names = sorted(os.listdir(out))
    foreign = [name for name in names if name not in DEMO_ARTIFACTS and not (
        is_temporary_name(name) and name.lstrip(".").split(".tmp-")[0] in DEMO_ARTIFACTS)]
    if names and DEMO_MARKER not in names:
        foreign = foreign or names
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise flag_error("output_dir", f"{out} is not empty and not a demo output (it holds "
                                       f"{foreign[0]!r}{more}); nothing was deleted: pass a new "
                                       f"or empty folder, or remove it yourself")
    for name in names:
        path = os.path.join(out, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    with open(os.path.join(out, DEMO_MARKER), "w", encoding="utf-8") as f:
        f.write("written by python -m run.demo: a rerun may empty this folder\n")


# The stages' modules, from this module's own package: `run` and `data_tools` in a checkout
# (python -m run.demo), `bert_tf.run` and `bert_tf.data_tools` as installed.
_PREFIX = (__package__ or "run")[:-len("run")]
RUN_PACKAGE, DATA_TOOLS_PACKAGE = _PREFIX + "run", _PREFIX + "data_tools"


def shown_command(command):
    """The command as a user would type it: `python -m module ...` (the interpreter's name)."""
    return " ".join([os.path.basename(command[0]) or "python"] + command[1:])


def run_stage(title, module, **stage_flags):
    """Runs `python -m module --flag=value ...`, streaming its output; fails the demo on error."""
    command = [sys.executable, "-m", module] + [f"--{k}={v}" for k, v in stage_flags.items()]
    print(f"\n=== {title}\n$ {shown_command(command)}", flush=True)
    start = time.monotonic()
    result = subprocess.run(command)
    if result.returncode != 0:
        print(f"demo: stage '{title}' failed with exit status {result.returncode}", file=sys.stderr)
        sys.exit(result.returncode)
    return time.monotonic() - start


def time_passes(work, min_seconds=0.5):
    """Seconds per call of `work()`, warm, over as many calls as take `min_seconds`."""
    calls, start = 0, time.monotonic()
    while True:
        work()
        calls += 1
        elapsed = time.monotonic() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def tokenization_report(corpus, vocab_file):
    """Tokenizes the corpus with the exact and the fast tokenizer; returns a summary dict."""
    # Imported when the stage runs, not at the top: FastTokenizer's import takes time.
    from bert_tf.text.fast_tokenization import FastTokenizer
    from bert_tf.tokenization import FullTokenizer

    with open(corpus, encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    exact = FullTokenizer(vocab_file, do_lower_case=True)
    fast = FastTokenizer(vocab_file, do_lower_case=True)
    # Untimed first passes: they are the comparison, and they warm both tokenizers up (the
    # fast one's first call traces its graph; timed cold on a small corpus it looked slower).
    exact_tokens = [exact.tokenize(line) for line in lines]
    fast_tokens = fast.tokenize_batch(lines)
    exact_seconds = time_passes(lambda: [exact.tokenize(line) for line in lines])
    fast_seconds = time_passes(lambda: fast.tokenize_batch(lines))
    num_tokens = sum(len(t) for t in exact_tokens)
    num_unk = sum(t.count("[UNK]") for t in exact_tokens)
    identical = sum(a == b for a, b in zip(exact_tokens, fast_tokens))
    report = {"lines": len(lines), "tokens": num_tokens, "unk_rate": num_unk / max(num_tokens, 1),
              "identical_lines": f"{identical}/{len(lines)}",
              "exact_tokens_per_s": num_tokens / exact_seconds,
              "fast_tokens_per_s": num_tokens / fast_seconds}
    print(f"\n=== tokenize\n{lines[0]!r}\n  -> {exact_tokens[0]}")
    for key, value in report.items():
        print(f"  {key}: {value:.4g}" if isinstance(value, float) else f"  {key}: {value}")
    if identical != len(lines):
        print("demo: the fast tokenizer differs from FullTokenizer", file=sys.stderr)
        sys.exit(1)
    return report


def read_key_values(path):
    """Parses the original's `key = value` result files (eval_results.txt)."""
    results = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if " = " in line:
                key, value = line.strip().split(" = ", 1)
                results[key] = float(value)
    return results


def main(argv):
    del argv
    if FLAGS.num_documents < 100:
        raise flag_error("num_documents", "the demo needs at least 100 documents")
    out = os.path.abspath(FLAGS.output_dir)
    prepare_output_dir(out)
    corpus = os.path.join(out, "corpus.txt")
    vocab = os.path.join(out, "vocab.txt")
    # Their own folder: the records, their manifest and its vocabulary copy.
    records = os.path.join(out, "records", "pretrain.tfrecord")
    config_file = os.path.join(out, "bert_config.json")
    model_dir = os.path.join(out, "pretrained")
    timings = {}

    task_dir = os.path.join(out, "tagging_task")
    timings["corpus"] = run_stage(
        "corpus", f"{DATA_TOOLS_PACKAGE}.demo_corpus", output_file=corpus,
        num_documents=FLAGS.num_documents, task_dir=task_dir, seed=FLAGS.seed)
    timings["vocabulary"] = run_stage(
        "vocabulary", f"{DATA_TOOLS_PACKAGE}.build_vocab", input_file=corpus, output_file=vocab,
        vocab_size=FLAGS.vocab_size, do_lower_case=True)
    start = time.monotonic()
    tokens = tokenization_report(corpus, vocab)
    timings["tokenize"] = time.monotonic() - start

    timings["records"] = run_stage(
        "records", f"{DATA_TOOLS_PACKAGE}.create_pretraining_data", recipe="efficient",
        input_file=corpus, output_file=records, vocab_file=vocab, do_lower_case=True,
        max_seq_length=FLAGS.max_seq_length, random_seed=FLAGS.seed)

    with open(vocab, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    with open(config_file, "w", encoding="utf-8") as f:
        json.dump(dict(SMALL_BERT_CONFIG, vocab_size=vocab_size), f, indent=2)
    # The records' manifest gives the length, masking, vocabulary, casing and recipe, and the
    # recipe the optimizer, rate, warmup and shuffle buffer: none of them is given here.
    timings["pretrain"] = run_stage(
        "pretrain", f"{RUN_PACKAGE}.run_pretraining", bert_config_file=config_file,
        input_file=records, output_dir=model_dir, do_train=True, do_eval=True,
        train_batch_size=32, eval_batch_size=32, num_train_steps=FLAGS.num_train_steps,
        save_checkpoints_steps=500, iterations_per_loop=100,
        max_eval_steps=20, log_steps=100, seed=FLAGS.seed)
    evaluation = read_key_values(os.path.join(model_dir, "eval_results.txt"))

    sentences = os.path.join(out, "sentences.txt")
    with open(sentences, "w", encoding="utf-8") as f:
        f.write("Kalomi lives in Oslo and works as a baker. ||| The baker likes bread.\n")
    features = os.path.join(out, "features.jsonl")
    timings["features"] = run_stage(
        "features", f"{RUN_PACKAGE}.extract_features", input_file=sentences,
        output_file=features, vocab_file=vocab, bert_config_file=config_file,
        init_checkpoint=model_dir, do_lower_case=True, layers="-1",
        max_seq_length=FLAGS.max_seq_length, batch_size=8)

    tagger_dir = os.path.join(out, "tagger")
    timings["finetune"] = run_stage(
        "finetune", f"{RUN_PACKAGE}.run_ner", data_dir=task_dir, vocab_file=vocab,
        bert_config_file=config_file, init_checkpoint=model_dir, output_dir=tagger_dir,
        do_train=True, do_eval=True, do_predict=True, do_lower_case=True,
        max_seq_length=FLAGS.max_seq_length, train_batch_size=32, eval_batch_size=32,
        predict_batch_size=32, learning_rate=2e-4, num_train_epochs=FLAGS.finetune_epochs,
        bucket_by_length=True, log_steps=40, export_dir=os.path.join(out, "exported_tagger"),
        seed=FLAGS.seed)
    finetuned = read_key_values(os.path.join(tagger_dir, "eval_results.txt"))

    chance = 1.0 / vocab_size
    print("\n=== summary")
    print(f"  corpus: {FLAGS.num_documents} documents; vocabulary: {vocab_size} pieces; "
          f"[UNK] rate {tokens['unk_rate']:.4%}; fast tokenizer identical on "
          f"{tokens['identical_lines']} lines")
    print(f"  pretraining eval: masked_lm_accuracy={evaluation['masked_lm_accuracy']:.3f} "
          f"(chance {chance:.4f}), loss={evaluation['loss']:.3f}")
    print(f"  fine-tuning eval (people and cities in new sentences): entity F1="
          f"{finetuned['eval_f1']:.3f} (PER {finetuned['eval_f1_PER']:.3f}, LOC "
          f"{finetuned['eval_f1_LOC']:.3f}); SavedModel in {os.path.join(out, 'exported_tagger')}")
    for stage, seconds in timings.items():
        print(f"  {stage:<11} {seconds:7.1f} s")
    print(f"  artifacts in {out}")
    if evaluation["masked_lm_accuracy"] < 10 * chance:
        print("demo: masked-LM accuracy is not clearly above chance", file=sys.stderr)
        sys.exit(1)
    if finetuned["eval_f1"] < 0.5:
        print("demo: the fine-tuned tagger finds too few entities (F1 < 0.5)", file=sys.stderr)
        sys.exit(1)


def console_main():
    define_flags()
    run_main(main)


if __name__ == "__main__":
    console_main()

"""`evaluate`: every Candidate fine-tuned on every suite task with every seed, one
`bert_tf.training.runner.run` each, into output_dir/runs/<model>/<step>/<task>/seed-<seed>;
each task's data sliced once (output_dir/data) and its records prepared once per vocabulary
(output_dir/records), shared by every model. A run's result is written (atomically) when it
ends, and an evaluation started again skips the runs that have one; an unfinished run starts
over. Then the tables and the figure (`report`)."""
import dataclasses
import json
import os
import shutil
import time

from bert_tf import io_utils
from bert_tf.errors import argument_error
from bert_tf.progress import Progress, format_duration
from bert_tf.progress import log as default_log
from bert_tf.text.fast_tokenization import FastTokenizer
from bert_tf.tokenization import validate_case_matches_checkpoint
from bert_tf.training import runner
from bert_tf.training.checkpoint_files import CHECKPOINT_FILE, remove_own_files
from bert_tf.training.glue_sweep.records import json_number, read_json, write_json
from bert_tf.training.glue_sweep.sweep import Clock, quiet_retracing_warnings
from bert_tf.training.pretraining_evaluation import models, report
from bert_tf.training.settings import RunSettings

RESULT_FILE = "result.json"
SETTINGS_FILE = "evaluation.json"
# The folders this command writes into output_dir: task slices, their records, the runs.
DATA_DIR, RECORDS_DIR, RUNS_DIR = "data", "records", "runs"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """The fine-tuning every run gets (the command lines' flags of the same names; the other
    RunSettings keep their defaults): seeds give one run each."""
    learning_rate: float = 1e-4
    train_batch_size: int = 32
    num_train_epochs: float = 3.0
    warmup_proportion: float = 0.1
    seeds: tuple = (0,)


def check_protocol(protocol):
    """The protocol's values: InputErrors naming the argument."""
    if not protocol.num_train_epochs > 0:
        raise argument_error("num_train_epochs", f"{protocol.num_train_epochs}: must be > 0")
    if not protocol.learning_rate > 0:
        raise argument_error("learning_rate", f"{protocol.learning_rate}: must be > 0")
    if protocol.train_batch_size < 1:
        raise argument_error("train_batch_size", f"{protocol.train_batch_size}: must be >= 1")
    if not protocol.seeds or len(set(protocol.seeds)) != len(protocol.seeds) or any(
            seed < 0 for seed in protocol.seeds):
        raise argument_error("seeds", f"{', '.join(map(str, protocol.seeds)) or 'none'}: "
                                      f"distinct integers >= 0, at least one")


def evaluate(found, tasks, sources, output_dir, protocol=Protocol(), baseline=True,
             mixed_vocabularies=False, log=default_log):
    """Fine-tunes every Candidate of `found` (models.candidates), and with `baseline` a fresh
    initialisation of each config (models.baselines), on every SuiteTask of `tasks` with each
    seed; writes the tables and the figure into output_dir; returns the result rows (dicts of
    results.tsv's columns and the run's other results).

    Args:
      sources: {SuiteTask.source: path}: the GLUE folder, the CoNLL-2003 folder, the SQuAD
        v1.1 file the tasks read.
      mixed_vocabularies: tabulate models of different vocabularies (else an InputError).
    Everything is checked (the protocol, the tasks' files, the vocabularies, the models'
    lengths and casings, a resumed evaluation's settings) before anything is written; then the
    tasks' data and records, which output_dir keeps only when all of them could be prepared.
    """
    output_dir = os.fspath(output_dir)
    models.check_local(output_dir, "output_dir")
    check_protocol(protocol)
    for task in tasks:
        task.check_files(sources)
    models.check_vocabularies(found, mixed_vocabularies)
    for candidate in found:
        positions = candidate.files.config.max_position_embeddings
        for task in tasks:
            if task.max_seq_length > positions:
                raise argument_error("tasks", f"{task.name} reads sequences of "
                                              f"{task.max_seq_length} tokens; {candidate.model} "
                                              f"has {positions} positions")
        if candidate.files.checkpoint:
            validate_case_matches_checkpoint(candidate.files.do_lower_case,
                                             candidate.files.checkpoint)
    io_utils.check_writable_dir(output_dir)
    settings = {"protocol": dataclasses.asdict(protocol),
                "tasks": {task.name: dataclasses.asdict(task) for task in tasks},
                "data": {task.source: os.path.abspath(sources[task.source]) for task in tasks}}
    settings_path = os.path.join(output_dir, SETTINGS_FILE)
    # What this command writes into output_dir, and replaces or deletes when it runs again
    # (an unfinished run's folder): only in a folder that its settings file marks as its own.
    ours = [name for name in (DATA_DIR, RECORDS_DIR, RUNS_DIR, report.TABLE_FILE,
                              report.MARKDOWN_FILE, report.FIGURE_FILE)
            if os.path.exists(os.path.join(output_dir, name))]
    if ours and not os.path.exists(settings_path):
        raise argument_error("output_dir", f"{output_dir} holds {', '.join(ours)} but no "
                                           f"{SETTINGS_FILE}: not an evaluation of this "
                                           f"command, whose files would replace them; give a "
                                           f"new or empty folder")
    if os.path.exists(settings_path):
        earlier = read_json(settings_path)
        if json.loads(json.dumps(settings)) != earlier:
            raise argument_error("output_dir", f"{output_dir} holds an evaluation with other "
                                               f"settings or data ({settings_path}): give "
                                               f"another folder, or the same to resume it")
    everything = list(found) + (models.baselines(found) if baseline else [])
    runs = [(candidate, task, seed) for candidate in everything for task in tasks
            for seed in protocol.seeds]
    evaluation = _Evaluation(output_dir, sources, protocol, log)
    to_run = [run for run in runs if not os.path.exists(evaluation.result_path(*run))]
    # The data and records of every run still to do, before the first run: a slice or a
    # task's data that cannot be prepared (too few examples for a step, a SQuAD file with
    # too few articles) is refused with nothing of it left. The settings file goes first: a
    # preparation killed outright leaves a folder this command knows as its own, and resumes.
    with io_utils.removed_on_failure(output_dir):
        write_json(settings_path, settings)
        for candidate, task, _ in to_run:
            evaluation.prepare(candidate, task)
    progress = Progress("evaluate_pretraining", total=len(runs), unit="runs",
                        start=len(runs) - len(to_run), interval=0)
    log(f"[evaluate_pretraining] {len(runs)} runs: {len(everything)} models x {len(tasks)} "
        f"tasks x {len(protocol.seeds)} seeds ({len(runs) - len(to_run)} finished earlier)")
    started = time.monotonic()
    rows = []
    names = [task.name for task in tasks]
    with quiet_retracing_warnings():
        for number, (candidate, task, seed) in enumerate(runs, 1):
            rows.append(evaluation.run(candidate, task, seed, f"{number}/{len(runs)}"))
            if not rows[-1]["earlier"]:
                progress.update(1, force=True, task=task.name)
                report.write_tables(output_dir, rows, names, mixed_vocabularies)
    report.write(output_dir, rows, names, mixed_vocabularies, log)
    log(f"[evaluate_pretraining] done in {format_duration(time.monotonic() - started)}: "
        f"{os.path.join(output_dir, report.TABLE_FILE)}")
    return rows


class _Evaluation:
    def __init__(self, output_dir, sources, protocol, log):
        self.output_dir, self.sources, self.protocol, self.log = (output_dir, sources, protocol,
                                                                  log)
        self.data_dirs = {}
        self.prepared = {}

    def run_dir(self, candidate, task, seed):
        # A baseline's runs are its config's, whichever model names it.
        model = (os.path.join(candidate.model, f"step-{candidate.step}")
                 if candidate.step != models.BASELINE_STEP else f"random-{candidate.config_key}")
        return os.path.join(self.output_dir, RUNS_DIR, model, task.name.replace("/", "-"),
                            f"seed-{seed}")

    def result_path(self, candidate, task, seed):
        return os.path.join(self.run_dir(candidate, task, seed), RESULT_FILE)

    def data_dir(self, task):
        """The task's slice, written the first time this evaluation needs it."""
        if task.data_name not in self.data_dirs:
            self.data_dirs[task.data_name] = task.data_files(
                self.sources, os.path.join(self.output_dir, DATA_DIR, task.data_name))
        return self.data_dirs[task.data_name]

    def prepare(self, candidate, task):
        """The task over its records for the candidate's vocabulary, prepared once (and shared
        by its variants)."""
        files = candidate.files
        key = (task.data_name, candidate.vocabulary, files.do_lower_case)
        if key not in self.prepared:
            tokenizer = FastTokenizer(files.vocab_file, do_lower_case=files.do_lower_case)
            options = dict(train_batch_size=self.protocol.train_batch_size,
                           eval_batch_size=RunSettings.eval_batch_size,
                           predict_batch_size=RunSettings.predict_batch_size,
                           num_train_epochs=self.protocol.num_train_epochs,
                           warmup_proportion=self.protocol.warmup_proportion, log=self.log)
            records_dir = os.path.join(self.output_dir, RECORDS_DIR,
                                       f"{task.data_name}-{candidate.vocabulary[:12]}-"
                                       f"{'uncased' if files.do_lower_case else 'cased'}")
            self.prepared[key] = task.prepare(files, tokenizer, self.data_dir(task),
                                              records_dir, options)
        return self.prepared[key]

    def run(self, candidate, task, seed, number):
        """The run's row: read from its result, or run now."""
        path = self.result_path(candidate, task, seed)
        step = "random" if candidate.step == models.BASELINE_STEP else f"step {candidate.step}"
        name = f"{candidate.model} {step} {task.name} seed {seed}"
        if os.path.exists(path):
            result = dict(read_json(path), model=candidate.model)
            self.log(f"[evaluate_pretraining] {name}: run {number} finished earlier "
                     f"(score {result['score']})")
            return dict(result, earlier=True)
        prepared = self.prepare(candidate, task)
        folder = self.run_dir(candidate, task, seed)
        if os.path.exists(folder):  # an unfinished run: it starts over
            shutil.rmtree(folder)
        self.log(f"[evaluate_pretraining] {name}: run {number}")
        files = candidate.files
        settings = RunSettings(
            output_dir=folder, do_train=True, do_eval=True, init_checkpoint=files.checkpoint,
            train_batch_size=self.protocol.train_batch_size,
            learning_rate=self.protocol.learning_rate, num_train_steps=prepared.num_train_steps,
            num_warmup_steps=prepared.num_warmup_steps, seed=seed, vocab_file=files.vocab_file,
            do_lower_case=files.do_lower_case)
        clock = Clock()
        results = runner.run(prepared.task.for_encoder(files.config, **dict(task.options)),
                             settings, log=self.log, on_phase=clock)
        train_seconds, eval_seconds = clock.split()
        score = json_number(results[task.metric])
        result = {"model": candidate.model, "step": candidate.step, "task": task.name,
                  "seed": seed, "score": None if score is None else score * task.scale,
                  "metric": task.metric, "seconds": candidate.seconds,
                  "vocabulary": candidate.vocabulary[:12],
                  "checkpoint": files.checkpoint, "train_seconds": train_seconds,
                  "eval_seconds": eval_seconds,
                  "results": {key: json_number(value) for key, value in results.items()}}
        # The run's checkpoints are not kept: its result is what the table needs.
        remove_own_files(folder, lambda n: n == "checkpoint" or CHECKPOINT_FILE.match(n))
        write_json(path, result)
        return dict(result, earlier=False)

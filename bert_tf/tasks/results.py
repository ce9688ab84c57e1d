"""Eval results as the original writes them: output_dir/eval_results.txt, `key = value` lines."""
import os

from bert_tf import io_utils


def format_results(results):
    """The original's eval_results.txt: `key = value` lines, keys sorted, str() of each value."""
    return "".join("%s = %s\n" % (key, str(results[key])) for key in sorted(results))


def write_results(results, output_dir, filename="eval_results.txt"):
    """Writes `format_results(results)` atomically into output_dir; returns the path."""
    path = os.path.join(output_dir, filename)
    with io_utils.atomic_open(path) as f:
        f.write(format_results(results))
    return path


def print_results(results):
    """The results on stdout, under the original's `***** Eval results *****` line."""
    print("***** Eval results *****\n" + format_results(results), end="", flush=True)

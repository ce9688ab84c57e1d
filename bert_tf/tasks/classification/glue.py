"""The GLUE tasks' and XNLI's files, laid out as the original and the GLUE download script
write them, each registered under its task name (`bert_tf.tasks.classification.reader`).

Each GLUE task's processor carries its metric, `task_metric`: the ClassificationConfig's (eval
results beyond accuracy: "f1", "matthews_corrcoef", "correlation" or None). GLUE_METRICS gives,
for each, the eval_results keys whose mean is the task's GLUE score, the first the one the
paper's Table 1 reports (and run_glue chooses runs by)."""
from bert_tf.tasks.classification.reader import FileLayout, FileLayoutProcessor, register
from bert_tf.tokenization import convert_to_unicode


def _glue_layouts(text_a, text_b=None, label=None, test_text_a=None, test_text_b=None,
                  guid=None, test_guid=None, has_header=True, test_has_header=True):
    """train.tsv / dev.tsv / test.tsv with the same columns, test ones without labels."""
    labeled = dict(has_header=has_header, text_a=text_a, text_b=text_b, label=label, guid=guid)
    return {
        "train": FileLayout("train.tsv", "train", **labeled),
        "dev": FileLayout("dev.tsv", "dev", **labeled),
        "test": FileLayout("test.tsv", "test", test_has_header,
                           text_a if test_text_a is None else test_text_a,
                           text_b if test_text_b is None else test_text_b, guid=test_guid),
    }


GLUE_METRICS = {None: ("eval_accuracy",), "f1": ("eval_f1", "eval_accuracy"),
                "matthews_corrcoef": ("eval_matthews_corrcoef",),
                "correlation": ("eval_spearman", "eval_pearson")}


class GlueProcessor(FileLayoutProcessor):
    """A GLUE task's files; its metric (the module docstring): accuracy unless it says."""
    task_metric = None


@register("xnli")
class XnliProcessor(FileLayoutProcessor):
    """XNLI (the original's): MultiNLI train machine-translated into `language`, XNLI dev.

    Train is `multinli/multinli.train.<language>.tsv` (premise, hypo, label; its
    "contradictory" means "contradiction"); dev is `xnli.dev.tsv`, all languages in one file,
    of which the rows of `language` are kept (guids count all rows). The original has no test
    set; `xnli.test.tsv` (same layout as dev) is read like dev, with the placeholder label.
    """
    name = "XNLI"
    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, language="zh"):
        self.language = language
        self.layouts = {
            "train": FileLayout(f"multinli/multinli.train.{language}.tsv", "train", True, 0, 1,
                                2, label_aliases=(("contradictory", "contradiction"),)),
            "dev": FileLayout("xnli.dev.tsv", "dev", True, 6, 7, 1),
            "test": FileLayout("xnli.test.tsv", "test", True, 6, 7),
        }

    def _keep_row(self, split):
        if split == "train":
            return None, ""
        return (lambda row: convert_to_unicode(row[0]) == self.language,
                f" in language {self.language!r}")


@register("mnli")
class MnliProcessor(GlueProcessor):
    """MultiNLI (GLUE). Dev and test are the matched sets, or with `matched=False` (task
    "mnli-mm") the mismatched ones. The label is the last column (dev's gold label after
    label1..label5); guids use the pairID column."""
    name = "MNLI"
    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, matched=True):
        genre = "matched" if matched else "mismatched"
        self.layouts = {
            "train": FileLayout("train.tsv", "train", True, 8, 9, -1, guid=0),
            "dev": FileLayout(f"dev_{genre}.tsv", f"dev_{genre}", True, 8, 9, -1, guid=0),
            "test": FileLayout(f"test_{genre}.tsv", "test", True, 8, 9, guid=0),
        }


@register("mnli-mm")
class MnliMismatchedProcessor(MnliProcessor):
    """MultiNLI with the mismatched dev and test sets (dev_mismatched.tsv,
    test_mismatched.tsv)."""

    def __init__(self, matched=False):
        super().__init__(matched=matched)


@register("mrpc")
class MrpcProcessor(GlueProcessor):
    """MRPC (GLUE): Quality, #1 ID, #2 ID, #1 String, #2 String; test has index for Quality."""
    name = "MRPC"
    labels = ("0", "1")
    task_metric = "f1"
    layouts = _glue_layouts(text_a=3, text_b=4, label=0)


@register("cola")
class ColaProcessor(GlueProcessor):
    """CoLA (GLUE): train/dev have no header (source, label, original mark, sentence); test
    has one (index, sentence)."""
    name = "CoLA"
    labels = ("0", "1")
    task_metric = "matthews_corrcoef"
    layouts = _glue_layouts(text_a=3, label=1, test_text_a=1, has_header=False)


@register("sst-2")
class Sst2Processor(GlueProcessor):
    """SST-2 (GLUE): train/dev "sentence, label"; test "index, sentence". Guids count rows."""
    name = "SST-2"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=0, label=1, test_text_a=1)


@register("qnli")
class QnliProcessor(GlueProcessor):
    """QNLI (GLUE): index, question, sentence, label; test without label."""
    name = "QNLI"
    labels = ("entailment", "not_entailment")
    layouts = _glue_layouts(text_a=1, text_b=2, label=3, guid=0, test_guid=0)


@register("qqp")
class QqpProcessor(GlueProcessor):
    """QQP (GLUE): id, qid1, qid2, question1, question2, is_duplicate; test: id, question1,
    question2."""
    name = "QQP"
    labels = ("0", "1")
    task_metric = "f1"
    layouts = _glue_layouts(text_a=3, text_b=4, label=5, test_text_a=1, test_text_b=2, guid=0,
                            test_guid=0)


@register("rte")
class RteProcessor(GlueProcessor):
    """RTE (GLUE): index, sentence1, sentence2, label; test without label."""
    name = "RTE"
    labels = ("entailment", "not_entailment")
    layouts = _glue_layouts(text_a=1, text_b=2, label=3, guid=0, test_guid=0)


@register("wnli")
class WnliProcessor(GlueProcessor):
    """WNLI (GLUE): index, sentence1, sentence2, label; test without label."""
    name = "WNLI"
    labels = ("0", "1")
    layouts = _glue_layouts(text_a=1, text_b=2, label=3, guid=0, test_guid=0)


@register("sts-b")
class StsbProcessor(GlueProcessor):
    """STS-B (GLUE), a regression task: the label is the similarity score (0 to 5, float).

    Columns: index, genre, filename, year, old_index, source1, source2, sentence1, sentence2,
    score; test without score.
    """
    name = "STS-B"
    labels = None
    is_regression = True
    task_metric = "correlation"
    layouts = _glue_layouts(text_a=7, text_b=8, label=9, guid=0, test_guid=0)

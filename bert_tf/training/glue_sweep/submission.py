"""The GLUE leaderboard's files: each test set's predictions of the chosen run as
`index<TAB>prediction` rows, and output_dir/submission/ and submission.zip of them."""
import os
import shutil
import zipfile

from bert_tf import io_utils
from bert_tf.errors import InputError
from bert_tf.tasks.classification.task import ClassificationTask

SUBMISSION_HEADER = "index\tprediction\n"


class SubmissionTask(ClassificationTask):
    """Predicts a test set into `path`: `index<TAB>prediction` rows, the test file's indices,
    the label's name (STS-B: the score)."""

    def __init__(self, config, path, indices):
        super().__init__(config)
        self.path, self.indices = path, indices

    def write_predictions(self, outputs, output_dir):
        outputs = self.per_example(outputs)
        values = outputs["probabilities"][outputs["is_real_example"] > 0]
        if len(values) != len(self.indices):
            raise InputError(f"{len(values)} predictions for the {len(self.indices)} rows of "
                             f"the test file of {self.path}")
        if self.config.regression:
            labels = [f"{float(row[0]):.3f}" for row in values]
        else:
            labels = [self.config.labels[int(row.argmax())] for row in values]
        write_submission(self.path, self.indices, labels)
        return [self.path]


def write_submission(path, indices, labels):
    with io_utils.atomic_open(path) as f:
        f.write(SUBMISSION_HEADER)
        for index, label in zip(indices, labels):
            f.write(f"{index}\t{label}\n")


def write_submission_folder(output_dir, summary):
    """output_dir/submission/<file> of every test set, from the chosen runs, and
    submission.zip of them (what gluebenchmark.com takes)."""
    folder = os.path.join(output_dir, "submission")
    os.makedirs(folder, exist_ok=True)
    names = []
    for entry in summary.values():
        for test_set in entry["task"].test_sets:
            source = os.path.join(entry["chosen_dir"], "submission", test_set.submission)
            if os.path.exists(source):
                with io_utils.atomic_output(os.path.join(folder, test_set.submission)) as tmp:
                    shutil.copyfile(source, tmp)
                names.append(test_set.submission)
    with io_utils.atomic_output(os.path.join(output_dir, "submission.zip")) as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in names:
                archive.write(os.path.join(folder, name), name)

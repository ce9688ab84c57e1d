"""notebooks/pretrain_finetune_tpu.ipynb runs end to end on CPU with tiny settings (nbclient,
the parameters cell replaced as papermill would), so the notebook cannot rot: it detects the
CPU, pretrains, fine-tunes a classifier with the command lines, exports, and serves strings."""
import json

import pytest

from conftest import PROJECT_ROOT

pytestmark = pytest.mark.slow

TINY = """NUM_DOCUMENTS = 150
VOCAB_SIZE = 400
MAX_SEQ_LENGTH = 32
PRETRAIN_STEPS = 20
FINETUNE_EPOCHS = 0.3
WORK_DIR = {work_dir!r}
INSTALL = False"""


def test_notebook_runs_on_cpu(tmp_path):
    import nbclient  # test extras
    import nbformat
    notebook = nbformat.read(PROJECT_ROOT / "notebooks" / "pretrain_finetune_tpu.ipynb", 4)
    parameters = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(parameters) == 1
    parameters[0].source = TINY.format(work_dir=str(tmp_path / "work"))
    nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": str(PROJECT_ROOT)}}).execute()
    printed = "".join(output.get("text", "") for output in notebook.cells[-1].outputs)
    summary = json.loads(printed.strip().splitlines()[-1])
    assert summary["accelerator"] == "cpu"
    assert 0.0 <= summary["eval_accuracy"] <= 1.0
    assert len(summary["served_labels"]) == 2
    assert set(summary["served_labels"]) <= {"none", "city"}
    for row in summary["probabilities"]:
        assert abs(sum(row) - 1.0) < 1e-2
    assert (tmp_path / "work" / "exported_classifier" / "assets" / "bert_config.json").exists()

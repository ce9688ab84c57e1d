"""The one switch of the CPU speed-ups (bert_tf.model.cpu_kernels, bert_tf.huge_pages): its modes
and the environment variable that sets it when no flag or call does. No TensorFlow here: the
huge-page restart reads it before TensorFlow is imported."""
import os

CPU_SWITCH_VARIABLE = "BERT_TF_CPU_KERNELS"
CPU_KERNELS_MODES = ("auto", "on", "off")


def cpu_switch_from_environment(environ=os.environ):
    """The switch as the environment sets it ("auto" when unset)."""
    return environ.get(CPU_SWITCH_VARIABLE, "auto")

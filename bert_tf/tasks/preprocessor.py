"""What every task's preprocessor shares: padding a split to whole batches (`pad_to_batch`)."""
from bert_tf.errors import InputError


def pad_to_batch(items, batch_size, padding):
    """(`items` followed by copies of `padding`, the task's item that stands for no example
    (`is_real_example` 0), until their count is a multiple of `batch_size`; the number of real
    items). Fixed-size batches then see every real item once, and results weigh padding out.
    The input is not modified."""
    if batch_size < 1:
        raise InputError(f"the batch size must be positive, got {batch_size}")
    padded = list(items)
    num_real = len(padded)
    padded.extend([padding] * (-num_real % batch_size))
    return padded, num_real

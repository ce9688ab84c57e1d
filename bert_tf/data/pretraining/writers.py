"""TFRecord files written from already-framed record bytes, under a temporary name renamed into
place on success (`RecordFileWriter`, `record_writers`), gzip-compressed or not, local or remote
(gs://... through TensorFlow's gfile).
"""
import contextlib
import gzip as gzip_lib
import os

from bert_tf import io_utils
from bert_tf.errors import file_error


class RecordFileWriter:
    """Appends already-framed TFRecord bytes to a file written under a temporary name.

    `commit()` renames it to its final name; `discard()` (or an exception in a `with` block)
    removes it, so a run that fails or is killed never leaves a truncated file under the final
    name. With `gzip=True` the file is one gzip stream (TFRecordDataset compression_type="GZIP").
    """

    def __init__(self, path, gzip=False):
        self.path = path
        io_utils.remove_stale_temporaries(path)  # what a killed earlier run left
        self.tmp_path = io_utils.temporary_path(path)
        try:
            if "://" in path:
                self._raw = _remote_gfile(self.tmp_path)
            else:
                if os.path.dirname(path):
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                self._raw = open(self.tmp_path, "wb")
        except OSError as e:
            raise file_error(path, f"cannot write the output file ({e.strerror or e})") from None
        # mtime=0 and no file name in the header: reruns give identical bytes.
        self._file = (gzip_lib.GzipFile(filename="", fileobj=self._raw, mode="wb", compresslevel=6,
                                        mtime=0) if gzip else self._raw)
        self.num_records = 0
        self.num_bytes = 0

    def write(self, framed_records, num_records):
        self._file.write(framed_records)
        self.num_records += num_records
        self.num_bytes += len(framed_records)

    def commit(self):
        if self._file is not self._raw:
            self._file.close()
        self._raw.close()
        _rename(self.tmp_path, self.path)

    def discard(self):
        with contextlib.suppress(Exception):
            self._raw.close()
        with contextlib.suppress(Exception):
            io_utils.remove_path(self.tmp_path)


def _remote_gfile(path):
    import tensorflow as tf

    return tf.io.gfile.GFile(path, "wb")


def _rename(src, dst):
    if "://" in dst:
        import tensorflow as tf

        tf.io.gfile.rename(src, dst, overwrite=True)
    else:
        os.replace(src, dst)


@contextlib.contextmanager
def record_writers(output_files, gzip=False):
    """Opens a `RecordFileWriter` per output file; all are renamed into place only on success."""
    writers = []
    try:
        for path in output_files:
            writers.append(RecordFileWriter(path, gzip=gzip))
        yield writers
        for writer in writers:
            writer.commit()
    except BaseException:
        for writer in writers:
            writer.discard()
        raise

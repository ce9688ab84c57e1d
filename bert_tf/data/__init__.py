"""Records: the pretraining data generator (the original's create_pretraining_data, also
streaming and on Beam), the TFRecord feature specs and writers, and the tf.data pipelines that
read records into batches."""

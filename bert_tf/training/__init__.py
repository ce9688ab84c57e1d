"""Running a task: the driver (`runner.run`), the train / eval / predict loops, the optimizers
and the tf.distribute strategies."""

"""IPUStrategy: the tf.distribute strategy that targets emulated IPUs."""

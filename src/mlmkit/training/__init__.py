"""What pretraining and fine-tuning share: the training runtime (device, precision, ranks),
DDP and FSDP, checkpoints, signals, schedules, optimizers, the metrics log, and the Objective
interface with its objectives (`mlmkit.training.objectives`)."""

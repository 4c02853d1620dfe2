"""Pretraining: the config, the loop, checkpoints and resume, logging and plots."""

from mlmkit.train.config import PretrainConfig, load_config
from mlmkit.train.loop import PretrainResult, pretrain

__all__ = ["PretrainConfig", "PretrainResult", "load_config", "pretrain"]

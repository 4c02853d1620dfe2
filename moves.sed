# mlmkit module moves (floors): sed -E -i -f moves.sed FILE...  (GNU sed)
# names that moved to another module than their old module's (before the module moves)
s/\bfrom mlmkit\.train\.distributed import build_runtime_from_env$/from mlmkit.training.launch import build_runtime_from_env/
s/\bfrom mlmkit\.train\.fsdp import check_sharded$/from mlmkit.training.checkpoint import check_sharded/
s/\bfrom mlmkit\.train\.config import init_positions$/from mlmkit.models.preset_table import init_positions/
s/\bfrom mlmkit\.models\.presets import (FAMILIES|SIZES|PRESET_POSITIONS|MAX_POSITIONS|ROPE_FAMILIES|FAMILY_INFO|Family|parse_preset|Size)((, (FAMILIES|SIZES|PRESET_POSITIONS|MAX_POSITIONS|ROPE_FAMILIES|FAMILY_INFO|Family|parse_preset|Size))*)$/from mlmkit.models.preset_table import \1\2/
s/\bfrom mlmkit\.train\.phases import (RUN_CORPUS|PHASE_KEYS|LR_KEYS|LR_SHAPES|LRPiece|Phase|parse_phases|scale_phases|phase_limit|check_config_phases)((, (RUN_CORPUS|PHASE_KEYS|LR_KEYS|LR_SHAPES|LRPiece|Phase|parse_phases|scale_phases|phase_limit|check_config_phases))*)$/from mlmkit.pretraining.phase_specs import \1\2/
s/\bmlmkit\.train\.pretrain\b/mlmkit.pretraining.pretrain/g
s/\bfrom mlmkit\.generate\.choose import (uniform_to_gumbel|gumbel_noise)((, (uniform_to_gumbel|gumbel_noise))*)$/from mlmkit.core.gumbel import \1\2/
s/\bfrom mlmkit\.scoring\.engine import (BatchArrays|concatenated_ranges|cut_batches|default_batch_tokens|max_rows_for_head|pick|run_jobs)((, (BatchArrays|concatenated_ranges|cut_batches|default_batch_tokens|max_rows_for_head|pick|run_jobs))*)$/from mlmkit.engine.batching import \1\2/
s/\bfrom mlmkit\.models\.load import resolve_device$/from mlmkit.core.devices import resolve_device/
s/\bfrom mlmkit\.models import resolve_device$/from mlmkit.core.devices import resolve_device/
# modules
s/\bfrom mlmkit\.runtime import checks$/from mlmkit.core import checks/
s/\bfrom mlmkit\.runtime import checks as /from mlmkit.core import checks as /
s/\bmlmkit\.runtime\.checks\b/mlmkit.core.checks/g
s#\bmlmkit/runtime/checks\.py\b#mlmkit/core/checks.py#g
s/\bfrom mlmkit\.runtime import output$/from mlmkit.core import output/
s/\bfrom mlmkit\.runtime import output as /from mlmkit.core import output as /
s/\bmlmkit\.runtime\.output\b/mlmkit.core.output/g
s#\bmlmkit/runtime/output\.py\b#mlmkit/core/output.py#g
s/\bfrom mlmkit\.runtime import progress$/from mlmkit.core import progress/
s/\bfrom mlmkit\.runtime import progress as /from mlmkit.core import progress as /
s/\bmlmkit\.runtime\.progress\b/mlmkit.core.progress/g
s#\bmlmkit/runtime/progress\.py\b#mlmkit/core/progress.py#g
s/\bfrom mlmkit\.runtime import records$/from mlmkit.core import records/
s/\bfrom mlmkit\.runtime import records as /from mlmkit.core import records as /
s/\bmlmkit\.runtime\.records\b/mlmkit.core.records/g
s#\bmlmkit/runtime/records\.py\b#mlmkit/core/records.py#g
s/\bfrom mlmkit\.runtime import results$/from mlmkit.core import results/
s/\bfrom mlmkit\.runtime import results as /from mlmkit.core import results as /
s/\bmlmkit\.runtime\.results\b/mlmkit.core.results/g
s#\bmlmkit/runtime/results\.py\b#mlmkit/core/results.py#g
s/\bfrom mlmkit\.runtime import yaml_values$/from mlmkit.core import yaml_values/
s/\bfrom mlmkit\.runtime import yaml_values as /from mlmkit.core import yaml_values as /
s/\bmlmkit\.runtime\.yaml_values\b/mlmkit.core.yaml_values/g
s#\bmlmkit/runtime/yaml_values\.py\b#mlmkit/core/yaml_values.py#g
s/\bfrom mlmkit\.runtime import devices$/from mlmkit.core import devices/
s/\bfrom mlmkit\.runtime import devices as /from mlmkit.core import devices as /
s/\bmlmkit\.runtime\.devices\b/mlmkit.core.devices/g
s#\bmlmkit/runtime/devices\.py\b#mlmkit/core/devices.py#g
s/\bfrom mlmkit\.runtime import hub$/from mlmkit.core import hub/
s/\bfrom mlmkit\.runtime import hub as /from mlmkit.core import hub as /
s/\bmlmkit\.runtime\.hub\b/mlmkit.core.hub/g
s#\bmlmkit/runtime/hub\.py\b#mlmkit/core/hub.py#g
s/\bfrom mlmkit\.runtime import staging$/from mlmkit.core import staging/
s/\bfrom mlmkit\.runtime import staging as /from mlmkit.core import staging as /
s/\bmlmkit\.runtime\.staging\b/mlmkit.core.staging/g
s#\bmlmkit/runtime/staging\.py\b#mlmkit/core/staging.py#g
s/\bmlmkit\.cache\b/mlmkit.core.cache/g
s#\bmlmkit/cache\.py\b#mlmkit/core/cache.py#g
s/\bfrom mlmkit\.bias import bootstrap$/from mlmkit.core import statistics/
s/\bfrom mlmkit\.bias import bootstrap as /from mlmkit.core import statistics as /
s/\bmlmkit\.bias\.bootstrap\b/mlmkit.core.statistics/g
s#\bmlmkit/bias/bootstrap\.py\b#mlmkit/core/statistics.py#g
s/\bfrom mlmkit\.objectives import cross_entropy$/from mlmkit.models import cross_entropy/
s/\bfrom mlmkit\.objectives import cross_entropy as /from mlmkit.models import cross_entropy as /
s/\bmlmkit\.objectives\.cross_entropy\b/mlmkit.models.cross_entropy/g
s#\bmlmkit/objectives/cross_entropy\.py\b#mlmkit/models/cross_entropy.py#g
s/\bfrom mlmkit\.runtime import batching$/from mlmkit.engine import batching/
s/\bfrom mlmkit\.runtime import batching as /from mlmkit.engine import batching as /
s/\bmlmkit\.runtime\.batching\b/mlmkit.engine.batching/g
s#\bmlmkit/runtime/batching\.py\b#mlmkit/engine/batching.py#g
s/\bfrom mlmkit\.runtime import distributed$/from mlmkit.engine import process_group/
s/\bfrom mlmkit\.runtime import distributed as /from mlmkit.engine import process_group as /
s/\bmlmkit\.runtime\.distributed\b/mlmkit.engine.process_group/g
s#\bmlmkit/runtime/distributed\.py\b#mlmkit/engine/process_group.py#g
s/\bfrom mlmkit\.train import checkpoint$/from mlmkit.training import checkpoint/
s/\bfrom mlmkit\.train import checkpoint as /from mlmkit.training import checkpoint as /
s/\bmlmkit\.train\.checkpoint\b/mlmkit.training.checkpoint/g
s#\bmlmkit/train/checkpoint\.py\b#mlmkit/training/checkpoint.py#g
s/\bfrom mlmkit\.train import signals$/from mlmkit.training import signals/
s/\bfrom mlmkit\.train import signals as /from mlmkit.training import signals as /
s/\bmlmkit\.train\.signals\b/mlmkit.training.signals/g
s#\bmlmkit/train/signals\.py\b#mlmkit/training/signals.py#g
s/\bfrom mlmkit\.train import schedule$/from mlmkit.training import schedule/
s/\bfrom mlmkit\.train import schedule as /from mlmkit.training import schedule as /
s/\bmlmkit\.train\.schedule\b/mlmkit.training.schedule/g
s#\bmlmkit/train/schedule\.py\b#mlmkit/training/schedule.py#g
s/\bfrom mlmkit\.train import optimizer$/from mlmkit.training import optimizer/
s/\bfrom mlmkit\.train import optimizer as /from mlmkit.training import optimizer as /
s/\bmlmkit\.train\.optimizer\b/mlmkit.training.optimizer/g
s#\bmlmkit/train/optimizer\.py\b#mlmkit/training/optimizer.py#g
s/\bfrom mlmkit\.train import stable_adamw$/from mlmkit.training import stable_adamw/
s/\bfrom mlmkit\.train import stable_adamw as /from mlmkit.training import stable_adamw as /
s/\bmlmkit\.train\.stable_adamw\b/mlmkit.training.stable_adamw/g
s#\bmlmkit/train/stable_adamw\.py\b#mlmkit/training/stable_adamw.py#g
s/\bfrom mlmkit\.train import metrics_log$/from mlmkit.training import metrics_log/
s/\bfrom mlmkit\.train import metrics_log as /from mlmkit.training import metrics_log as /
s/\bmlmkit\.train\.metrics_log\b/mlmkit.training.metrics_log/g
s#\bmlmkit/train/metrics_log\.py\b#mlmkit/training/metrics_log.py#g
s/\bfrom mlmkit\.train import fsdp$/from mlmkit.training import fsdp/
s/\bfrom mlmkit\.train import fsdp as /from mlmkit.training import fsdp as /
s/\bmlmkit\.train\.fsdp\b/mlmkit.training.fsdp/g
s#\bmlmkit/train/fsdp\.py\b#mlmkit/training/fsdp.py#g
s/\bfrom mlmkit\.train import distributed$/from mlmkit.training import ddp/
s/\bfrom mlmkit\.train import distributed as /from mlmkit.training import ddp as /
s/\bmlmkit\.train\.distributed\b/mlmkit.training.ddp/g
s#\bmlmkit/train/distributed\.py\b#mlmkit/training/ddp.py#g
s/\bfrom mlmkit\.train import runtime$/from mlmkit.training import runtime/
s/\bfrom mlmkit\.train import runtime as /from mlmkit.training import runtime as /
s/\bmlmkit\.train\.runtime\b/mlmkit.training.runtime/g
s#\bmlmkit/train/runtime\.py\b#mlmkit/training/runtime.py#g
s/\bfrom mlmkit\.train import objective$/from mlmkit.training import objective/
s/\bfrom mlmkit\.train import objective as /from mlmkit.training import objective as /
s/\bmlmkit\.train\.objective\b/mlmkit.training.objective/g
s#\bmlmkit/train/objective\.py\b#mlmkit/training/objective.py#g
s/\bfrom mlmkit\.objectives import mlm$/from mlmkit.training.objectives import mlm/
s/\bfrom mlmkit\.objectives import mlm as /from mlmkit.training.objectives import mlm as /
s/\bmlmkit\.objectives\.mlm\b/mlmkit.training.objectives.mlm/g
s#\bmlmkit/objectives/mlm\.py\b#mlmkit/training/objectives/mlm.py#g
s/\bfrom mlmkit\.objectives import electra$/from mlmkit.training.objectives import electra/
s/\bfrom mlmkit\.objectives import electra as /from mlmkit.training.objectives import electra as /
s/\bmlmkit\.objectives\.electra\b/mlmkit.training.objectives.electra/g
s#\bmlmkit/objectives/electra\.py\b#mlmkit/training/objectives/electra.py#g
s/\bfrom mlmkit\.objectives import diffusion$/from mlmkit.training.objectives import diffusion/
s/\bfrom mlmkit\.objectives import diffusion as /from mlmkit.training.objectives import diffusion as /
s/\bmlmkit\.objectives\.diffusion\b/mlmkit.training.objectives.diffusion/g
s#\bmlmkit/objectives/diffusion\.py\b#mlmkit/training/objectives/diffusion.py#g
s/\bfrom mlmkit\.objectives import metrics$/from mlmkit.training.objectives import metrics/
s/\bfrom mlmkit\.objectives import metrics as /from mlmkit.training.objectives import metrics as /
s/\bmlmkit\.objectives\.metrics\b/mlmkit.training.objectives.metrics/g
s#\bmlmkit/objectives/metrics\.py\b#mlmkit/training/objectives/metrics.py#g
s/\bfrom mlmkit\.scoring import distributed$/from mlmkit.scoring import sharding/
s/\bfrom mlmkit\.scoring import distributed as /from mlmkit.scoring import sharding as /
s/\bmlmkit\.scoring\.distributed\b/mlmkit.scoring.sharding/g
s#\bmlmkit/scoring/distributed\.py\b#mlmkit/scoring/sharding.py#g
s/\bfrom mlmkit\.scoring import results$/from mlmkit.scoring import scores/
s/\bfrom mlmkit\.scoring import results as /from mlmkit.scoring import scores as /
s/\bmlmkit\.scoring\.results\b/mlmkit.scoring.scores/g
s#\bmlmkit/scoring/results\.py\b#mlmkit/scoring/scores.py#g
s/\bfrom mlmkit\.probe import results$/from mlmkit.probe import outcomes/
s/\bfrom mlmkit\.probe import results as /from mlmkit.probe import outcomes as /
s/\bmlmkit\.probe\.results\b/mlmkit.probe.outcomes/g
s#\bmlmkit/probe/results\.py\b#mlmkit/probe/outcomes.py#g
s/\bfrom mlmkit\.finetune import run$/from mlmkit.finetuning import trainer/
s/\bfrom mlmkit\.finetune import run as /from mlmkit.finetuning import trainer as /
s/\bmlmkit\.finetune\.run\b/mlmkit.finetuning.trainer/g
s#\bmlmkit/finetune/run\.py\b#mlmkit/finetuning/trainer.py#g
s/\bfrom mlmkit\.runtime import checks, staging$/from mlmkit.core import checks, staging/
s/\bmlmkit\.objectives\b/mlmkit.training.objectives/g
s#\bmlmkit/objectives/#mlmkit/training/objectives/#g
s/\bmlmkit\.train\b/mlmkit.pretraining/g
s#\bmlmkit/train/#mlmkit/pretraining/#g
s/\bmlmkit\.generate\./mlmkit.generation./g
s/\bfrom mlmkit\.generate import\b/from mlmkit.generation import/g
s/\bimport mlmkit\.generate$/import mlmkit.generation/
s#\bmlmkit/generate/#mlmkit/generation/#g
s/\bmlmkit\.finetune\./mlmkit.finetuning./g
s/\bfrom mlmkit\.finetune import\b/from mlmkit.finetuning import/g
s/\bimport mlmkit\.finetune$/import mlmkit.finetuning/
s#\bmlmkit/finetune/#mlmkit/finetuning/#g
s#\bmlmkit/runtime/#mlmkit/core/#g
s/\bmlmkit\.scoring\.engine\b/mlmkit.scoring.masked_copies/g
s#\bmlmkit/scoring/engine\.py\b#mlmkit/scoring/masked_copies.py#g
s/\bfrom mlmkit\.scoring import engine$/from mlmkit.scoring import masked_copies/
# test files moved into folders that mirror the package
s#\btests/test_numeric_checks\.py\b#tests/core/test_numeric_checks.py#g
s#\btests/test_yaml_values\.py\b#tests/core/test_yaml_values.py#g
s#\btests/test_bias_stats\.py\b#tests/core/test_bias_stats.py#g
s#\btests/test_batching\.py\b#tests/engine/test_batching.py#g
s#\btests/test_models\.py\b#tests/models/test_models.py#g
s#\btests/test_models_families\.py\b#tests/models/test_models_families.py#g
s#\btests/test_models_load\.py\b#tests/models/test_models_load.py#g
s#\btests/test_model_info\.py\b#tests/models/test_model_info.py#g
s#\btests/test_sparse_last_layer\.py\b#tests/models/test_sparse_last_layer.py#g
s#\btests/test_unpadded\.py\b#tests/models/test_unpadded.py#g
s#\btests/test_trust_remote_code_flag\.py\b#tests/models/test_trust_remote_code_flag.py#g
s#\btests/test_tokenizer\.py\b#tests/models/test_tokenizer.py#g
s#\btests/test_fast_training_ops\.py\b#tests/models/test_fast_training_ops.py#g
s#\btests/test_masking\.py\b#tests/masking/test_masking.py#g
s#\btests/test_masking_rates\.py\b#tests/masking/test_masking_rates.py#g
s#\btests/test_masking_stats\.py\b#tests/masking/test_masking_stats.py#g
s#\btests/test_masking_units\.py\b#tests/masking/test_masking_units.py#g
s#\btests/test_loss_weights\.py\b#tests/masking/test_loss_weights.py#g
s#\btests/test_corpus\.py\b#tests/corpus/test_corpus.py#g
s#\btests/test_corpus_mixture\.py\b#tests/corpus/test_corpus_mixture.py#g
s#\btests/test_scale_tokenize\.py\b#tests/corpus/test_scale_tokenize.py#g
s#\btests/test_scoring_api\.py\b#tests/scoring/test_scoring_api.py#g
s#\btests/test_scoring_engine\.py\b#tests/scoring/test_scoring_engine.py#g
s#\btests/test_scoring_rescore\.py\b#tests/scoring/test_scoring_rescore.py#g
s#\btests/test_scoring_resume\.py\b#tests/scoring/test_scoring_resume.py#g
s#\btests/test_scoring_stream\.py\b#tests/scoring/test_scoring_stream.py#g
s#\btests/test_scoring_unk\.py\b#tests/scoring/test_scoring_unk.py#g
s#\btests/test_score_shards\.py\b#tests/scoring/test_score_shards.py#g
s#\btests/test_minicons_reference\.py\b#tests/scoring/test_minicons_reference.py#g
s#\btests/test_generate\.py\b#tests/generation/test_generate.py#g
s#\btests/test_generate_choice\.py\b#tests/generation/test_generate_choice.py#g
s#\btests/test_generate_elbo\.py\b#tests/generation/test_generate_elbo.py#g
s#\btests/test_fill_mask\.py\b#tests/generation/test_fill_mask.py#g
s#\btests/test_sampling\.py\b#tests/generation/test_sampling.py#g
s#\btests/test_sampling_checks\.py\b#tests/generation/test_sampling_checks.py#g
s#\btests/test_probe\.py\b#tests/probe/test_probe.py#g
s#\btests/test_bias_crows\.py\b#tests/bias/test_bias_crows.py#g
s#\btests/test_bias_stereoset\.py\b#tests/bias/test_bias_stereoset.py#g
s#\btests/test_ddp\.py\b#tests/training/test_ddp.py#g
s#\btests/test_fsdp\.py\b#tests/training/test_fsdp.py#g
s#\btests/test_stable_adamw\.py\b#tests/training/test_stable_adamw.py#g
s#\btests/test_checkpoint_files\.py\b#tests/training/test_checkpoint_files.py#g
s#\btests/test_electra\.py\b#tests/training/test_electra.py#g
s#\btests/test_diffusion\.py\b#tests/training/test_diffusion.py#g
s#\btests/test_train_heap\.py\b#tests/training/test_train_heap.py#g
s#\btests/test_pretrain\.py\b#tests/pretraining/test_pretrain.py#g
s#\btests/test_recipes\.py\b#tests/pretraining/test_recipes.py#g
s#\btests/test_run_state\.py\b#tests/pretraining/test_run_state.py#g
s#\btests/test_train_validation\.py\b#tests/pretraining/test_train_validation.py#g
s#\btests/test_batch_warmup\.py\b#tests/pretraining/test_batch_warmup.py#g
s#\btests/test_finetune\.py\b#tests/finetuning/test_finetune.py#g
s#\btests/test_eval_suite\.py\b#tests/evaluation/test_eval_suite.py#g
s#\btests/test_cli\.py\b#tests/cli/test_cli.py#g
s#\btests/test_cli_contract\.py\b#tests/cli/test_cli_contract.py#g
s#\btests/test_fuzz_cli\.py\b#tests/cli/test_fuzz_cli.py#g
s#\btests/test_bias_cli\.py\b#tests/cli/test_bias_cli.py#g
s#\btests/test_scoring_cli\.py\b#tests/cli/test_scoring_cli.py#g
s#\btests/test_generate_cli\.py\b#tests/cli/test_generate_cli.py#g
s#\btests/test_serve\.py\b#tests/serve/test_serve.py#g
s#\btests/test_serve_browser\.py\b#tests/serve/test_serve_browser.py#g
s#\btests/test_serve_checker\.py\b#tests/serve/test_serve_checker.py#g
s#\btests/test_serve_copy_code\.py\b#tests/serve/test_serve_copy_code.py#g
s#\btests/test_serve_parity\.py\b#tests/serve/test_serve_parity.py#g
s#\btests/test_ray\.py\b#tests/integrations/test_ray.py#g
s/\bfrom tests\.test_serve_browser import\b/from tests.serve.test_serve_browser import/g
s/\bfrom tests\.test_pretrain import\b/from tests.pretraining.test_pretrain import/g

"""The bottom floor every feature stands on: argument checks, devices and threads, progress,
reading records, writing outputs atomically, results, YAML values, the hub and the cache,
bootstrap statistics. Nothing here imports a model or a task; find the helper here before
writing another."""

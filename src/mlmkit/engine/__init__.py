"""The machinery the tasks share above the models: token-budget batching of jobs through the
masked-LM primitive, and the torchrun process group."""

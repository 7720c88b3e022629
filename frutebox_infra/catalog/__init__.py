"""The catalog: the schema of what `registry/` states (models, GPUs, images, data centres),
reading and validating its files, what each pinned engine version accepts, and the speed model's
facts. Everything a model is lives in `registry/`; this package only types and checks it."""

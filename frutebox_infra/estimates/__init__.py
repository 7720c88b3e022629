"""Estimates from first principles: will a model fit a placement (weights, KV cache, engine
reserve per GPU), and how fast it decodes and prefills there. Pure functions of the catalog."""

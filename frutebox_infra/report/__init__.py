"""Renderings of a plan or the catalog: one module per format, each returning a string."""

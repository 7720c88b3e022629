"""Seeding: a cheap CPU pod puts each model's weights on the volume before its GPU pod bills."""

"""Plumbing every layer stands on: domain errors, where the checkout's files are, YAML read
as Pulumi reads it, RFC 3339 times read by one rule, pydantic validation at the edge, and the
validated-input cache that spares a run validating the registry and stack files again when
nothing changed."""

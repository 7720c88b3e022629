"""The official OpenAPI document's request schemas, checked with jsonschema (Draft 2020-12)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

OPENAPI_URI = "urn:runpod:openapi-v2"


def load_openapi() -> dict[str, Any]:
    text = resources.files("frutebox_infra.emulator").joinpath("openapi-v2.json").read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


class OpenApi:
    """The official OpenAPI document's schemas, each instance checked as Draft 2020-12."""

    def __init__(self, document: Mapping[str, Any] | None = None) -> None:
        contents = dict(document) if document is not None else load_openapi()
        resource = Resource.from_contents(contents, default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(OPENAPI_URI, resource)
        self._validators: dict[str, Draft202012Validator] = {}

    def errors(self, schema: str, instance: Any) -> list[str]:
        """Each violation as `json-path: message`, like the API's `errors` array."""
        validator = self._validators.get(schema)
        if validator is None:
            ref = {"$ref": f"{OPENAPI_URI}#/components/schemas/{schema}"}
            validator = Draft202012Validator(ref, registry=self._registry)
            self._validators[schema] = validator
        found = list(validator.iter_errors(instance))

        # A failing subschema drops its annotations, so unevaluatedProperties then also flags
        # valid keys; keep it only where nothing more precise was reported at or below it.
        def shadowed(e: ValidationError) -> bool:
            return e.validator == "unevaluatedProperties" and any(
                f.json_path.startswith(e.json_path + ".")
                or (f.json_path == e.json_path and f.validator != "unevaluatedProperties")
                for f in found
            )

        kept = [e for e in found if not shadowed(e)]
        return sorted(f"{e.json_path}: {e.message}" for e in kept)

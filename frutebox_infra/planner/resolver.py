"""The resolver: for one model, the engine, the pod per placement, and the ranked placements.

Every reason a model cannot be served is a `PlanProblem` (ours, not RunPod's RFC 9457 problem)
naming the rule and the fix, checked in a fixed order so the most fundamental blocker is the one
reported.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from frutebox_infra.catalog.schema import Cloud, Image, Model, Registry, Runtime
from frutebox_infra.planner.ranking import Candidate, PlacementOption, Ranking, rank
from frutebox_infra.recipes import ENGINE_PREFERENCE, RECIPES, SERVABLE_RUNTIMES, Recipe
from frutebox_infra.recipes.base import ServeOptions, Serving
from frutebox_infra.recipes.gateway import GatewaySetup

DEFAULT_OPTIONS = ServeOptions()


@dataclass(frozen=True, kw_only=True)
class PlanProblem:
    """A reason preview must fail: which rule, what happened, and what to do."""

    rule: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.message} [{self.rule}]. Fix: {self.fix}"


@dataclass(frozen=True, kw_only=True)
class Resolution:
    """Everything the planner and reports need about one model, derived once."""

    model_id: str
    model: Model | None = None
    recipe: Recipe | None = None
    image: Image | None = None
    serving: Serving | None = None
    problem: PlanProblem | None = None
    warnings: tuple[str, ...] = ()
    """The model's own: its source, its serving; a pod's notes come with `warnings_with`."""
    ranking: Ranking | None = None

    def warnings_with(self, placement: PlacementOption | None) -> tuple[str, ...]:
        """The warnings of serving on `placement`: the pod taken, not one a floor refused."""
        if placement is None:
            return self.warnings
        return self.warnings + placement.recipe.pod_notes(placement.model)

    @property
    def placements(self) -> tuple[PlacementOption, ...]:
        """Per fitting GPU type its smallest count, cheapest first (then less VRAM)."""
        return self.ranking.placements() if self.ranking else ()

    @property
    def considered(self) -> tuple[Candidate, ...]:
        """Every GPU type considered: the refused ones with why, then each placement's."""
        if self.ranking is None:
            return ()
        return self.ranking.refused + tuple(
            Candidate(
                gpu=p.gpu, count=p.count, usd_per_hour=p.usd_per_hour, fit=p.fit, rejected=None
            )
            for p in self.placements
        )

    @property
    def servable(self) -> bool:
        return self.problem is None and self.ranking is not None and bool(self.ranking.ranked)

    @property
    def exposure(self) -> Exposure | None:
        """Who can reach its pods; None where it has no engine to serve it."""
        if self.recipe is None or self.serving is None:
            return None
        return exposure_of(self.recipe, self.serving)

    @property
    def engine(self) -> str | None:
        return str(self.recipe.runtime) if self.recipe else None


@dataclass(frozen=True, kw_only=True)
class Exposure:
    """Who can reach a model's published URL: only clients with the stack's key (its pod
    starts the gateway, the engine on loopback), or anyone, and why."""

    keyed: bool
    reason: str
    private_port: int | None = None
    """Set on a private stack's model: the port its pod serves on over global networking
    (no port published), at `<podId>.runpod.internal:<port>`, from the account's own pods."""

    @property
    def private(self) -> bool:
        return self.private_port is not None

    @property
    def who(self) -> str:
        if self.private:
            return "own pods, key (gateway)" if self.keyed else "own pods"
        return "key (gateway)" if self.keyed else "anyone"

    @property
    def address(self) -> str | None:
        """Where the account's own pods reach a private model; None on a public stack."""
        return None if self.private_port is None else internal_address(self.private_port)

    @property
    def text(self) -> str:
        if self.private:
            key = "with the key (gateway)" if self.keyed else (
                f"without a key (no gateway yet: {self.reason})")  # fmt: skip
            return (
                f"private: only the account's own GPU pods, {key}, at {self.address}"
                " (global networking; no port published, nothing on RunPod's proxy)"
            )
        return self.who if self.keyed else f"anyone — no gateway yet: {self.reason}"


INTERNAL_HOST = "<podId>.runpod.internal"
"""A globally-networked pod's private name (RunPod docs, pods/networking)."""


def internal_address(port: int, pod_id: str | None = None) -> str:
    """`<podId>.runpod.internal:<port>`: a private pod as the account's own pods reach it."""
    host = INTERNAL_HOST if pod_id is None else f"{pod_id}.runpod.internal"
    return f"{host}:{port}"


def exposure_of(recipe: Recipe, serving: Serving) -> Exposure:
    """Who can reach the pods `recipe` renders with `serving`, and why."""
    if serving.gateway is not None:
        return Exposure(
            keyed=True,
            reason="its gateway asks every request for the stack's key and forwards only the"
            " routes clients use to the engine on loopback",
        )
    return Exposure(
        keyed=False,
        reason=f"the registry has no gateway release (registry/images.yaml `gateway`) or"
        f" no {recipe.runtime} routes (registry/routes.yaml)",
    )


def gateway_setup(registry: Registry, recipe: Recipe) -> GatewaySetup | None:
    """The gateway `recipe`'s pods start in front of the engine, or None: the registry has no
    gateway release or no routes for the engine."""
    routes = registry.engine_routes.get(recipe.runtime)
    if registry.gateway is None or routes is None:
        return None
    return GatewaySetup(release=registry.gateway, routes=routes)


def resolve(
    registry: Registry,
    model_id: str,
    options: ServeOptions = DEFAULT_OPTIONS,
    *,
    cloud: Cloud = Cloud.SECURE,
    gpu_id: str | None = None,
    gpu_count: int | None = None,
    engine: str | None = None,
) -> Resolution:
    """Resolve `model_id`; `gpu_id` pins the placement to one GPU type, `gpu_count` to one
    count, and `engine` to one of the model's runtimes."""
    model = registry.model(model_id)
    if model is None:
        return Resolution(model_id=model_id, problem=_unknown(model_id))
    problem, recipe = _engine_for(model) if engine is None else _pinned_engine(model, engine)
    if problem is not None or recipe is None:
        return Resolution(model_id=model_id, model=model, problem=problem)
    image = registry.images.get(recipe.runtime)
    if image is None:
        problem = PlanProblem(
            rule="no-image",
            message=f"{model_id}: engine {recipe.runtime} has no image in registry/images.yaml",
            fix=f"add an `images.{recipe.runtime}` entry with a pinned tag",
        )
        return Resolution(model_id=model_id, model=model, recipe=recipe, problem=problem)
    too_old = recipe.image_problem(model, image)
    if too_old is not None:
        problem = PlanProblem(
            rule="image-cannot-serve",
            message=f"{model_id} {too_old}",
            fix=f"pin a newer {recipe.runtime} image in registry/images.yaml (and set its"
            " engine_version)",
        )
        return Resolution(
            model_id=model_id, model=model, recipe=recipe, image=image, problem=problem
        )
    refused = recipe.options_problem(model, options)
    if refused is not None:
        what, fix = refused
        problem = PlanProblem(rule="override-refused", message=f"{model_id}: {what}", fix=fix)
        return Resolution(
            model_id=model_id, model=model, recipe=recipe, image=image, problem=problem
        )
    if not options.hf_token_configured and recipe.gated_pull(model):
        return Resolution(
            model_id=model_id, model=model, recipe=recipe, image=image, problem=_gated(model)
        )
    serving = recipe.serving(model, options)
    gateway = gateway_setup(registry, recipe)
    if gateway is not None:
        serving = replace(serving, gateway=gateway)
    if options.prompt_tokens is not None and serving.token_context:
        serving = replace(
            serving, prompt_tokens=options.prompt_tokens, output_tokens=options.output_tokens
        )
        too_long = _workload_problem(model, serving)
        if too_long is not None:
            return Resolution(
                model_id=model_id,
                model=model,
                recipe=recipe,
                image=image,
                serving=serving,
                problem=too_long,
            )
    warnings = (*serving.warnings, *_image_warnings(image), *_weights_warnings(model, recipe))
    if model.id != model_id:
        warnings = (_renamed(model, model_id), *warnings)
    ranking = rank(registry, model, recipe, image, serving, options, cloud, gpu_id, gpu_count)
    problem = None
    if not ranking.ranked:
        problem = _no_placement(model, recipe, serving, ranking.refused, gpu_id, gpu_count)
    return Resolution(
        model_id=model_id,
        model=model,
        recipe=recipe,
        image=image,
        serving=serving,
        problem=problem,
        warnings=warnings,
        ranking=ranking,
    )


def _engine_for(model: Model) -> tuple[PlanProblem | None, Recipe | None]:
    """The first engine by preference that has a recipe for the model, or the rule that fails."""
    mid = model.id
    if model.source_unavailable:
        return PlanProblem(
            rule="no-open-weights",
            message=f"{mid} has no open weights: {model.source_unavailable}",
            fix="disarm it; it cannot be self-hosted",
        ), None
    source = model.source
    if source is None:
        return PlanProblem(
            rule="no-pinned-source",
            message=f"{mid} has no pinned source in registry/models.yaml, so there is nowhere "
            "to fetch"
            " its weights from",
            fix=f"add `source:` (hf_repo + revision, gguf repo + quant, or ollama_tag) to {mid}",
        ), None
    runtimes = model.runtimes
    if "ollama" in runtimes and not source.ollama_tag:
        return PlanProblem(
            rule="no-ollama-tag",
            message=f"{mid} declares runtime 'ollama' but has no source.ollama_tag (a catalog id is"
            " not a pullable tag)",
            fix=f"add the Ollama library tag (e.g. 'qwen3:8b') as source.ollama_tag of {mid}",
        ), None
    # Where an engine is found, the model declares a runtime we serve: the two rules below
    # hold, so they are asked only where none is.
    for recipe in ENGINE_PREFERENCE:
        if recipe.runtime in runtimes and recipe.missing(model) is None:
            return None, recipe
    if not runtimes:
        return PlanProblem(
            rule="no-runtime",
            message=f"{mid} declares no runtime",
            fix=f"list the engines that can serve it under `runtimes:` of {mid}",
        ), None
    if SERVABLE_RUNTIMES.isdisjoint(model.runtimes):
        declared = ", ".join(model.runtimes)
        built = ", ".join(sorted(SERVABLE_RUNTIMES))
        return PlanProblem(
            rule="no-engine",
            message=f"{mid} declares runtime(s) {declared}; we build serving commands only for "
            f"{built}",
            fix="declare one of those runtimes, or add a recipe module in frutebox_infra/recipes/",
        ), None
    first = next(r for r in ENGINE_PREFERENCE if r.runtime in runtimes)
    return PlanProblem(
        rule="no-recipe",
        message=f"{mid} declares runtime '{first.runtime}' but {first.missing(model)}",
        fix=f"add those facts to {mid} in registry/models.yaml, from a checked source",
    ), None


def _pinned_engine(model: Model, engine: str) -> tuple[PlanProblem | None, Recipe | None]:
    """The engine an override names, when the model declares it and we have its recipe."""
    key = f"frutebox-infra:overrides.{model.id}.engine"
    declared = ", ".join(model.runtimes) or "none"
    if engine not in model.runtimes:
        return PlanProblem(
            rule="override-refused",
            message=f"{model.id}: overrides.{model.id}.engine is {engine}, which is not among the"
            f" runtimes registry/models.yaml gives it ({declared})",
            fix=f"set {key} to one of {declared}, or remove it",
        ), None
    recipe = RECIPES.get(Runtime(engine))
    if recipe is None:
        return PlanProblem(
            rule="no-engine",
            message=f"{model.id}: overrides.{model.id}.engine is {engine}, and we build serving"
            f" commands only for {', '.join(sorted(SERVABLE_RUNTIMES))}",
            fix=f"set {key} to one of those, or remove it",
        ), None
    missing = recipe.missing(model)
    if missing is not None:
        return PlanProblem(
            rule="no-recipe",
            message=f"{model.id}: overrides.{model.id}.engine is {engine}, but {missing}",
            fix=f"add those facts to {model.id} in registry/models.yaml, or remove {key}",
        ), None
    return None, recipe


def _workload_problem(model: Model, serving: Serving) -> PlanProblem | None:
    prompt, output = serving.prompt_tokens or 0, serving.output_tokens or 0
    if prompt + output <= serving.context_tokens:
        return None
    return PlanProblem(
        rule="workload-too-long",
        message=f"{model.id}: a request of promptTokens {prompt} + outputTokens {output} is "
        "longer than"
        f" the {serving.context_tokens} tokens of context it is served with",
        fix=f"lower frutebox-infra:promptTokens or outputTokens, or raise"
        f" frutebox-infra:overrides.{model.id}.context",
    )


def _renamed(model: Model, armed_id: str) -> str:
    return (
        f"{armed_id} is a former id of {model.id} (it named weights it does not serve); it"
        f" still works, but arm {model.id} instead: replace the id in the stack's models"
        " (and overrides) list"
    )


def _unknown(model_id: str) -> PlanProblem:
    return PlanProblem(
        rule="unknown-model",
        message=f"{model_id} is not in the model registry",
        fix="check the id with `frutebox models`, or add the model to registry/models.yaml",
    )


def _gated(model: Model) -> PlanProblem:
    repo = model.source.hf_repo if model.source else None
    if model.source and model.source.comfyui and model.source.comfyui.repo:
        repo = model.source.comfyui.repo
    return PlanProblem(
        rule="gated-no-token",
        message=f"{model.id} pulls from the gated repo {repo} and no Hugging Face token is "
        "configured,"
        " so the pull would answer 401 after the GPU is already billing",
        fix="accept the licence on Hugging Face, then `pulumi config set --secret"
        " frutebox-infra:hfToken <token>` (or export HF_TOKEN)",
    )


def _no_placement(
    model: Model,
    recipe: Recipe,
    serving: Serving,
    considered: tuple[Candidate, ...],
    gpu_id: str | None,
    gpu_count: int | None = None,
) -> PlanProblem:
    fitted = [c for c in considered if c.fit is not None]
    closest = max(
        fitted, key=lambda c: c.fit.available_gb - c.fit.needed_gb if c.fit else 0.0, default=None
    )
    detail = (
        f"; closest: {closest.count}x {closest.gpu.name} {closest.rejected}"
        if closest is not None
        else "; " + "; ".join(sorted({f"{c.gpu.name}: {c.rejected}" for c in considered}))
        if considered
        else ""
    )
    where = f" on {gpu_id}" if gpu_id else ""
    if gpu_count is not None:
        where += f" at {gpu_count} GPUs"
    return PlanProblem(
        rule="no-placement",
        message=f"{model.id} ({recipe.runtime}, {serving.weights_vram_gb:g} GB weights,"
        f" {serving.context_tokens} tokens context) fits no placement{where}{detail}",
        fix=f"lower its context (frutebox-infra:overrides.{model.id}.context), its concurrency,"
        " or unpin its GPU" + (" or its gpuCount" if gpu_count is not None else ""),
    )


def _image_warnings(image: Image) -> tuple[str, ...]:
    if image.pinned:
        return ()
    return (
        f"image {image.reference} is not pinned to a version: reverting config will not"
        " roll the engine back (pin a tag in registry/images.yaml)",
    )


def _weights_warnings(model: Model, recipe: Recipe) -> list[str]:
    warnings = []
    source = model.source
    comfy = source.comfyui if source else None
    repack_pinned = comfy is not None and comfy.repo is not None and comfy.revision is not None
    if (
        source
        and source.hf_repo
        and not source.revision
        and recipe.runtime in ("sglang", "vllm", "comfyui")
        and not repack_pinned
    ):
        warnings.append(
            f"weights {source.hf_repo} are not pinned to a revision: a pod pulls whatever"
            " `main` is that day (add source.revision)"
        )
    if comfy is not None and recipe.runtime == "comfyui":
        warnings += [
            f"{f.stored_name} from {f.repo} is not pinned to a revision: a pod pulls whatever"
            " `main` is that day (add its revision in source.comfyui.files)"
            for f in comfy.files
            if f.repo is not None and f.revision is None
        ]
    return warnings

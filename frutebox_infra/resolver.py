"""The resolver: for one model, the engine, the pod per placement, and the ranked placements.

Every reason a model cannot be served is a `PlanProblem` (ours, not RunPod's RFC 9457 problem)
naming the rule and the fix, checked in a fixed order so the most fundamental blocker is the one
reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from frutebox_infra.fit import Fit, FitRequest, estimate
from frutebox_infra.recipes import ENGINE_PREFERENCE, SERVABLE_RUNTIMES, PodSpec, Recipe
from frutebox_infra.recipes.base import ServeOptions, Serving
from frutebox_infra.registry import Cloud, Gpu, Image, Model, Registry

DEFAULT_OPTIONS = ServeOptions()


@dataclass(frozen=True)
class PlanProblem:
    """A reason preview must fail: which rule, what happened, and what to do."""

    rule: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"{self.message} [{self.rule}]. Fix: {self.fix}"


@dataclass(frozen=True)
class Candidate:
    """One GPU type as considered: the smallest count that fits, or why none does."""

    gpu: Gpu
    count: int | None
    usd_per_hour: float | None
    fit: Fit | None
    rejected: str | None


@dataclass(frozen=True)
class PlacementOption:
    """A placement that can run the model, with the exact pod it would run."""

    gpu: Gpu
    count: int
    usd_per_hour: float
    """USD per hour for the whole pod (price per GPU x count) in the stack's cloud."""
    fit: Fit
    recipe: Recipe = field(compare=False, repr=False)
    model: Model = field(compare=False, repr=False)
    image: Image = field(compare=False, repr=False)
    serving: Serving = field(compare=False, repr=False)
    seeded: bool = False
    """A CPU pod puts the weights on the volume first: the pod reads them offline."""

    @cached_property
    def pod(self) -> PodSpec:
        """Rendered on first use: most fitting placements are ranked, never deployed."""
        pod = self.recipe.pod(self.model, self.image, self.gpu, self.count, self.serving)
        return self.recipe.seeded_pod(pod) if self.seeded else pod

    @property
    def total_vram_gb(self) -> int:
        return self.gpu.vram_gb * self.count

    @property
    def label(self) -> str:
        return f"{self.count}x {self.gpu.name}"


@dataclass(frozen=True)
class Resolution:
    """Everything the planner and reports need about one model, derived once."""

    model_id: str
    model: Model | None = None
    recipe: Recipe | None = None
    image: Image | None = None
    serving: Serving | None = None
    problem: PlanProblem | None = None
    warnings: tuple[str, ...] = ()
    considered: tuple[Candidate, ...] = ()
    placements: tuple[PlacementOption, ...] = field(default=())

    @property
    def servable(self) -> bool:
        return self.problem is None and bool(self.placements)

    @property
    def engine(self) -> str | None:
        return str(self.recipe.runtime) if self.recipe else None


def resolve(
    registry: Registry,
    model_id: str,
    options: ServeOptions = DEFAULT_OPTIONS,
    *,
    cloud: Cloud = Cloud.SECURE,
    gpu_id: str | None = None,
) -> Resolution:
    """Resolve `model_id`; `gpu_id` pins the placement to one GPU type."""
    model = registry.model(model_id)
    if model is None:
        return Resolution(model_id, problem=_unknown(model_id))
    problem, recipe = _engine_for(model)
    if problem is not None or recipe is None:
        return Resolution(model_id, model, problem=problem)
    image = registry.images.get(recipe.runtime)
    if image is None:
        problem = PlanProblem(
            "no-image",
            f"{model_id}: engine {recipe.runtime} has no image in registry/images.yaml",
            f"add an `images.{recipe.runtime}` entry with a pinned tag",
        )
        return Resolution(model_id, model, recipe, problem=problem)
    too_old = recipe.image_problem(model, image)
    if too_old is not None:
        problem = PlanProblem(
            "image-cannot-serve",
            f"{model_id} {too_old}",
            f"pin a newer {recipe.runtime} image in registry/images.yaml (and set its"
            " engine_version)",
        )
        return Resolution(model_id, model, recipe, image, problem=problem)
    refused = recipe.options_problem(model, options)
    if refused is not None:
        what, fix = refused
        problem = PlanProblem("override-refused", f"{model_id}: {what}", fix)
        return Resolution(model_id, model, recipe, image, problem=problem)
    if recipe.gated_pull(model) and not options.hf_token_configured:
        return Resolution(model_id, model, recipe, image, problem=_gated(model))
    serving = recipe.serving(model, options)
    warnings = _renamed(model, model_id) + list(serving.warnings)
    warnings += _source_warnings(model, recipe, image)
    considered, placements = _rank(registry, model, recipe, image, serving, options, cloud, gpu_id)
    problem = None if placements else _no_placement(model, recipe, serving, considered, gpu_id)
    if placements:
        warnings += placements[0].pod.notes
    return Resolution(
        model_id, model, recipe, image, serving, problem, tuple(warnings), considered, placements
    )


def _engine_for(model: Model) -> tuple[PlanProblem | None, Recipe | None]:
    """The first engine by preference that has a recipe for the model, or the rule that fails."""
    mid = model.id
    if model.source_unavailable:
        return PlanProblem(
            "no-open-weights",
            f"{mid} has no open weights: {model.source_unavailable}",
            "disarm it; it cannot be self-hosted",
        ), None
    source = model.source
    if source is None:
        return PlanProblem(
            "no-pinned-source",
            f"{mid} has no pinned source in registry/models.yaml, so there is nowhere to fetch"
            " its weights from",
            f"add `source:` (hf_repo + revision, gguf repo + quant, or ollama_tag) to {mid}",
        ), None
    if "ollama" in model.runtimes and not source.ollama_tag:
        return PlanProblem(
            "no-ollama-tag",
            f"{mid} declares runtime 'ollama' but has no source.ollama_tag (a catalog id is"
            " not a pullable tag)",
            f"add the Ollama library tag (e.g. 'qwen3:8b') as source.ollama_tag of {mid}",
        ), None
    if not model.runtimes:
        return PlanProblem(
            "no-runtime",
            f"{mid} declares no runtime",
            f"list the engines that can serve it under `runtimes:` of {mid}",
        ), None
    servable = [r for r in model.runtimes if r in SERVABLE_RUNTIMES]
    if not servable:
        declared = ", ".join(model.runtimes)
        built = ", ".join(sorted(SERVABLE_RUNTIMES))
        return PlanProblem(
            "no-engine",
            f"{mid} declares runtime(s) {declared}; we build serving commands only for {built}",
            "declare one of those runtimes, or add a recipe module in frutebox_infra/recipes/",
        ), None
    for recipe in ENGINE_PREFERENCE:
        if recipe.runtime in servable and recipe.missing(model) is None:
            return None, recipe
    first = next(r for r in ENGINE_PREFERENCE if r.runtime in servable)
    return PlanProblem(
        "no-recipe",
        f"{mid} declares runtime '{first.runtime}' but {first.missing(model)}",
        f"add those facts to {mid} in registry/models.yaml, from a checked source",
    ), None


def _rank(
    registry: Registry,
    model: Model,
    recipe: Recipe,
    image: Image,
    serving: Serving,
    options: ServeOptions,
    cloud: Cloud,
    gpu_id: str | None,
) -> tuple[tuple[Candidate, ...], tuple[PlacementOption, ...]]:
    """Per GPU type, the smallest count that fits; then cheapest first (then less VRAM)."""
    considered: list[Candidate] = []
    placements: list[PlacementOption] = []
    for gpu in registry.gpus:
        if gpu_id is not None and gpu.id != gpu_id:
            continue
        candidate, placement = _smallest_fitting(
            registry, model, recipe, image, serving, gpu, options, cloud
        )
        considered.append(candidate)
        if placement is not None:
            placements.append(placement)
    placements.sort(key=lambda p: (p.usd_per_hour, p.total_vram_gb))
    return tuple(considered), tuple(placements)


def _smallest_fitting(
    registry: Registry,
    model: Model,
    recipe: Recipe,
    image: Image,
    serving: Serving,
    gpu: Gpu,
    options: ServeOptions,
    cloud: Cloud,
) -> tuple[Candidate, PlacementOption | None]:
    price = gpu_price(gpu, cloud)
    if price is None:
        return Candidate(gpu, None, None, None, f"no {cloud} price recorded"), None
    if serving.require_fp8 and not gpu.fp8:
        return Candidate(gpu, None, None, None, "FP8 checkpoint needs a native-FP8 GPU"), None
    cannot_drive = image_gpu_problem(image, gpu)
    if cannot_drive is not None:
        return Candidate(gpu, None, None, None, cannot_drive), None
    request = fit_request(model, recipe, serving, options, gpu)
    last: Candidate = Candidate(gpu, None, None, None, "no GPU count allowed")
    for count in range(1, min(gpu.max_count, registry.max_gpus_per_pod) + 1):
        reason = recipe.count_problem(model, count)
        if reason is not None:
            if last.fit is None:
                last = Candidate(gpu, count, round(price * count, 2), None, reason)
            continue
        fit = estimate(request, gpu, count)
        cost = round(price * count, 2)
        if fit.fits:
            placement = PlacementOption(gpu, count, cost, fit, recipe, model, image, serving)
            return Candidate(gpu, count, cost, fit, None), placement
        last = Candidate(gpu, count, cost, fit, fit.reason)
    return last, None


def image_gpu_problem(image: Image, gpu: Gpu) -> str | None:
    """Why `image` cannot drive `gpu` (no kernels built for its architecture), or None."""
    if image.drives(gpu):
        return None
    return (
        f"image {image.reference} has no kernels for {gpu.architecture}"
        f" (it runs on {', '.join(image.gpu_architectures)})"
    )


def _renamed(model: Model, armed_id: str) -> list[str]:
    if model.id == armed_id:
        return []
    return [
        f"{armed_id} is a former id of {model.id} (it named weights it does not serve); it"
        f" still works, but arm {model.id} instead: replace the id in the stack's models"
        " (and overrides) list"
    ]


def gpu_price(gpu: Gpu, cloud: Cloud) -> float | None:
    """USD per GPU per hour in `cloud`; None where no price was ever observed."""
    prices = gpu.price_usd_per_hour
    return prices.secure if cloud is Cloud.SECURE else prices.community


def fit_request(
    model: Model, recipe: Recipe, serving: Serving, options: ServeOptions, gpu: Gpu
) -> FitRequest:
    """What must fit on `gpu`: the engine's memory model and KV precision on that card."""
    return FitRequest(
        engine=serving.memory_model,
        weights_gb=serving.weights_vram_gb,
        context_tokens=serving.context_tokens,
        configured_sequences=serving.concurrency,
        min_sequences=options.min_sequences,
        kv_dtype_bytes=recipe.kv_dtype_bytes(gpu),
        architecture=model.architecture,
        static_allocation=serving.static_allocation,
        speculative=serving.speculative,
    )


def _unknown(model_id: str) -> PlanProblem:
    return PlanProblem(
        "unknown-model",
        f"{model_id} is not in the model registry",
        "check the id with `frutebox models`, or add the model to registry/models.yaml",
    )


def _gated(model: Model) -> PlanProblem:
    repo = model.source.hf_repo if model.source else None
    if model.source and model.source.comfyui and model.source.comfyui.repo:
        repo = model.source.comfyui.repo
    return PlanProblem(
        "gated-no-token",
        f"{model.id} pulls from the gated repo {repo} and no Hugging Face token is configured,"
        " so the pull would answer 401 after the GPU is already billing",
        "accept the licence on Hugging Face, then `pulumi config set --secret"
        " frutebox-infra:hfToken <token>` (or export HF_TOKEN)",
    )


def _no_placement(
    model: Model,
    recipe: Recipe,
    serving: Serving,
    considered: tuple[Candidate, ...],
    gpu_id: str | None,
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
    return PlanProblem(
        "no-placement",
        f"{model.id} ({recipe.runtime}, {serving.weights_vram_gb:g} GB weights,"
        f" {serving.context_tokens} tokens context) fits no placement{where}{detail}",
        f"lower its context (frutebox-infra:overrides.{model.id}.context), its concurrency,"
        " or unpin its GPU",
    )


def _source_warnings(model: Model, recipe: Recipe, image: Image) -> list[str]:
    warnings = []
    if not image.pinned:
        warnings.append(
            f"image {image.reference} is not pinned to a version: reverting config will not"
            " roll the engine back (pin a tag in registry/images.yaml)"
        )
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

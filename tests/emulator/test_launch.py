"""A launch the image cannot run: args of an image without ENTRYPOINT must name a program."""

from __future__ import annotations

import pytest

from frutebox_infra.emulator.launch import launch_failure

ENTRYPOINTS = {"lmsysorg/sglang:v0.5.21": "none", "ollama/ollama:0.35.1": "fixed-binary"}


@pytest.mark.parametrize(
    ("image", "args", "fails_with"),
    [
        pytest.param(
            "lmsysorg/sglang:v0.5.21", "python3 -m sglang.launch_server", None, id="a-program"
        ),
        pytest.param("lmsysorg/sglang:v0.5.21", "", "nothing to run", id="empty"),
        pytest.param("lmsysorg/sglang:v0.5.21", "   ", "nothing to run", id="blank"),
        pytest.param(
            "lmsysorg/sglang:v0.5.21",
            "--model-path Qwen/Qwen3",
            '"--model-path"',
            id="flags-without-a-program",
        ),
        pytest.param(
            "lmsysorg/sglang:v0.5.21", "bash -c 'unclosed", "syntax error", id="unbalanced-quotes"
        ),
        pytest.param("ollama/ollama:0.35.1", "", None, id="fixed-binary-has-its-cmd"),
        pytest.param("someone/else:1", "", None, id="an-image-of-no-known-kind"),
    ],
)
def test_launch_failure(image: str, args: str, fails_with: str | None) -> None:
    failure = launch_failure(ENTRYPOINTS, {"image": image, "args": args})
    if fails_with is None:
        assert failure is None
    else:
        assert failure is not None and fails_with in failure

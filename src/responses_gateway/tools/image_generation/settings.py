"""image_generation's settings (docs/image-generation.md), declared once (settings.py); an `[image_generation]`
table in --config sets the same fields (`url`, `model`, `api_key`, `timeout`, `max_bytes`, `allow_hosts`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...settings import setting


@dataclass(frozen=True)
class ImageGenerationSettings:
    """Image generation (docs/image-generation.md)"""

    image_generation_url: str | None = setting(
        None, metavar="URL", flag="--image-generation", env="RG_IMAGE_GENERATION",
        help="the images server's base URL (…/v1: OpenAI's Images API) that runs the image_generation tool",
        doc="the images server's base URL (`…/v1`, OpenAI's Images API: vLLM-Omni, stable-diffusion.cpp's "
            "server, LocalAI, OpenAI …) that runs the `image_generation` tool "
            "([docs/image-generation.md](docs/image-generation.md)); or an `[image_generation]` table in `--config`")
    image_generation_model: str | None = setting(
        None, metavar="NAME", help="the model asked of the images server (a tool's own `model` overrides it)")
    image_generation_api_key: str | None = setting(
        None, metavar="KEY", secret=True,
        help="bearer key sent to the images server (set it in the environment; never logged or stored)")
    image_generation_timeout: float = setting(
        120.0, check="positive", help="seconds one image may take (the images server's answer and the images "
                                      "it edits); then the call fails and the model is told")
    image_generation_max_bytes: int = setting(
        16 << 20, check="positive", shown="16 MiB",
        help="bytes of one image, made or edited (a larger one fails the call; nothing is kept)")
    image_generation_allow_hosts: str | None = setting(
        None, metavar="H1,H2",
        help="image URL hosts admitted although loopback/private (host, host:port, IP or CIDR), besides the "
             "images server's own")

    def validate(self) -> None:
        url = self.image_generation_url
        if url and not url.startswith(("http://", "https://")):
            raise ValueError(f"--image-generation must be an http(s) URL (the images server's /v1 base); got {url!r}")

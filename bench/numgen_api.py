"""NumGen against a hosted Images API: images per second through numerate against a bare httpx
client at the same concurrency, on the zero-latency loopback fake (issue 37: target >= 0.9).

The fake runs in its own process and answers every image request with one precomputed PNG
(256 x 256, base64), so what is measured is the client side. Both sides get the same prompts:

- the bare client posts each request (`model`, `prompt`, `n`, `size`, `seed`), reads the JSON,
  decodes the base64 and writes the PNG to a file: the least a tool that keeps the images does;
- numerate runs its `numgen-generate` flow (the images step of a NumGen run: Prefect tasks per
  batch, the endpoint machinery, each image checked, saved with its prompt in the PNG, hashed),
  each repeat into a new folder, so every image is asked for.

The median of `--repeats` alternating measurements is reported, after a warm-up (Prefect's
temporary server start and the first flow). Run with `make bench` or
`python bench/numgen_api.py [--images 640] [--concurrency 16]`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="numerate-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
from numerate.config.env import configure  # noqa: E402

configure()


def numgen_config(base_url: str, images: int, folder: Path, concurrency: int) -> dict:
    per_number = max(1, images // 10)
    return {
        "generator": "api:fake-image",
        "detector": "blobs",
        "images_dir": str(folder),
        "prompts": {"per_number": per_number},
        "generation": {"base_url": base_url, "size": "256x256", "concurrency": concurrency},
    }


async def bare_httpx(base_url: str, prompts: list, concurrency: int, folder: Path) -> float:
    """Images/s of a plain httpx loop: post, read the JSON, decode, write the PNG."""
    import httpx

    folder.mkdir(parents=True, exist_ok=True)
    slots = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:

        async def one(prompt) -> None:
            async with slots:
                response = await client.post("/images/generations", json={
                    "model": "fake-image", "prompt": prompt.text, "n": 1, "size": "256x256",
                    "response_format": "b64_json", "seed": prompt.image_seed,
                })  # fmt: skip
                response.raise_for_status()
                png = base64.b64decode(response.json()["data"][0]["b64_json"])
                await asyncio.to_thread((folder / f"{prompt.prompt_id}.png").write_bytes, png)

        started = time.perf_counter()
        await asyncio.gather(*(one(p) for p in prompts))
        return len(prompts) / (time.perf_counter() - started)


def through_numerate(config: dict, run_dir: Path) -> float:
    """Images/s of numerate's images step (the `numgen-generate` flow)."""
    from numerate.flows.numgen import numgen_generate
    from numerate.numgen.config import NumGenConfig

    settings = NumGenConfig.model_validate(config)
    started = time.perf_counter()
    made = asyncio.run(numgen_generate(settings, str(run_dir)))
    return made / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=640, help="images per measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight")
    parser.add_argument("--repeats", type=int, default=3, help="measurements of each")
    args = parser.parse_args()

    from numerate.numgen.config import NumGenConfig
    from numerate.numgen.prompts import make_prompts
    from tests.fake_openai import spawn

    workdir = Path(tempfile.mkdtemp(prefix="numerate-bench-numgen-"))
    endpoint, base_url = spawn(workdir, "--fixed")
    try:
        started = time.perf_counter()
        warmup = numgen_config(base_url, 10, workdir / "warmup", args.concurrency)
        through_numerate(warmup, workdir / "warmup" / "run")
        print(f"Prefect temporary server start + first flow: {time.perf_counter() - started:.1f} s")
        bare, ours = [], []
        for repeat in range(args.repeats):
            folder = workdir / f"repeat{repeat}"
            config = numgen_config(base_url, args.images, folder / "numerate", args.concurrency)
            prompts = make_prompts(NumGenConfig.model_validate(config).prompts)
            bare.append(asyncio.run(bare_httpx(base_url, prompts, args.concurrency,
                                               folder / "bare")))  # fmt: skip
            ours.append(through_numerate(config, folder / "numerate" / "run"))
        plain, numerate = statistics.median(bare), statistics.median(ours)
        print(
            f"images/s at concurrency {args.concurrency} (median of {args.repeats}, "
            f"{len(prompts)} images each): bare httpx {plain:,.0f}, numerate {numerate:,.0f}, "
            f"ratio {numerate / plain:.2f} (target >= 0.90)"
        )
    finally:
        endpoint.kill()
        endpoint.wait()


if __name__ == "__main__":
    main()

"""Tiny random models built from configs (no download), installed into a Hugging Face cache
so that the real loading-by-model-id code runs offline (`HF_HUB_OFFLINE=1`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

TINY_DIFFUSERS = "numerate-test/tiny-stable-diffusion"
TINY_GROUNDING_DINO = "numerate-test/tiny-grounding-dino"
REVISION = "0" * 40


def install_in_cache(folder: Path, repo_id: str, cache: Path) -> None:
    """Lay out `folder` as the hub cache's snapshot of `repo_id` (refs/main -> snapshot)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / REVISION
    if snapshot.exists():
        shutil.rmtree(snapshot)
    shutil.copytree(folder, snapshot)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)


def build_tiny_diffusers(folder: Path) -> None:
    """A Stable Diffusion pipeline with a few thousand random weights; makes 32 x 32 images."""
    import torch
    from diffusers import (
        AutoencoderKL,
        DDIMScheduler,
        StableDiffusionPipeline,
        UNet2DConditionModel,
    )
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(4, 8), layers_per_block=1, sample_size=8, in_channels=4,
        out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=8,
        norm_num_groups=2, attention_head_dim=2,
    )  # fmt: skip
    vae = AutoencoderKL(
        block_out_channels=(4, 8), in_channels=3, out_channels=3, latent_channels=4,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"), norm_num_groups=2,
        sample_size=16,
    )  # fmt: skip
    scheduler = DDIMScheduler(
        beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
        set_alpha_to_one=False, steps_offset=1,
    )  # fmt: skip
    text_config = CLIPTextConfig(
        bos_token_id=0, eos_token_id=2, pad_token_id=1, hidden_size=8, intermediate_size=16,
        num_attention_heads=2, num_hidden_layers=1, vocab_size=100, max_position_embeddings=77,
    )  # fmt: skip
    text_encoder = CLIPTextModel(text_config)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<|startoftext|>": 0, "!": 1, "<|endoftext|>": 2}
    for char in "abcdefghijklmnopqrstuvwxyz0123456789":
        vocab.setdefault(char, len(vocab))
        vocab.setdefault(char + "</w>", len(vocab))
    (folder / "vocab.json").write_text(json.dumps(vocab))
    (folder / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(
        str(folder / "vocab.json"), str(folder / "merges.txt"), pad_token="!", model_max_length=77
    )
    pipeline = StableDiffusionPipeline(
        unet=unet, vae=vae, scheduler=scheduler, text_encoder=text_encoder, tokenizer=tokenizer,
        safety_checker=None, feature_extractor=None, requires_safety_checker=False,
    )  # fmt: skip
    pipeline.save_pretrained(folder)
    (folder / "vocab.json").unlink()  # the tokenizer saved its own copies
    (folder / "merges.txt").unlink()


def build_tiny_grounding_dino(folder: Path) -> None:
    """A Grounding DINO with about 160k random weights, its processor and a 20-word vocabulary."""
    import torch
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoProcessor,
        SwinConfig,
    )
    from transformers.models.grounding_dino import GroundingDinoImageProcessorPil

    torch.manual_seed(0)
    backbone = SwinConfig(
        image_size=32, patch_size=4, embed_dim=8, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1],
        window_size=2, out_features=["stage2", "stage3", "stage4"],
    )  # fmt: skip
    text = BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=64,
    )  # fmt: skip
    config = GroundingDinoConfig(
        backbone_config=backbone, text_config=text, d_model=32, num_queries=30,
        encoder_layers=1, decoder_layers=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
        encoder_attention_heads=2, decoder_attention_heads=2, max_text_len=32,
        encoder_n_points=2, decoder_n_points=2,
    )  # fmt: skip
    model = GroundingDinoForObjectDetection(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."]
    words += "apples dots triangles human faces people dogs cars pencils shoes guitars".split()
    (folder / "vocab.txt").write_text("\n".join(words) + "\n")
    processor = GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessorPil(
            size={"shortest_edge": 128, "longest_edge": 128}
        ),
        tokenizer=BertTokenizer(str(folder / "vocab.txt")),
    )
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    (folder / "vocab.txt").unlink()  # the tokenizer saved its own copy


def install_tiny_models(cache: Path, scratch: Path) -> None:
    """Build both tiny models and install them into the hub cache `cache`."""
    build_tiny_diffusers(scratch / "sd")
    install_in_cache(scratch / "sd", TINY_DIFFUSERS, cache)
    build_tiny_grounding_dino(scratch / "gd")
    install_in_cache(scratch / "gd", TINY_GROUNDING_DINO, cache)

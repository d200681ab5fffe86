"""The app's limits: what the core takes (a request beyond is refused by name), and what the sidebar offers (a link
asking for more is refused by name too). Plain numbers, imported by the config, the variants' sliders and the pages.
"""

MAX_TOKENS = 4096
MAX_DIM = 4096
MAX_HEADS = 64
MAX_SEED = 2**32 - 1
MAX_TEXT_CHARS = 20_000
MAX_LONG_TEXT_CHARS = 100_000  # a long text on a real model (models/long.py): tokenized, then cut to its cap
MAX_MODEL_TOKENS = 128  # real models: tokens past this are cut, with a notice
# What the app's sidebar offers (a link asking for more is refused by name); the core takes up to the above.
APP_MAX_D_MODEL = 1024
APP_MAX_WIDTH = 512  # d_k, d_v, and MLA's d_c and d_cq
APP_MAX_ROPE = 256  # MLA's rotary width d_h^R
APP_MAX_HEADS = 16  # query heads, and key/value heads
APP_MAX_WINDOW = 64  # the sliding window's w: longer than the sentences a page shows
MAX_TYPED_TOKENS = 8  # typed numbers (X, W_Q, ...): at most this many tokens
MAX_TYPED_DIM = 8  # ... and d_model, d_k, d_v at most this
MAX_SAMPLES = 100_000  # the √d_k experiment
MAX_KEYS = 1024
# Training (attention_core/training/): a model the Training page trains in seconds on a CPU.
MAX_TRAIN_STEPS = 5000
MAX_TRAIN_SECONDS = 60  # a run stops itself here, whatever its step budget
MAX_TRAIN_DIM = 32  # d_model
MAX_TRAIN_D_K = 128  # large enough for the √d_k experiment (64)
MAX_TRAIN_HEADS = 4
MAX_TRAIN_SENTENCES = 10_000  # the generated training set (2,000 by default)
TRAIN_CHECKPOINTS = 40  # checkpoints a run keeps, and half as many again in its first tenth (at most ~16 MB)

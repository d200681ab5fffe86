"""Watch attention learn, the engine: W_Q, W_K and W_V trained, from random to "eat looks at Alice".

A tiny next-word model whose one attention layer is this package's own (`attend`, the same stages and weight
shapes as `compute_attention`), trained on generated sentences in the shape of lecture 002's "Alice will eat
pizza". Every checkpoint is a set of {"w_q", "w_k", "w_v", "w_o"} matrices that `compute_attention` takes as
they are, with X the trained embeddings of a sentence: every view of the app can show the layer at any step.

The rooms, in the order a run goes through them:
- grammar.py: the sentences (subject, modal, verb, object; the object follows from the verb and the subject's
  taste, so predicting it at the verb needs the subject: that is what the verb's query learns to find);
- model.py: the model and its loss;
- loop.py: the training loop and its checkpoints;
- evaluation.py: what a run learned, and the trained layer on a sentence of one's own;
- lecture.py: lecture 002's model, shipped with the app;
- background.py: a run in a thread, so that a page can follow it.

The recipe is chosen so that a run learns on every CPU, not on one: docs/training-recipe.md says why each part
is there, with what the runs measured.

Shapes: b sentences, n tokens, h heads, d = d_model, d_k, d_v; tokens are rows as everywhere here.
"""

from attention_core.training.background import Training
from attention_core.training.evaluation import (
    LEARNED_PREDICTED,
    LEARNED_WEIGHT,
    Continued,
    HeldOut,
    Lesson,
    checkpoint_trace,
    continue_greedily,
    held_out_attention,
    lesson,
    sentence_words,
    sentence_x,
)
from attention_core.training.grammar import (
    GROUPS,
    HELD_OUT,
    MODALS,
    OBJECT,
    POSITIONS,
    SUBJECT,
    VERB,
    Grammar,
    encode,
    held_out_sentences,
)
from attention_core.training.lecture import (
    LECTURE_MODEL_FILE,
    LECTURE_SEEDS,
    LECTURE_SENTENCE,
    LectureModel,
    checkpoint_npz,
    lecture_model,
    load_lecture_model,
    makes_the_pattern,
    save_lecture_model,
)
from attention_core.training.loop import Checkpoint, Run, batches, learning_rate, model_at, train
from attention_core.training.model import TinyLM, TrainingConfig, next_word_loss, saturated_share

__all__ = [
    "GROUPS",
    "HELD_OUT",
    "LEARNED_PREDICTED",
    "LEARNED_WEIGHT",
    "LECTURE_MODEL_FILE",
    "LECTURE_SEEDS",
    "LECTURE_SENTENCE",
    "MODALS",
    "OBJECT",
    "POSITIONS",
    "SUBJECT",
    "VERB",
    "Checkpoint",
    "Continued",
    "Grammar",
    "HeldOut",
    "LectureModel",
    "Lesson",
    "Run",
    "TinyLM",
    "Training",
    "TrainingConfig",
    "batches",
    "checkpoint_npz",
    "checkpoint_trace",
    "continue_greedily",
    "encode",
    "held_out_attention",
    "held_out_sentences",
    "learning_rate",
    "lecture_model",
    "lesson",
    "load_lecture_model",
    "makes_the_pattern",
    "model_at",
    "next_word_loss",
    "saturated_share",
    "save_lecture_model",
    "sentence_words",
    "sentence_x",
    "train",
]

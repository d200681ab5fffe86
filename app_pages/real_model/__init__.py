"""The Real model page's rooms: real_model.py the page; loading.py loads a bundled model in the model worker and
traces a text once per (model, text); views.py the heads' roles, rollout, generation and what the architecture
fixes; head_reads.py one head's weights read other ways; mask_sweep.py the masks after MLA measured on the model."""

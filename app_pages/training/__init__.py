"""The Training page's rooms: training.py the page; views.py a run's views (the grammar, the layer at a step, the
scrubber, the live run, the exports, the √d_k experiment); gradient_step.py lecture 002's one step of gradient
descent with the trained layer's numbers."""

"""The learner's phases, one module each (Chen & Li's six phases plus the final polish).

``sum_w`` (phase 1, Σ̂W), ``sculpting`` (phase 2, the body K), ``refine`` (phase 3, certified Σ̂W and the slab
body K*), ``span`` (phase 4, the heads' flat, reading more examples while it is not pinned), ``heads`` (phase
5, candidate heads on the flat), ``projections`` (phase 6, the W_i), ``polish``; ``argmax`` replaces phases 2–5
for peaked heads. ``sculpt.pipeline`` runs them and decides the route after phase 1.

Conventions shared by every phase:
- Θ is flattened row-major: vec(Θ) = Θ.reshape(-1), so the logit x_aᵀ Θ x_j = kron(x_a, x_j) @ vec(Θ)
  and a constraint on ⟨Θ, x_a (x_j − x_r)ᵀ⟩ has the row kron(x_a, x_j − x_r).
- A phase function takes its settings group (``sculpt.settings``) and returns its outputs together with a
  ``sculpt.result.PhaseRecord``; given ``truth`` (the true MultiHeadAttention) it also fills
  ``record.truth`` with ground-truth figures.
"""

"""The learner's phases, one module each (Chen & Li's six phases plus the final polish).

Conventions shared by every phase:
- Θ is flattened row-major: vec(Θ) = Θ.reshape(-1), so the logit x_aᵀ Θ x_j = kron(x_a, x_j) @ vec(Θ)
  and a constraint on ⟨Θ, x_a (x_j − x_r)ᵀ⟩ has the row kron(x_a, x_j − x_r).
- Every phase function returns its outputs together with a ``sculpt.result.PhaseRecord``; given
  ``truth`` (the true MultiHeadAttention) it also fills ``record.truth`` with ground-truth figures.
"""

"""How a shipped matrix of vectors is held to the model that embeds here.

The engine's arithmetic differs a little from one CPU to another: two machines' vectors of one
text agree to a cosine of about 0.99994, not to the last digit. Another model or revision lies
far from that, so a shipped vector is this model's when its cosine with the text embedded here
is past :data:`SAME_VECTOR`.

>>> import numpy as np
>>> least_cosine(np.array([[1.0, 0.0]]), np.array([[1.0, 0.001]])) > SAME_VECTOR
True
"""

from __future__ import annotations

import numpy as np

#: Least cosine between a shipped vector and the same text embedded here (same model and
#: revision, another CPU: 0.99994 between two machines).
SAME_VECTOR = 0.999


def least_cosine(shipped: np.ndarray, fresh: np.ndarray) -> float:
    """The smallest cosine between each row of ``shipped`` and the same row of ``fresh``."""
    norms = np.linalg.norm(shipped, axis=1) * np.linalg.norm(fresh, axis=1)
    return float(((shipped * fresh).sum(axis=1) / norms).min())

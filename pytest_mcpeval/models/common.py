"""What every model client shares, and imports nothing: the error a failed call raises and litellm's offline switches.

The ground floor of :mod:`pytest_mcpeval.models`: the clients (:mod:`.litellm_client`, :mod:`.local`, :mod:`.judge`,
:mod:`.processes`) import from here, never from the package, so the package may import them without a cycle.
"""

from __future__ import annotations

# set (unless the user set them) before litellm is imported: it reads its bundled cost map and fetches nothing
OFFLINE_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}


class ModelCallError(Exception):
    """The model could not be reached, answered with an error, or could not be loaded.

    An infrastructure error: the case is listed apart and excluded from the metrics.
    """


class KeyRejected(ModelCallError):
    """The provider refused the call for its key (HTTP 401), or there is none: every other call of the model would
    be refused alike, so the dispatcher makes none (:mod:`pytest_mcpeval.run.dispatch`)."""

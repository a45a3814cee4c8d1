from __future__ import annotations

import os

# LiteLLM, when a test imports it, must use its bundled model map instead of fetching one.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from __future__ import annotations

import os

# LiteLLM, when a test imports it, must use its bundled model map instead of fetching one.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from hypothesis import settings

# `HYPOTHESIS_PROFILE=deep pytest tests/test_properties.py` for a long search before a release.
settings.register_profile("default", max_examples=300, deadline=None)
settings.register_profile("deep", max_examples=5_000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

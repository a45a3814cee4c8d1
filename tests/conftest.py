from __future__ import annotations

import os

# LiteLLM, when a test imports it, must use its bundled model map instead of fetching one.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from hypothesis import settings

# `HYPOTHESIS_PROFILE=deep pytest tests/test_properties.py` for a long search before a release.
settings.register_profile("default", max_examples=300, deadline=None)
settings.register_profile("deep", max_examples=5_000, deadline=None)
# CI (.ci/run): the same examples on every run (a red CI is reproducible, never a fluke of the
# draw), fewer of them; the local default keeps searching new ones on every run.
settings.register_profile("ci", max_examples=150, deadline=None, derandomize=True, print_blob=True)
# The matrix's other LiteLLM versions and Pythons (.ci/matrix): the same properties, fewer examples — they
# check that each holds there at all; `make test` searches with the ci profile on the pinned version.
settings.register_profile("matrix", max_examples=40, deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

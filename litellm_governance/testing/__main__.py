"""``python -m litellm_governance.testing``: run a recording upstream (see `cli`)."""

from .cli import main

main()

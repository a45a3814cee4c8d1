"""Provider emulation for :class:`~litellm_governance.testing.RecordingUpstream`.

Real providers reject chat histories that LiteLLM forwards unchanged: a tool call without its
result, a system message in the middle, a tool-call id of the wrong shape, a prompt longer than the
window. This package checks a request body *as the provider receives it* (after LiteLLM translated
it) against the rules each provider is documented or observed to enforce, and builds the error the
provider answers: its HTTP status, its error body shape and its error text, so that LiteLLM maps
the emulated error exactly as it maps the real one.

The rules are data (`rules`: :data:`RULES`, one :class:`Rule` each, citing its source), apart from
the validators that apply them (`chat`, `anthropic`, `gemini`, `bedrock`, `responses`, dispatched by
`checks`). They come from the providers' own error messages as reported in public issue threads and
documentation, never from litellm-governance's repair code, and the emulator imports nothing of the
plugin: a test that uses it can therefore fail when the plugin is wrong. ``PROVIDERS.md`` at the
repository root is the human-readable version of :data:`RULES`.

Wire formats (``wire`` below) are named after the endpoint that receives them:

* ``"chat"``: OpenAI-compatible ``/chat/completions`` ``messages`` (openai, glm, mistral, deepseek,
  moonshot, vllm);
* ``"messages"``: Anthropic ``/v1/messages``;
* ``"gemini"``: Google ``models/{model}:generateContent`` ``contents``;
* ``"converse"``: Bedrock ``/model/{model}/converse`` ``messages``;
* ``"responses"``: OpenAI ``/v1/responses`` ``input`` items.

The prompt's size is counted with tiktoken ``cl100k_base`` (read offline from the file LiteLLM
bundles, by `tokens`' own loader) over every text the prompt carries, times a ``token_rate`` that
stands for a provider tokenizer counting more or less than tiktoken (`context` turns it into the
provider's context-length error; `verdicts` into its HTTP answer; `emulator` puts it together).

Only the standard library and tiktoken are used.
"""

from __future__ import annotations

from .anthropic import sign_thinking
from .checks import validate
from .context import check_context
from .emulator import Emulator, Verdict
from .responses import seal_reasoning
from .rules import PROVIDERS, RULES, RULES_BY_ID, WIRES, Rule, rules_for
from .tokens import count_prompt_tokens, count_text_tokens, requested_output_tokens
from .verdicts import Rejection, Violation, error_response

__all__ = [
    "PROVIDERS",
    "RULES",
    "RULES_BY_ID",
    "WIRES",
    "Emulator",
    "Rejection",
    "Rule",
    "Verdict",
    "Violation",
    "check_context",
    "count_prompt_tokens",
    "count_text_tokens",
    "error_response",
    "requested_output_tokens",
    "rules_for",
    "seal_reasoning",
    "sign_thinking",
    "validate",
]

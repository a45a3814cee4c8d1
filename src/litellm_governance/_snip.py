"""Step: drop the oldest history so the request fits the model's input budget.

System messages and tool schemas are counted first and always kept. The rest is cut into units
(an assistant message with its tool results is one unit, every other message its own) and kept
from the newest back while it fits. The kept part must start with a user message: when the cut
falls elsewhere, the nearest earlier user message (the task being worked on) is kept in front of
it and the cut moves forward to make room. The newest unit is always kept; when even that does
not fit, the request is as small as the rules allow and the report says ``over_budget``.

With ``snip_chunk_tokens`` > 0 the cut is only made where the running token count from the start
of the conversation crosses a multiple of the chunk, so it stays put while the history grows and
consecutive requests share their prefix (the provider's prompt cache stays warm).
"""

from __future__ import annotations

from ._context import Context
from ._messages import Message, is_system
from ._tokens import REPLY_PRIMING

__all__ = ["Snip", "fixed_tokens"]


def fixed_tokens(messages: list[Message], ctx: Context) -> int:
    """Tokens every request pays whatever is snipped: tool schemas, system messages, reply priming."""
    return ctx.tools_tokens + REPLY_PRIMING + sum(ctx.tokens(m) for m in messages if is_system(m))


class Snip:
    name = "snip"

    def __call__(self, messages: list[Message], ctx: Context) -> list[Message]:
        budget = ctx.budget
        if budget is None or not messages:
            return messages
        units: list[tuple[int, int]] = []  # [start, end) of each non-system unit
        unit_tokens: list[int] = []
        fixed = ctx.tools_tokens + REPLY_PRIMING
        index = 0
        while index < len(messages):
            message = messages[index]
            if is_system(message):
                fixed += ctx.tokens(message)
                index += 1
                continue
            end = index + 1
            if message.get("role") == "assistant" and message.get("tool_calls"):
                while end < len(messages) and messages[end].get("role") == "tool":
                    end += 1
            units.append((index, end))
            unit_tokens.append(sum(ctx.tokens(messages[i]) for i in range(index, end)))
            index = end
        if not units:
            ctx.over_budget = fixed > budget
            return messages

        count = len(units)
        suffix = [0] * (count + 1)
        for u in range(count - 1, -1, -1):
            suffix[u] = suffix[u + 1] + unit_tokens[u]
        is_user = [messages[start].get("role") == "user" for start, _ in units]
        synthetic = ctx.synthetic_user_tokens() if ctx.profile.first_must_be_user else 0
        room = budget - fixed

        def cost(start: int) -> tuple[int, int]:
            """Tokens of the tail kept when cutting at unit `start`, and the user unit put in front."""
            if is_user[start]:
                return suffix[start], -1
            anchor = previous_user[start]
            if anchor >= 0:
                return unit_tokens[anchor] + suffix[start], anchor
            needs_user = messages[units[start][0]].get("role") == "assistant"
            return suffix[start] + (synthetic if needs_user else 0), -1

        previous_user = [-1] * count
        latest = -1
        for u in range(count):
            previous_user[u] = latest
            if is_user[u]:
                latest = u

        if cost(0)[0] <= room:
            return messages

        for cut in self._cut_points(unit_tokens, ctx.config.snip_chunk_tokens):
            tokens, anchor = cost(cut)
            if tokens <= room:
                break
        else:
            cut = count - 1
            tokens, anchor = cost(cut)
            ctx.over_budget = True

        cut_start = units[cut][0]
        if anchor >= 0:
            anchor_start, anchor_end = units[anchor]
            # System messages in the dropped spans are kept, in their order, before the history.
            result = (
                [m for m in messages[:anchor_start] if is_system(m)]
                + messages[anchor_start:anchor_end]
                + [m for m in messages[anchor_end:cut_start] if is_system(m)]
                + messages[cut_start:]
            )
        else:
            result = [m for m in messages[:cut_start] if is_system(m)] + messages[cut_start:]
        if len(result) == len(messages):
            return messages  # already the smallest tail (over budget): nothing to drop
        ctx.counts["snipped"] += len(messages) - len(result)
        return result

    @staticmethod
    def _cut_points(unit_tokens: list[int], chunk: int) -> list[int]:
        """Unit indexes where a cut may fall, ascending: all of them, or chunk boundaries first."""
        count = len(unit_tokens)
        if chunk <= 0:
            return list(range(count))
        aligned: list[int] = []
        running = 0
        boundary = 0
        for u, tokens in enumerate(unit_tokens):
            if running >= boundary:
                aligned.append(u)
                boundary = (running // chunk + 1) * chunk
            running += tokens
        # If no aligned point fits, fall back to every unit after the last aligned one.
        return aligned + list(range(aligned[-1] + 1, count))

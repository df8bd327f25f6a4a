"""A rendered row in words, for `explain --chat-template`: the text with the trained spans
marked, its tokens, and what the template left out."""

from __future__ import annotations

from transcript_clean.templates.check import Checked

__all__ = ["OPEN", "SHUT", "render_view"]

OPEN, SHUT = "⟦", "⟧"
"""Around each span the template marks as generation (what assistant-only loss trains on)."""


def marked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span between `OPEN` and `SHUT`."""
    out, at = [], 0
    for start, end in sorted(spans):
        if end <= start or start < at:
            continue
        out += [text[at:start], OPEN, text[start:end], SHUT]
        at = end
    out.append(text[at:])
    return "".join(out)


def render_view(checked: Checked) -> list[str]:
    """The lines `explain` shows for a row rendered with a chat template."""
    name = checked.template.name
    rendering = checked.rendering
    if rendering.error is not None:
        where = "" if rendering.error_at is None else f" at message {rendering.error_at}"
        return [f"Rendered with {name}: the template raises{where}:", f"  {rendering.error}"]
    how = f"arguments as {checked.arguments_as}s"
    if checked.template.marks_generation:
        head = f"Rendered with {name} ({how}; trained spans between {OPEN} and {SHUT}):"
    else:
        head = f"Rendered with {name} ({how}; it marks no {{% generation %}}: no trained spans):"
    lines = [head, marked(rendering.text, rendering.spans)]
    if rendering.tokens is not None:
        trained = "" if rendering.trained is None else f", {rendering.trained} trained"
        lines.append(f"Tokens: {rendering.tokens}{trained}")
    elif checked.template.marks_generation:
        chars = f"{rendering.trained_chars} of {len(rendering.text)}"
        lines.append(f"Trained characters: {chars} (no tokenizer to count tokens with)")
    if checked.drops.dropped:
        lines.append("Left out by the template (never rendered):")
        lines += [f"  message {p.index}: {p.what}" for p in checked.drops.dropped]
    if checked.drops.pruned:
        lines.append("Left out of history by the template (rendered where its turn is the last):")
        lines += [f"  message {p.index}: {p.what}" for p in checked.drops.pruned]
    if not checked.drops.dropped and not checked.drops.pruned:
        lines.append("Nothing of the transcript is left out.")
    return lines

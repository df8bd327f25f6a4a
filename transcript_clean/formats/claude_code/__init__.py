"""Claude Code sessions: the events of one conversation of a session file."""

from transcript_clean.formats.claude_code.codec import ClaudeCodeFormat

__all__ = ["ClaudeCodeFormat"]

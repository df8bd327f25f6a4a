"""OpenAI Responses API items: `message`, `function_call`, `function_call_output`, `reasoning`."""

from transcript_clean.formats.responses.codec import ResponsesFormat

__all__ = ["ResponsesFormat"]

"""Amazon Bedrock Converse `messages` of content blocks."""

from transcript_clean.formats.bedrock.codec import BedrockFormat

__all__ = ["BedrockFormat"]

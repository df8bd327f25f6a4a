"""OpenHands trajectories: action and observation events."""

from transcript_clean.formats.openhands.codec import OpenHandsFormat

__all__ = ["OpenHandsFormat"]

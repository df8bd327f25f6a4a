"""rig's serialized `Message` histories: its codec (`codec.py`); no Arrow side yet, so every row
takes the per-row path."""

from transcript_clean.formats.rig.codec import RigFormat

__all__ = ["RigFormat"]

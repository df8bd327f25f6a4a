"""rig's serialized `Message` histories: its codec (`codec.py`) and its flattener into the
columnar view (`flatten.py`)."""

from transcript_clean.formats.rig.codec import RigFormat

__all__ = ["RigFormat"]

"""Engines run the per-batch cleaner over a whole input: `local` (processes) and `ray`."""

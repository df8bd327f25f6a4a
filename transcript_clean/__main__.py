from transcript_clean.cli import entry

entry()

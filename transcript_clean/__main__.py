from transcript_clean.launch import entry

entry()

from transcript_clean.cli import main

main()

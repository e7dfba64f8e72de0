from awa_beat.cli import main

main()

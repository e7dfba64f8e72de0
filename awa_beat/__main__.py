from awa_beat._cli import main

main()

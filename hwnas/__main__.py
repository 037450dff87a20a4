from hwnas.cli import main

main()

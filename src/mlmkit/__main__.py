"""`python -m mlmkit` (and `torchrun -m mlmkit`) runs the command line."""

from mlmkit.cli import main

if __name__ == "__main__":
    main()

"""`python -m shiftchange`: the same command as the `shiftchange` console script."""

from shiftchange.cli.main import run

if __name__ == "__main__":
    run()

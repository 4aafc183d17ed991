"""The ``tmsim`` command line: one module per group of subcommands, :mod:`.main` builds the
parser and turns bad input into one-line errors."""

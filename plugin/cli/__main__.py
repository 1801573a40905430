"""``python -m plugin.cli``: the ``docanchor`` command."""

from plugin.cli import main

if __name__ == "__main__":
    main()

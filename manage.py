#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["assemble"]:
        # The assembler needs no Django: start in the time it takes to import it.
        from inspector.assemble_cli import main as assemble

        sys.exit(assemble(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "inspector.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()

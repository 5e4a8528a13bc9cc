"""`python -m app [flags]`: the same as `zerolock dashboard [flags]`."""
import argparse
import sys

from zerolock_core.config.field_words import ConfigError

from .cli_command import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m app", description="the ZeroLock dashboard")
    register(parser)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"zerolock dashboard: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

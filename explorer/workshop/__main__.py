"""What the server's operator can do to workshops, on the app's database (the same settings as the
app: ``$DECODER_EXPLORER_DATABASE_URL``, else the SQLite file under ``$DECODER_EXPLORER_CACHE``):

    python -m explorer.workshop list         # the live workshops: code, lesson, started, address, students
    python -m explorer.workshop end K7PQ2M   # delete one now, with its students and answers
    python -m explorer.workshop purge        # delete every expired one now (the app does it every minute)
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime

from explorer.workshop import Limits, WorkshopError, Workshops, connect
from explorer.workshop.database import describe


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m explorer.workshop", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the live workshops")
    end = commands.add_parser("end", help="delete a workshop now, with its students and answers")
    end.add_argument("code", help="its room code, e.g. K7PQ2M")
    commands.add_parser("purge", help="delete every expired workshop now")
    args = parser.parse_args(argv)
    engine = connect()
    try:
        workshops = Workshops(engine, Limits.from_env())
        return run(workshops, args, describe(engine))
    except WorkshopError as error:
        print(error, file=sys.stderr)
        return 2
    finally:
        engine.dispose()


def run(workshops: Workshops, args: argparse.Namespace, where: str) -> int:
    if args.command == "end":
        if not workshops.end_as_operator(args.code):
            print(f"There is no workshop {args.code.strip().upper()} in {where}.", file=sys.stderr)
            return 1
        print(f"Workshop {args.code.strip().upper()} ended: deleted with its students and answers.")
    elif args.command == "purge":
        print(f"{workshops.purge()} expired workshops deleted.")
    else:
        live = workshops.live()
        print(f"{len(live)} live workshops in {where}")
        for code, lesson, started, owner, seated in live:
            when = datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds")
            print(f"{code}  lesson {lesson}  started {when}  from {owner or '?'}  {seated} students")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Validates a SARIF log against the SARIF 2.1.0 JSON schema.

Usage: validate_sarif.py SCHEMA LOG. Prints each violation with its JSON path
and exits 1 when there is any; exit 0 when the log is valid.
"""
import json
import sys

import jsonschema


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        schema = json.load(f)
    with open(sys.argv[2], encoding="utf-8") as f:
        log = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    errors = list(cls(schema).iter_errors(log))
    for e in errors:
        print("/".join(str(p) for p in e.absolute_path) + ": " + e.message)
    print(f"{len(errors)} schema violations ({cls.__name__})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run functions of several versions of a program on given inputs; print which outputs are finite.

Used by the fix tests in a subprocess (the program under test never runs in pytest's process):
stdin is a JSON list of {"source", "function", "args"}; args are nested lists (lists of bools
become bool tensors, others float32). Prints one JSON list of {"finite": bool | None, "error"}.
"""

import json
import sys

import torch


def tensor(value):
    flat = value
    while isinstance(flat, list) and flat:
        flat = flat[0]
    return torch.tensor(value, dtype=torch.bool if isinstance(flat, bool) else torch.float32)


def main() -> None:
    results = []
    for case in json.load(sys.stdin):
        namespace = {"__name__": "case"}
        try:
            exec(compile(case["source"], case.get("filename", "case.py"), "exec"), namespace)
            out = namespace[case["function"]](*[tensor(a) for a in case["args"]])
            results.append({"finite": bool(torch.isfinite(out).all()), "value": out.tolist()})
        except Exception as exc:  # reported: a fix that breaks the code must fail the test
            results.append({"finite": None, "error": f"{type(exc).__name__}: {exc}"})
    print(json.dumps(results))


if __name__ == "__main__":
    main()

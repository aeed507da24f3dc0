#!/usr/bin/python3
"""Writes the fuzzer's seed corpus from the shared protocol vectors.

    fuzz/seed_corpus.py OUT_DIR

Every step's request_hex becomes one input on its own (clock mode of its
suite), and every suite becomes two inputs: its steps one batch each, and all
in one batch. Input format: see fuzz/fuzz_request.cpp.
"""
import json
import pathlib
import sys


def frame(payload: bytes) -> bytes:
    return len(payload).to_bytes(2, "little") + payload


def main() -> int:
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vectors = pathlib.Path(__file__).resolve().parent.parent / "protocol" / "vectors"
    n = 0
    for path in sorted(vectors.glob("*.json")):
        suite = json.loads(path.read_text())
        mode = 1 if suite.get("clock") == "server" else 0
        frames = []
        for i, step in enumerate(suite["steps"]):
            payload = bytes.fromhex(step.get("request_hex", ""))
            frames.append(frame(payload))
            (out / f"{path.stem}-{i:03d}").write_bytes(bytes([mode]) + frame(payload))
            n += 1
        (out / f"{path.stem}-all").write_bytes(bytes([mode]) + b"".join(frames))
        (out / f"{path.stem}-all-one-batch").write_bytes(bytes([mode | 2]) + b"".join(frames))
        n += 2
    print(f"seed_corpus: {n} inputs from {vectors} in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Write the digest that names each engine venv beside the locks it is built from, so that a run
# reads 64 bytes instead of hashing a lock of several hundred KB each time a venv path is named:
#   <lock>.sha256             sha256 of the engine lock
#   <lock>+<ray lock>.sha256  sha256 of the engine lock followed by the Ray lock (a venv on a Ray cluster)
# Run from the repository root after a lock changes (stacks/locks/compile.sh runs it);
# tests/unit/test_stack_profiles.py fails on a digest that does not match its locks.
set -euo pipefail
cd "$(dirname "$0")"
python3 - <<'PY'
import hashlib, os, yaml
profiles = yaml.safe_load(open("../profiles.yml"))["serving_stack_profiles"]
for profile in profiles.values():
    for engine in (profile.get("engines") or {}).values():
        lock = engine["lock"]
        pairs = [(lock, [lock])]
        if engine.get("ray_lock"):
            pairs.append(("%s+%s" % (lock, os.path.basename(engine["ray_lock"])), [lock, engine["ray_lock"]]))
        for name, parts in pairs:
            digest = hashlib.sha256(b"".join(open(part, "rb").read() for part in parts)).hexdigest()
            with open(name + ".sha256", "w") as out:
                out.write(digest + "\n")
            print("%s.sha256: %s" % (name, digest[:12]))
PY

"""The engine unit and environment file as a golden comparison reads them: the secrets' values, the
host's own addresses and the weights build's digest (a digest of the bytes built, which differ
between two test hosts of the same inventory) masked.

  python tests/harness/golden_units.py FILE > tests/fixtures/golden/engine-units/NAME
masks a copy taken from a host (podman exec HOST cat /etc/systemd/system/llmops-vllm.service)."""
import re
import sys

SECRET = re.compile(r'^([A-Z0-9_]*(?:API_KEY|_KEY))="[^"]*"$', re.M)
BUILD = re.compile(r"(/\.builds/[^/\s\"]+/)[0-9a-f]{16}(?=/)")
ADDRESS = re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b|(?<![\w:])(?:[0-9a-f]{1,4}:){2,7}[0-9a-f]{0,4}(?![\w:])")


def normalized(text):
    """The text with every secret value, every IP address of IPAddressAllow= and every weights
    build digest masked."""
    text = BUILD.sub(r"\1<build>", SECRET.sub(r'\1="<secret>"', text))
    return re.sub(r"^(IPAddressAllow=)(.*)$",
                  lambda m: m.group(1) + " ".join(sorted(set(ADDRESS.sub("<address>", a) for a in m.group(2).split()))),
                  text, flags=re.M)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as handle:
        sys.stdout.write(normalized(handle.read()))

#!/usr/bin/env python3
"""Install dependency collections from the `ansible` wheel on PyPI (Ansible Galaxy is unreachable).

The `ansible` community package bundles every collection it ships; pip downloads the wheel and we
extract only the namespaces listed in meta/collection-deps.txt.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import zipfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ansible", required=True, help="pip requirement for the ansible package")
    ap.add_argument("--dest", required=True, help="collections path to fill")
    ap.add_argument("--list", required=True, help="file with one namespace.name per line")
    a = ap.parse_args()
    wanted = [ln.strip() for ln in open(a.list) if ln.strip() and not ln.startswith("#")]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", a.ansible, "-d", tmp],
                       check=True)
        wheel = zipfile.ZipFile(glob.glob(os.path.join(tmp, "ansible-*.whl"))[0])
        prefixes = ["ansible_collections/%s/" % w.replace(".", "/") for w in wanted]
        names = [m for m in wheel.namelist() if any(m.startswith(p) for p in prefixes)]
        for w, p in zip(wanted, prefixes):
            if not any(n.startswith(p) for n in names):
                sys.exit("collection %s is not in %s" % (w, a.ansible))
        wheel.extractall(a.dest, members=names)
    print("installed %s into %s" % (", ".join(wanted), a.dest))


if __name__ == "__main__":
    main()

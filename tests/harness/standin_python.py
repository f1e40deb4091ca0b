#!/usr/bin/env python3
"""Build a stand-in of a python-build-standalone "install_only_stripped" archive from this machine's
CPython, in the layout of that project's release mirror: <mirror>/<release>/<filename>.

The tests cannot reach the real builds (GitHub release assets), so this packs the controller's own
interpreter the way those builds are packed: one top folder `python/`, the shared libraries the
interpreter and its extension modules load bundled into python/lib, and every ELF file's RUNPATH
made relative ($ORIGIN), so that the tree runs wherever it is unpacked, on hosts that lack those
libraries. python_env installs it through its real code path (download or wheelhouse, checksum,
unpack, smoke test). Prints the JSON record the scenarios read (version, release, arch, sha256).

  standin_python.py --python python3.11 --mirror $LLMOPS_CACHE/python-mirror
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

RELEASE = "llmops-standin"
# glibc and the loader come from the host, as with the real builds.
HOST_LIBS = re.compile(r"^(ld-linux|libc|libm|libpthread|libdl|librt|libutil|libresolv)\.so")
# What the real stripped builds also leave out, and what no serving venv needs.
SKIP_DIRS = {"test", "idlelib", "tkinter", "turtledemo", "site-packages", "__pycache__"}
SKIP_MODULES = re.compile(r"^_tkinter\.")


def interpreter_facts(python):
    code = ("import json, sys, sysconfig; print(json.dumps({'prefix': sys.base_prefix, "
            "'version': '%d.%d.%d' % sys.version_info[:3], 'ldlibrary': sysconfig.get_config_var('LDLIBRARY')}))")
    return json.loads(subprocess.check_output([python, "-c", code], text=True))


def wheels_outside(python):
    """The wheels ensurepip installs from outside its own folder (a distribution's build keeps them
    elsewhere, which a packed tree leaves behind)."""
    code = ("import ensurepip, json, os; print(json.dumps([os.path.dirname(ensurepip.__file__)] + "
            "[p.wheel_path for p in ensurepip._get_packages().values() if getattr(p, 'wheel_path', None)]))")
    own, *paths = json.loads(subprocess.check_output([python, "-c", code], text=True))
    return [p for p in paths if not os.path.abspath(p).startswith(os.path.abspath(own) + os.sep)]


def needed_libraries(path):
    """Resolved non-glibc libraries of one ELF file, from ldd: name -> path."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=False).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line)
        if m and not HOST_LIBS.match(m.group(1)) and not m.group(1).startswith("libpython"):
            found[m.group(1)] = m.group(2)
    return found


def set_runpath(path, runpath):
    subprocess.run(["patchelf", "--set-rpath", runpath, path], check=True)


def copy_tree(prefix, minor, dest):
    lib = os.path.join(dest, "lib")
    os.makedirs(os.path.join(dest, "bin"))
    os.makedirs(lib)
    binary = os.path.join(dest, "bin", "python" + minor)
    shutil.copy2(os.path.realpath(os.path.join(prefix, "bin", "python" + minor)), binary)
    os.symlink("python" + minor, os.path.join(dest, "bin", "python3"))
    for name in os.listdir(os.path.join(prefix, "lib")):
        if name.startswith("libpython"):
            shutil.copy2(os.path.join(prefix, "lib", name), lib, follow_symlinks=False)
    stdlib = os.path.join(prefix, "lib", "python" + minor)

    def ignore(_folder, names):
        return {n for n in names if n in SKIP_DIRS or SKIP_MODULES.match(n)}

    shutil.copytree(stdlib, os.path.join(lib, "python" + minor), ignore=ignore, symlinks=True)
    os.makedirs(os.path.join(lib, "python" + minor, "site-packages"))
    return binary


def bundle_libraries(dest, minor):
    """Copy the libraries every ELF file needs into lib/ and point each RUNPATH there."""
    lib = os.path.join(dest, "lib")
    dynload = os.path.join(lib, "python" + minor, "lib-dynload")
    elves = [(os.path.join(dest, "bin", "python" + minor), "$ORIGIN/../lib")]
    elves += [(os.path.join(lib, n), "$ORIGIN") for n in os.listdir(lib)
              if n.startswith("libpython") and not os.path.islink(os.path.join(lib, n))]
    elves += [(os.path.join(dynload, n), "$ORIGIN/../..") for n in sorted(os.listdir(dynload)) if n.endswith(".so")]
    pending = list(elves)
    bundled = set()
    while pending:
        path, runpath = pending.pop()
        for name, source in needed_libraries(path).items():
            if name not in bundled:
                bundled.add(name)
                shutil.copy2(source, os.path.join(lib, name))
                os.chmod(os.path.join(lib, name), 0o755)
                pending.append((os.path.join(lib, name), "$ORIGIN"))
        set_runpath(path, runpath)
    return sorted(bundled)


def pack(src, archive):
    """A reproducible tar.gz: sorted names, fixed times and owners, so the checksum is stable."""
    def clean(info):
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, files in os.walk(src):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                full = os.path.join(root, name)
                tar.add(full, arcname=os.path.relpath(full, os.path.dirname(src)), recursive=False, filter=clean)
    with open(archive + ".tmp", "wb") as out:
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
            gz.write(buf.getvalue())
    os.replace(archive + ".tmp", archive)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="python3.11", help="interpreter to pack")
    parser.add_argument("--mirror", required=True, help="folder laid out as <release>/<filename>")
    args = parser.parse_args(argv)
    outside = wheels_outside(args.python)
    if outside:
        # Debian's and Ubuntu's python3.11 read ensurepip's wheels from /usr/share/python-wheels: a packed
        # tree would make venvs on the controller and fail `python -m venv` on every test host.
        sys.exit("standin_python.py: %s is a distribution build whose ensurepip reads its wheels from outside "
                 "the tree it packs (%s): pack a CPython built from source instead (pyenv, or python.org's), first on "
                 "PATH as python3.11 or given with --python" % (args.python, ", ".join(outside)))
    facts = interpreter_facts(args.python)
    minor = ".".join(facts["version"].split(".")[:2])
    arch = platform.machine()
    filename = "cpython-%s+%s-%s-unknown-linux-gnu-install_only_stripped.tar.gz" % (facts["version"], RELEASE, arch)
    record_path = os.path.join(args.mirror, "standin-%s.json" % minor)
    archive = os.path.join(args.mirror, RELEASE, filename)
    recipe = sha256(os.path.abspath(__file__))
    if os.path.exists(record_path) and os.path.exists(archive):
        record = json.load(open(record_path))
        if record.get("recipe") == recipe and record.get("sha256") == sha256(archive):
            write_vars(args.mirror, minor, record)
            print(json.dumps(record))
            return 0
    os.makedirs(os.path.dirname(archive), exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        tree = os.path.join(work, "python")
        binary = copy_tree(facts["prefix"], minor, tree)
        bundled = bundle_libraries(tree, minor)
        # The packed tree must run on its own: a fresh process, no site, no environment.
        subprocess.run([binary, "-I", "-c", "import ssl, sqlite3, ctypes, lzma, bz2, zlib, venv, ensurepip"],
                       check=True, env={"PATH": "/usr/bin:/bin"})
        pack(tree, archive)
    record = {"version": facts["version"], "release": RELEASE, "arch": arch, "filename": filename,
              "sha256": sha256(archive), "bundled": bundled, "recipe": recipe,
              "source": facts["prefix"]}
    with open(record_path, "w") as out:
        json.dump(record, out, indent=1)
    write_vars(args.mirror, minor, record)
    print(json.dumps(record))
    return 0


def write_vars(mirror, minor, record):
    """python_env's variables that point at this mirror, for `ansible-playbook -e @vars.json`."""
    builds = {minor: {"version": record["version"], "release": record["release"],
                      "sha256": {record["arch"]: record["sha256"]}}}
    with open(os.path.join(mirror, "vars.json"), "w") as out:
        json.dump({"python_env_interpreter_mirror": "file://" + os.path.abspath(mirror),
                   "python_env_interpreter_builds": builds}, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())

"""Stand-in for ansible-test's pip bootstrap script (get-pip.py).

ansible-test downloads get-pip.py from a host outside PyPI to put pip into the empty venvs of its
sanity tests; machines that reach PyPI only cannot fetch it. This does the same job with the
standard library: ensurepip installs the interpreter's bundled pip, which then installs what
ansible-test asked for (the pinned pip and friends) from the configured index.
"""
import ensurepip
import os
import subprocess
import sys

# get-pip's own options, which pip install does not take
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

ensurepip.bootstrap(upgrade=True)
# ensurepip points PIP_CONFIG_FILE at /dev/null for itself; the real install must see pip's config
# (index mirrors, CA bundle).
os.environ.pop("PIP_CONFIG_FILE", None)
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install"] + args))

#!/usr/bin/env python3
"""Every role's meta/argument_specs.yml must match its defaults/main.yml, option for option.

Also: the shared serving spec (serving_*) must have the same default in every role that reads it,
so a role run on its own behaves like the same role inside site.yml.
"""
import glob
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path):
    with open(path) as f:
        return yaml.safe_load(f) or {}


def main():
    errors, shared = [], {}
    for role in sorted(glob.glob(os.path.join(ROOT, "roles", "*"))):
        name = os.path.basename(role)
        spec_file = os.path.join(role, "meta", "argument_specs.yml")
        if not os.path.exists(spec_file):
            errors.append("%s: no meta/argument_specs.yml" % name)
            continue
        defaults_file = os.path.join(role, "defaults", "main.yml")
        defaults = load(defaults_file) if os.path.exists(defaults_file) else {}
        options = (load(spec_file).get("argument_specs", {}).get("main", {}) or {}).get("options", {}) or {}
        for opt in sorted(set(defaults) - set(options)):
            errors.append("%s: default %s is not in argument_specs" % (name, opt))
        for opt, spec in sorted(options.items()):
            if not spec.get("description"):
                errors.append("%s: option %s has no description" % (name, opt))
            if opt in defaults:
                if spec.get("required"):
                    errors.append("%s: option %s is required but has a default" % (name, opt))
                elif spec.get("default") != defaults[opt]:
                    errors.append("%s: option %s default %r != defaults/main.yml %r"
                                  % (name, opt, spec.get("default"), defaults[opt]))
            elif not spec.get("required") and "default" in spec:
                errors.append("%s: option %s has a spec default but none in defaults/main.yml" % (name, opt))
            elif not name.startswith(("preflight",)) and not opt.startswith("serving_") and not spec.get("required"):
                pass
            if opt.startswith("serving_") and opt in defaults:
                shared.setdefault(opt, {})[name] = defaults[opt]
            elif not opt.startswith(("serving_", name + "_")):
                errors.append("%s: option %s is neither serving_* nor prefixed %s_" % (name, opt, name))
    for opt, per_role in sorted(shared.items()):
        values = {repr(v) for v in per_role.values()}
        if len(values) > 1:
            errors.append("shared %s has different defaults: %s" % (opt, per_role))
    for e in errors:
        print("argument_specs: " + e)
    print("argument_specs: %d roles checked, %d problems" % (len(glob.glob(os.path.join(ROOT, "roles", "*"))), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Every role's meta/argument_specs.yml must match its defaults/main.yml, option for option.

Also: the serving spec (serving_*) lives in one role, serving_spec, which every other role
depends on; no other role may define or document a serving_* option (one change, one place).
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
    errors = []
    spec_role = "serving_spec"
    for role in sorted(glob.glob(os.path.join(ROOT, "roles", "*"))):
        name = os.path.basename(role)
        spec_file = os.path.join(role, "meta", "argument_specs.yml")
        if not os.path.exists(spec_file):
            errors.append("%s: no meta/argument_specs.yml" % name)
            continue
        defaults_file = os.path.join(role, "defaults", "main.yml")
        defaults = load(defaults_file) if os.path.exists(defaults_file) else {}
        # the serving spec's entry point is `spec` (roles/serving_spec/meta/argument_specs.yml says why)
        entry = "spec" if name == spec_role else "main"
        options = (load(spec_file).get("argument_specs", {}).get(entry, {}) or {}).get("options", {}) or {}
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
            if opt.startswith("serving_") and name != spec_role:
                errors.append("%s: option %s belongs to the serving spec: define it in roles/%s only"
                              % (name, opt, spec_role))
            elif name == spec_role and not opt.startswith("serving_"):
                errors.append("%s: option %s is not serving_*" % (name, opt))
            elif name != spec_role and not opt.startswith(name + "_"):
                errors.append("%s: option %s is not prefixed %s_" % (name, opt, name))
        for opt in sorted(defaults):
            if opt.startswith("serving_") and name != spec_role:
                errors.append("%s: defaults/main.yml sets %s: the serving spec lives in roles/%s"
                              % (name, opt, spec_role))
        if name != spec_role:
            meta = load(os.path.join(role, "meta", "main.yml"))
            deps = [d.get("role") if isinstance(d, dict) else d for d in meta.get("dependencies") or []]
            if "llmops.serving." + spec_role not in deps:
                errors.append("%s: meta/main.yml does not depend on llmops.serving.%s" % (name, spec_role))
    for e in errors:
        print("argument_specs: " + e)
    print("argument_specs: %d roles checked, %d problems" % (len(glob.glob(os.path.join(ROOT, "roles", "*"))), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

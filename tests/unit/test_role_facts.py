"""What crosses a role is public: a fact one role sets and another role (or a playbook) reads is
named <role>_<name> and listed in the Facts table of the role's README; a `__` name is read only
inside the role (or the playbooks folder) that sets it. No role, playbook or template compares
serving_engine with an engine's name: what an engine differs in is the registry's
(plugins/module_utils/engines.py), read through serving_spec_engine or the engine_info filter."""
import collections
import functools
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ("roles", "playbooks", "templates")
SUFFIXES = (".yml", ".yaml", ".j2")
PRIVATE = re.compile(r"(?<![A-Za-z0-9_.'\"])(__[a-z][a-z0-9_]*[a-z0-9])\b")
REGISTERED = re.compile(r"^\s*register:\s*([a-z_][a-z0-9_]*)\s*$", re.M)
ENGINE_NAME = re.compile(r"serving_engine\s*(==|!=)\s*['\"](vllm|sglang)['\"]|['\"](vllm|sglang)['\"]\s*(==|!=)\s*serving_engine"
                         r"|\bengine\s*(==|!=)\s*['\"](vllm|sglang)['\"]")


def scope_of(rel):
    """Where a name may be read: its role, or the playbooks (and their task files) as one."""
    parts = rel.split(os.sep)
    return "role " + parts[1] if parts[0] == "roles" else parts[0]


@functools.lru_cache(maxsize=None)
def files():
    """(path from the root, text) of every role, playbook and template file, read once per session."""
    out = []
    for top in SCANNED:
        for dirpath, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in sorted(names):
                if name.endswith(SUFFIXES):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8") as handle:
                        out.append((os.path.relpath(path, ROOT), handle.read()))
    return tuple(out)


def set_names(text):
    """Names a task file sets: set_fact keys, registers, and vars keys (a role's vars/ file)."""
    names = set(REGISTERED.findall(text))
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return names
    stack = list(docs)
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("ansible.builtin.set_fact", "set_fact", "vars") and isinstance(value, dict):
                    names.update(k for k in value if isinstance(k, str))
                stack.append(value)
    return names


def inventory():
    """(where each name is set: {name: {scope}}, where each private name is read: {name: {scope: [file]}})."""
    setters, readers = collections.defaultdict(set), collections.defaultdict(lambda: collections.defaultdict(list))
    for rel, text in files():
        scope = scope_of(rel)
        if rel.endswith((".yml", ".yaml")):
            for name in set_names(text):
                setters[name].add(scope)
            if os.sep + "vars" + os.sep in rel:
                for name in yaml.safe_load(text) or {}:
                    setters[name].add(scope)
        for name in set(PRIVATE.findall(text)):
            readers[name][scope].append(rel)
    return setters, readers


def private_reads_outside(setters, readers):
    out = []
    for name, scopes in sorted(readers.items()):
        owners = setters.get(name)
        if not owners:
            continue  # a loop variable, or a name Ansible itself defines
        for scope, rels in sorted(scopes.items()):
            if scope not in owners:
                out.append("%s (set in %s) read in %s" % (name, ", ".join(sorted(owners)), ", ".join(sorted(rels))))
    return out


def test_no_private_name_is_read_outside_the_role_that_sets_it():
    setters, readers = inventory()
    assert private_reads_outside(setters, readers) == []


def test_a_planted_cross_role_read_is_found():
    setters, readers = inventory()
    readers["__preflight_plan_planted"]["role validate"].append("roles/validate/tasks/check.yml")
    setters["__preflight_plan_planted"].add("role preflight")
    assert private_reads_outside(setters, readers) == [
        "__preflight_plan_planted (set in role preflight) read in roles/validate/tasks/check.yml"]


def role_inputs(role):
    path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
    if not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as handle:
        return set(yaml.safe_load(handle) or {})


# Facts a role loads with include_vars from a file the user may replace (not visible in its tasks).
LOADED = {"serving_spec": {"serving_stack_profiles"}}


def set_by_role(role):
    """Every name a role's tasks set, and the names of its vars/ (lazy facts)."""
    names = set(LOADED.get(role, ()))
    for rel, text in files():
        if rel.startswith(os.path.join("roles", role, "tasks") + os.sep):
            names.update(set_names(text))
        elif rel.startswith(os.path.join("roles", role, "vars") + os.sep):
            names.update(yaml.safe_load(text) or {})
    return names


def published(role):
    """The <role>_* names a role sets that are not its inputs: its public facts."""
    return set(n for n in set_by_role(role) if n.startswith(role + "_")) - role_inputs(role)


def facts_table(role):
    path = os.path.join(ROOT, "roles", role, "README.md")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"^## Facts\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return set(re.findall(r"^\| `([a-z_]+)` \|", match.group(1), re.M)) if match else set()


ROLES = sorted(os.listdir(os.path.join(ROOT, "roles")))


@pytest.mark.parametrize("role", ROLES)
def test_every_fact_a_role_publishes_is_in_its_readmes_facts_table(role):
    assert published(role) <= facts_table(role), "add these to roles/%s/README.md's '## Facts' table" % role


@pytest.mark.parametrize("role", ROLES)
def test_the_facts_table_lists_only_facts_the_role_sets(role):
    assert facts_table(role) <= set_by_role(role)


def engine_name_comparisons():
    return sorted("%s: %s" % (rel, match.group(0)) for rel, text in files() for match in ENGINE_NAME.finditer(text))


def test_no_engine_name_is_compared_outside_the_registry():
    assert engine_name_comparisons() == []


def test_a_planted_engine_name_comparison_is_found():
    assert ENGINE_NAME.search("when: serving_engine == 'sglang'") and ENGINE_NAME.search("'vllm' != serving_engine")
    assert ENGINE_NAME.search("lower_first: engine == 'vllm'")
    assert not ENGINE_NAME.search("when: serving_engine == serving_spec_engine.name")

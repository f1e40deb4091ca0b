"""SELinux's needs for nginx, read from what getenforce, getsebool and semanage print on RHEL 9."""
import pytest

from ansible_collections.llmops.serving.plugins.filter.selinux_needs import FilterModule
from ansible_collections.llmops.serving.plugins.module_utils.selinux import boolean_on, mode, needs, port_defined, port_types

# The layout of `semanage port -l` (a header, then type, protocol and a comma list with ranges).
SEMANAGE = """SELinux Port Type              Proto    Port Number

http_cache_port_t              tcp      8080, 8118, 8123, 10001-10010
http_cache_port_t              udp      3130
http_port_t                    tcp      80, 81, 443, 488, 8008, 8009, 8443, 9000
soundd_port_t                  tcp      8000, 9433, 16001
"""
OFF = "httpd_can_network_connect --> off\n"
ON = "httpd_can_network_connect --> on\n"
NGINX = {"booleans": {"httpd_can_network_connect": OFF}, "semanage": SEMANAGE,
         "ports": [{"port": 8443, "proto": "tcp", "type": "http_port_t"}]}


@pytest.mark.parametrize("said, want", [("Enforcing\n", "enforcing"), ("Permissive", "permissive"),
                                        ("Disabled\n", "disabled"), ("", "disabled"), (None, "disabled")])
def test_mode_reads_getenforce_and_a_missing_tool_as_disabled(said, want):
    assert mode(said) == want


def test_boolean_is_on_only_when_getsebool_says_so():
    assert boolean_on(ON, "httpd_can_network_connect")
    assert not boolean_on(OFF, "httpd_can_network_connect")
    assert not boolean_on("Error getting active value for httpd_can_network_connect\n", "httpd_can_network_connect")
    # another boolean's line does not count
    assert not boolean_on("httpd_can_network_connect_db --> on\n", "httpd_can_network_connect")


@pytest.mark.parametrize("port, proto, want", [
    (8443, "tcp", ["http_port_t"]), (80, "tcp", ["http_port_t"]), (10005, "tcp", ["http_cache_port_t"]),
    (10011, "tcp", []), (3130, "tcp", []), (3130, "udp", ["http_cache_port_t"]), (8000, "tcp", ["soundd_port_t"]),
    ("9000", "tcp", ["http_port_t"]), (9443, "tcp", []),
])
def test_port_types_reads_lists_and_ranges(port, proto, want):
    assert port_types(SEMANAGE, proto, port) == want


def test_nothing_is_needed_while_selinux_is_disabled_or_its_tools_are_missing():
    for said in ("Disabled", ""):
        assert needs(dict(NGINX, getenforce=said)) == []


@pytest.mark.parametrize("said", ["Enforcing", "Permissive"])
def test_an_active_policy_needs_the_boolean_with_its_fix(said):
    missing = needs(dict(NGINX, getenforce=said))
    assert missing == [{"name": "httpd_can_network_connect", "argv": ["setsebool", "-P", "httpd_can_network_connect", "on"],
                        "fix": "setsebool -P httpd_can_network_connect on"}]
    assert needs(dict(NGINX, getenforce=said, booleans={"httpd_can_network_connect": ON})) == []


def test_a_port_outside_http_port_t_is_named_with_the_semanage_command():
    missing = needs(dict(NGINX, getenforce="Enforcing", booleans={"httpd_can_network_connect": ON},
                         ports=[{"port": 9443, "proto": "tcp", "type": "http_port_t"}]))
    assert [m["fix"] for m in missing] == ["semanage port -a -t http_port_t -p tcp 9443"]
    assert missing[0]["name"] == "9443/tcp as http_port_t"
    # a port the policy gives another type of its own is modified (-a would be "already defined");
    # one inside another type's range gets a record of its own (-a)
    missing = needs(dict(NGINX, getenforce="Enforcing", booleans={}, ports=[{"port": 8000, "type": "http_port_t"}]))
    assert [m["fix"] for m in missing] == ["semanage port -m -t http_port_t -p tcp 8000"]
    missing = needs(dict(NGINX, getenforce="Enforcing", booleans={}, ports=[{"port": 10005, "type": "http_port_t"}]))
    assert [m["fix"] for m in missing] == ["semanage port -a -t http_port_t -p tcp 10005"]


@pytest.mark.parametrize("port, proto, want", [(8000, "tcp", True), (8443, "tcp", True), (10005, "tcp", False),
                                               (3130, "udp", True), (3130, "tcp", False), (9443, "tcp", False)])
def test_port_defined_is_an_exact_record_not_a_range(port, proto, want):
    assert port_defined(SEMANAGE, proto, port) is want


def test_missing_semanage_is_named_once_with_its_package():
    missing = needs(dict(NGINX, getenforce="Enforcing", booleans={}, semanage=None,
                         ports=[{"port": 9443, "type": "http_port_t"}, {"port": 9444, "type": "http_port_t"}]))
    assert len(missing) == 1 and missing[0]["name"] == "semanage"
    assert "policycoreutils-python-utils" in missing[0]["fix"]


def test_the_filter_is_the_function():
    assert FilterModule().filters()["selinux_needs"](dict(NGINX, getenforce="Enforcing"))[0]["name"] == "httpd_can_network_connect"

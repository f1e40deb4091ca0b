# Copyright: (c) 2026, llmops.serving maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's argument spec documents its defaults option for option (the run validates
inputs against it), and the webhook URL, which may carry a token, is marked no_log there."""
import os

import yaml

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "roles", "monitoring")


def _load(*parts):
    with open(os.path.join(ROLE, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


DEFAULTS = _load("defaults", "main.yml")
OPTIONS = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]


def test_every_default_is_specified_with_the_same_value():
    assert sorted(DEFAULTS) == sorted(OPTIONS)
    differ = dict((name, (OPTIONS[name].get("default"), value)) for name, value in DEFAULTS.items()
                  if OPTIONS[name].get("default") != value)
    assert not differ, differ


def test_alert_delivery_options():
    assert DEFAULTS["monitoring_alertmanager_packages"] == ["prometheus-alertmanager"]
    assert DEFAULTS["monitoring_alertmanager_listen"].startswith("127.0.0.1:")
    assert DEFAULTS["monitoring_alert_webhook_url"] == "" and OPTIONS["monitoring_alert_webhook_url"]["no_log"] is True
    assert DEFAULTS["monitoring_alert_receivers"] == []
    assert (DEFAULTS["monitoring_alert_group_wait"], DEFAULTS["monitoring_alert_group_interval"],
            DEFAULTS["monitoring_alert_repeat_interval"]) == ("30s", "5m", "4h")
    assert (DEFAULTS["monitoring_error_rate_max"], DEFAULTS["monitoring_e2e_p99_slo_seconds"]) == (0.05, 10)

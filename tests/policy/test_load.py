"""Loading a policy: the shipped files validate, and a broken one reports every error by path."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from controller.policy.errors import FieldError, PolicyError, format_path
from controller.policy.load import load_policy_file, parse_policy, parse_policy_yaml
from controller.policy.units import AbsoluteRate, ShareRate

POLICIES = Path(__file__).resolve().parents[2] / "policies"
POLICY_FILES = sorted([*POLICIES.rglob("*.yaml"), *POLICIES.rglob("*.yml")])


def parse_share(text: str) -> Fraction:
    return Fraction(text.rstrip("%")) / 100


def _errors(document: object) -> dict[str, str]:
    with pytest.raises(PolicyError) as info:
        parse_policy(document)
    paths = [error.path for error in info.value.errors]
    assert len(paths) == len(set(paths)), f"one error per path expected, got {paths}"
    return {error.path: error.message for error in info.value.errors}


# --------------------------------------------------------------------------------------------
# The shipped policies
# --------------------------------------------------------------------------------------------


def test_default_policy_loads_with_its_documented_layout(default_policy_path: Path) -> None:
    policy = load_policy_file(default_policy_path)
    assert policy.class_names == ("inference", "training", "best-effort")
    assert [policy.queue_id(name) for name in policy.class_names] == [0, 1, 2]
    assert policy.default_class == "inference"
    assert policy.classes["inference"].dscp == 46
    assert policy.classes["training"].dscp == 26
    assert policy.classes["training"].min_rate == ShareRate(parse_share("70%"))
    assert policy.ports.rate == AbsoluteRate(10_000_000_000)
    assert [rule.name for rule in policy.rules] == [
        "rocev2",
        "training-marked",
        "triton",
        "vllm",
        "torchserve-management",
        "torch-distributed",
        "ssh",
    ]
    assert policy.rules[0].traffic_class == "training"
    assert policy.rules[2].match.tcp_dst == ((8000, 8001),)
    assert policy.rules[5].match.tcp_dst == ((29500, 29510),)
    assert all(rule.bidirectional for rule in policy.rules)


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: str(p.relative_to(POLICIES)))
def test_every_shipped_policy_validates(path: Path) -> None:
    policy = load_policy_file(path)
    assert policy.default_class in policy.classes
    assert all(rule.traffic_class in policy.classes for rule in policy.rules)


def test_shipped_policy_list_is_not_empty() -> None:
    assert POLICIES / "default.yaml" in POLICY_FILES


# --------------------------------------------------------------------------------------------
# Structural errors: all of them, each at its path
# --------------------------------------------------------------------------------------------


def test_bad_document_reports_every_structural_error(document: dict[str, Any]) -> None:
    document["rules"][1]["match"]["tcp_dst"] = 70000
    document["classes"]["best-effort"]["priority"] = 9
    document["ports"]["overrides"]["s1-eth4"] = "10mbps"
    document["classes"]["training"]["max_rate"] = "fast"
    document["rules"][0]["bidirectional"] = "sometimes"
    errors = _errors(document)
    assert set(errors) == {
        "rules[1].match.tcp_dst",
        "classes.best-effort.priority",
        "ports.overrides.s1-eth4",
        "classes.training.max_rate",
        "rules[0].bidirectional",
    }
    assert errors["rules[1].match.tcp_dst"] == "port 70000 out of range (0-65535)"
    assert "less than or equal to 7" in errors["classes.best-effort.priority"]
    assert "unknown rate unit 'mbps'" in errors["ports.overrides.s1-eth4"]
    assert "cannot parse rate 'fast'" in errors["classes.training.max_rate"]


def test_policy_error_text_lists_every_error(document: dict[str, Any]) -> None:
    document["rules"][1]["match"]["tcp_dst"] = 70000
    document["classes"]["best-effort"]["priority"] = 9
    with pytest.raises(PolicyError) as info:
        parse_policy(document, source="mine.yaml")
    text = str(info.value)
    assert text.startswith("mine.yaml: 2 error(s)\n")
    assert "  rules[1].match.tcp_dst: port 70000 out of range (0-65535)" in text
    assert "  classes.best-effort.priority: " in text
    assert info.value.source == "mine.yaml"
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("mutate", "path", "fragment"),
    [
        (lambda d: d["rules"][0].pop("class"), "rules[0].class", "Field required"),
        (lambda d: d["rules"][0].update(name="2bad"), "rules[0].name", "should match pattern"),
        (
            lambda d: d["rules"][2].update(extra=1),
            "rules[2].extra",
            "unknown field 'extra' (fields: name, match, class, bidirectional)",
        ),
        (lambda d: d["classes"]["inference"].update(dscp=64), "classes.inference.dscp", "63"),
        (lambda d: d["classes"]["training"].pop("min_rate"), "classes.training.min_rate", "Field"),
        (
            lambda d: d["classes"]["training"].update(min_rate=True),
            "classes.training.min_rate",
            "True",
        ),
        (lambda d: d["ports"].update(rate="50%"), "ports.rate", "a port rate must be absolute"),
        (lambda d: d.update(classes={}), "classes", "at least 1 item"),
        (lambda d: d.pop("default_class"), "default_class", "Field required"),
        (lambda d: d.update(rule=[]), "rule", "unknown field 'rule' (did you mean 'rules'?)"),
        (
            lambda d: d["rules"][1]["match"].update(ipv4_dst="10.0.0.1/24"),
            "rules[1].match.ipv4_dst",
            "has host bits set",
        ),
        (
            lambda d: d["rules"][1]["match"].update(ip_proto="udp"),
            "rules[1].match",
            "tcp_src/tcp_dst need ip_proto tcp",
        ),
    ],
)
def test_single_structural_error_paths(
    document: dict[str, Any], mutate: Callable[[dict[str, Any]], object], path: str, fragment: str
) -> None:
    mutate(document)
    errors = _errors(document)
    assert list(errors) == [path]
    assert fragment in errors[path]


def test_structural_and_cross_field_errors_are_reported_together(
    document: dict[str, Any],
) -> None:
    """The trap of issue 26: ``udp_dst: 70000`` hid a duplicate DSCP, 120 % of min_rate and
    an unknown class, which appeared one fix at a time."""
    document["rules"][0]["match"]["udp_dst"] = 70000
    document["rules"][2]["class"] = "besteffort"
    document["classes"]["best-effort"]["dscp"] = 46
    document["classes"]["best-effort"]["min_rate"] = "30%"
    assert _errors(document) == {
        "rules[0].match.udp_dst": "port 70000 out of range (0-65535)",
        "rules[2].class": "unknown class 'besteffort' (classes: inference, training, best-effort)",
        "classes.best-effort.dscp": (
            "DSCP 46 is already used by class 'inference'; each class needs its own DSCP to"
            " get its own queue"
        ),
        "classes": "min_rate shares add up to 120%, more than 100% of the port rate",
    }


def test_structural_errors_come_before_cross_field_ones(document: dict[str, Any]) -> None:
    document["rules"][0]["class"] = "nope"
    document["classes"]["best-effort"]["priority"] = 9
    assert list(_errors(document)) == ["classes.best-effort.priority", "rules[0].class"]


def test_a_broken_rule_still_has_its_class_checked(document: dict[str, Any]) -> None:
    """The rest of a rule whose match is invalid still parses, its class reference too."""
    document["rules"][1]["match"]["tcp_dst"] = "http"
    document["rules"][1]["class"] = "interactive"
    document["rules"][2]["name"] = "triton"
    assert list(_errors(document)) == [
        "rules[1].match.tcp_dst",
        "rules[1].class",
        "rules[2].name",
    ]


def test_a_class_with_an_invalid_field_still_exists(document: dict[str, Any]) -> None:
    """A rule naming a class whose priority is out of range is not told the class is unknown;
    the class's fields that parsed (its DSCP, its share) are still checked."""
    document["classes"]["training"]["priority"] = 8
    document["classes"]["training"]["dscp"] = 46
    document["classes"]["training"]["min_rate"] = "75%"
    assert _errors(document) == {
        "classes.training.priority": "Input should be less than or equal to 7",
        "classes.training.dscp": (
            "DSCP 46 is already used by class 'inference'; each class needs its own DSCP to"
            " get its own queue"
        ),
        "classes": "min_rate shares add up to 105%, more than 100% of the port rate",
    }


def test_a_misspelt_min_rate_leaves_the_other_checks_running(document: dict[str, Any]) -> None:
    document["classes"]["inference"]["min_rte"] = document["classes"]["inference"].pop("min_rate")
    document["classes"]["best-effort"]["dscp"] = 26
    document["default_class"] = "interactive"
    assert _errors(document) == {
        "classes.inference.min_rate": "Field required",
        "classes.inference.min_rte": "unknown field 'min_rte' (did you mean 'min_rate'?)",
        "default_class": "unknown class 'interactive' (classes: inference, training, best-effort)",
        "classes.best-effort.dscp": (
            "DSCP 26 is already used by class 'training'; each class needs its own DSCP to get"
            " its own queue"
        ),
    }


def test_guarantees_that_parsed_are_checked_against_the_ports_that_parsed(
    document: dict[str, Any],
) -> None:
    """Guarantees only add up: those that parsed already exceed the override."""
    document["classes"]["inference"]["min_rate"] = "2Gbit"
    document["classes"]["training"]["min_rate"] = "lots"
    document["ports"]["overrides"]["s1-eth5"] = "fast"
    assert _errors(document) == {
        "classes.training.min_rate": (
            "cannot parse rate 'lots': use bit, Kbit, Mbit, Gbit (e.g. 50Mbit) or a share (20%)"
        ),
        "ports.overrides.s1-eth5": (
            "cannot parse rate 'fast': use bit, Kbit, Mbit, Gbit (e.g. 50Mbit) or a share (20%)"
        ),
        "ports.overrides.s1-eth4": (
            "class min_rate values add up to 2100Mbit, above this port rate of 1Gbit"
        ),
    }


@pytest.mark.parametrize(
    ("classes", "message"),
    [
        ("all", "Input should be a valid dictionary"),
        ({}, "Dictionary should have at least 1 item after validation, not 0"),
    ],
)
def test_without_classes_no_reference_is_called_unknown(
    document: dict[str, Any], classes: object, message: str
) -> None:
    """With no class known, "unknown class" on every rule would bury the one real error."""
    document["classes"] = classes
    document["detection"] = {"elephant": {"class": "training"}}
    assert _errors(document) == {"classes": message}


def test_an_invalid_detection_section_is_not_called_missing(document: dict[str, Any]) -> None:
    """Placement needs a detection section; an invalid one is there, just broken."""
    document["forwarding"] = {"mode": "fabric", "placement": {"classes": ["training", "bulk"]}}
    document["detection"] = {"interval": "1ms", "elephant": {"class": "training"}}
    errors = _errors(document)
    assert list(errors) == ["detection.interval", "forwarding.placement.classes[1]"]
    assert errors["forwarding.placement.classes[1]"].startswith("unknown class 'bulk'")


def test_cross_field_checks_of_a_broken_detection_section_still_run(
    document: dict[str, Any],
) -> None:
    document["detection"] = {"elephant": {"class": "bulk"}}
    document["rules"][0]["match"]["udp_dst"] = -1
    assert list(_errors(document)) == ["rules[0].match.udp_dst", "detection.elephant.class"]


def test_any_error_rejects_the_whole_policy(document: dict[str, Any]) -> None:
    """Reporting everything changes nothing about installing: one error and nothing is."""
    document["rules"][2]["match"]["tcp_dst"] = 70000
    with pytest.raises(PolicyError):
        parse_policy(document)


# --------------------------------------------------------------------------------------------
# Unknown keys: the field that was probably meant
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mutate", "path", "message"),
    [
        (
            lambda d: d.update(defualt_class=d.pop("default_class")),
            "defualt_class",
            "unknown field 'defualt_class' (did you mean 'default_class'?)",
        ),
        (
            lambda d: d["classes"]["training"].update(prority=1),
            "classes.training.prority",
            "unknown field 'prority' (did you mean 'priority'?)",
        ),
        (
            lambda d: d["rules"][1].update(clas="inference"),
            "rules[1].clas",
            "unknown field 'clas' (did you mean 'class'?)",
        ),
        (
            lambda d: d["rules"][0]["match"].update(udp_dts=4791),
            "rules[0].match.udp_dts",
            "unknown field 'udp_dts' (did you mean 'udp_dst'?)",
        ),
        (
            lambda d: d["ports"].update(overides={}),
            "ports.overides",
            "unknown field 'overides' (did you mean 'overrides'?)",
        ),
        (
            lambda d: d.update(detection={"elephant": {"class": "training", "fro": "1s"}}),
            "detection.elephant.fro",
            "unknown field 'fro' (did you mean 'for'?)",
        ),
        (
            lambda d: d.update(forwarding={"mode": "fabric", "placment": None}),
            "forwarding.placment",
            "unknown field 'placment' (did you mean 'placement'?)",
        ),
        (
            lambda d: d.update(tenants={"red": {"network": ["10.0.0.0/24"]}}),
            "tenants.red.network",
            "unknown field 'network' (did you mean 'networks'?)",
        ),
        (
            lambda d: d["rules"][0]["match"].update(bogus=1),
            "rules[0].match.bogus",
            "unknown field 'bogus' (fields: in_port, eth_type, vlan_vid, ip_proto, ip_dscp,"
            " ipv4_src, ipv4_dst, tcp_src, tcp_dst, udp_src, udp_dst)",
        ),
    ],
)
def test_unknown_keys_name_the_field_that_was_meant(
    document: dict[str, Any], mutate: Callable[[dict[str, Any]], object], path: str, message: str
) -> None:
    mutate(document)
    errors = _errors(document)
    assert errors[path] == message


# --------------------------------------------------------------------------------------------
# Semantic errors
# --------------------------------------------------------------------------------------------


def test_unknown_default_class(document: dict[str, Any]) -> None:
    document["default_class"] = "bulk"
    errors = _errors(document)
    assert list(errors) == ["default_class"]
    assert errors["default_class"] == (
        "unknown class 'bulk' (classes: inference, training, best-effort)"
    )


def test_unknown_rule_class(document: dict[str, Any]) -> None:
    document["rules"][0]["class"] = "Training"
    errors = _errors(document)
    assert list(errors) == ["rules[0].class"]
    assert "unknown class 'Training'" in errors["rules[0].class"]


def test_duplicate_rule_names(document: dict[str, Any]) -> None:
    document["rules"][2]["name"] = "rocev2"
    errors = _errors(document)
    assert errors == {"rules[2].name": "duplicate rule name 'rocev2' (also rules[0])"}


def test_duplicate_dscp(document: dict[str, Any]) -> None:
    document["classes"]["best-effort"]["dscp"] = 26
    errors = _errors(document)
    assert list(errors) == ["classes.best-effort.dscp"]
    assert "DSCP 26 is already used by class 'training'" in errors["classes.best-effort.dscp"]


def test_min_rate_shares_above_100_percent(document: dict[str, Any]) -> None:
    document["classes"]["best-effort"]["min_rate"] = "10.5%"
    errors = _errors(document)
    assert errors == {
        "classes": "min_rate shares add up to 100.5%, more than 100% of the port rate"
    }


def test_min_rate_shares_of_exactly_100_percent_are_fine(document: dict[str, Any]) -> None:
    for name in document["classes"]:
        document["classes"][name]["min_rate"] = "33.3%"
    document["classes"]["inference"]["min_rate"] = "33.4%"
    parse_policy(document)


def test_absolute_min_rates_above_an_override_port_rate(document: dict[str, Any]) -> None:
    # 2Gbit + 70%·rate + 10%·rate: fits 10Gbit (9Gbit), not a 1Gbit override (2.8Gbit).
    document["classes"]["inference"]["min_rate"] = "2Gbit"
    errors = _errors(document)
    assert list(errors) == ["ports.overrides.s1-eth4"]
    assert errors["ports.overrides.s1-eth4"] == (
        "class min_rate values add up to 2800Mbit, above this port rate of 1Gbit"
    )


def test_absolute_min_rates_above_the_default_port_rate(document: dict[str, Any]) -> None:
    document["ports"]["overrides"] = {}
    document["classes"]["inference"]["min_rate"] = "3Gbit"
    errors = _errors(document)
    assert list(errors) == ["ports.rate"]
    assert "add up to 11Gbit, above this port rate of 10Gbit" in errors["ports.rate"]


def test_max_rate_below_min_rate(document: dict[str, Any]) -> None:
    document["classes"]["training"]["max_rate"] = "5Gbit"  # below 70% of 10Gbit
    errors = _errors(document)
    assert list(errors) == ["classes.training.max_rate"]
    assert errors["classes.training.max_rate"] == (
        "max_rate 5Gbit is below min_rate 70% on a 10Gbit port"
    )


def test_max_rate_below_min_rate_only_on_an_override_port(document: dict[str, Any]) -> None:
    # A 50Mbit guarantee under a 4% cap: 400Mbit on 10Gbit is fine, 40Mbit on 1Gbit is not.
    document["classes"]["best-effort"]["min_rate"] = "50Mbit"
    document["classes"]["best-effort"]["max_rate"] = "4%"
    errors = _errors(document)
    assert errors == {
        "classes.best-effort.max_rate": "max_rate 4% is below min_rate 50Mbit on a 1Gbit port",
    }
    document["classes"]["best-effort"]["max_rate"] = "5%"
    assert parse_policy(document).classes["best-effort"].max_rate == ShareRate(parse_share("5%"))


def test_max_rate_equal_to_min_rate_is_fine(document: dict[str, Any]) -> None:
    document["classes"]["training"]["max_rate"] = "70%"
    assert parse_policy(document).classes["training"].max_rate is not None


def test_all_semantic_errors_are_reported_together(document: dict[str, Any]) -> None:
    document["default_class"] = "bulk"
    document["rules"][1]["class"] = "bulk"
    document["rules"][2]["name"] = "triton"
    document["classes"]["best-effort"]["dscp"] = 46
    document["classes"]["best-effort"]["min_rate"] = "20%"
    assert list(_errors(document)) == [
        "default_class",
        "rules[1].class",
        "rules[2].name",
        "classes.best-effort.dscp",
        "classes",
    ]


# --------------------------------------------------------------------------------------------
# Documents that are not a policy at all, and files that cannot be read
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "kind"),
    [(None, "empty"), ([], "list"), ("classes", "str"), (42, "int")],
)
def test_non_mapping_document(document: object, kind: str) -> None:
    assert _errors(document) == {
        "(document)": f"a policy is a mapping of sections, got {kind}",
    }


def test_empty_yaml_file(write_file: Callable[[str | bytes], Path]) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy_file(write_file(""))
    assert info.value.errors == (
        FieldError("(document)", "a policy is a mapping of sections, got empty"),
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("classes: [a\n", "line 2, column 1"),
        ("classes:\n  a: b: c\n", "line 2, column 7"),
        ("classes:\n  x: {priority: 1\n", "line 3, column 1"),
        ("default_class: a\n\tclasses: {}\n", "line 2, column 1"),
    ],
)
def test_invalid_yaml_reports_line_and_column(text: str, where: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policy_yaml(text, source="bad.yaml")
    (error,) = info.value.errors
    assert error.path == where
    assert error.message.startswith("invalid YAML: ")
    assert info.value.source == "bad.yaml"


def test_yaml_file_error_names_the_file(write_file: Callable[[str | bytes], Path]) -> None:
    path = write_file("classes: {a: 1\n")
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    assert info.value.source == str(path)
    assert info.value.errors[0].path.startswith("line ")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    assert info.value.errors == (FieldError("(file)", "cannot read: No such file or directory"),)
    assert info.value.source == str(path)


def test_directory_instead_of_a_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy_file(tmp_path)
    assert info.value.errors == (FieldError("(file)", "cannot read: Is a directory"),)


def test_file_that_is_not_utf8_is_a_policy_error(
    write_file: Callable[[str | bytes], Path],
) -> None:
    path = write_file(b"\xff\xfeclasses: {}\n")
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    (error,) = info.value.errors
    assert error.path == "(file)"


def test_loading_yaml_text_and_file_agree(
    document: dict[str, Any], write_file: Callable[[str | bytes], Path]
) -> None:
    import yaml

    text = yaml.safe_dump(document)
    assert load_policy_file(write_file(text)) == parse_policy(document) == parse_policy_yaml(text)


@pytest.mark.parametrize(
    ("location", "path"),
    [
        (("rules", 1, "match", "tcp_dst"), "rules[1].match.tcp_dst"),
        (("classes", "best-effort", "priority"), "classes.best-effort.priority"),
        ((), "(document)"),
        ((0,), "[0]"),
    ],
)
def test_format_path(location: tuple[str | int, ...], path: str) -> None:
    assert format_path(location) == path

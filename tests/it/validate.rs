//! `gpustack validate`: every class of stack-file error, with its message,
//! file:line:column and help. Offline: no emulator, and AWS_ENDPOINT_URL points
//! at a closed port to prove no call is made.

use std::process::Command;

use crate::harness::bin;

struct Checked {
    code: i32,
    stdout: String,
    stderr: String,
}

fn validate_with(text: &str, args: &[&str], env: &[(&str, &str)]) -> Checked {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), text).unwrap();
    let mut c = Command::new(bin());
    c.arg("validate")
        .arg("s.toml")
        .args(args)
        .current_dir(dir.path())
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    Checked {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

fn validate(text: &str) -> Checked {
    validate_with(text, &[], &[])
}

fn invalid(text: &str) -> String {
    let c = validate(text);
    assert_eq!(c.code, 1, "expected invalid, got:\n{}\n{}", c.stdout, c.stderr);
    c.stderr
}

const HEAD: &str = "[stack]\nname = \"v\"\nregion = \"us-west-2\"\n\n";

#[test]
fn valid_file_passes() {
    let c = validate(&format!("{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n"));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(c.stdout.contains("is valid: stack v (us-west-2), 1 resource."), "{}", c.stdout);
    insta::assert_snapshot!(c.stdout);
}

#[test]
fn toml_syntax_error_names_the_place() {
    let err = invalid(&format!("{HEAD}[vpc.main]\ncidr_block = 10.0.0.0/16\n"));
    assert!(err.contains("error: invalid TOML"), "{err}");
    assert!(err.contains("--> s.toml:6:"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn unknown_key_is_an_error_with_the_closest_key_and_exact_place() {
    let err = invalid(&format!("{HEAD}[vpc.main]\nCidr_block = \"10.0.0.0/16\"\n"));
    assert!(err.contains("error: unknown key `Cidr_block` in `vpc.main`"), "{err}");
    assert!(err.contains("--> s.toml:6:1"), "{err}");
    assert!(err.contains("help: did you mean `cidr_block`? (keys are case-sensitive)"), "{err}");
    // The mis-cased key also leaves the required one missing: both are reported.
    assert!(err.contains("is missing required attribute `cidr_block`"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn nested_unknown_key_in_a_rule() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[security_group.x]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = 22, cidr_blok = \"0.0.0.0/0\" }}]\n"
    ));
    assert!(err.contains("unknown key `cidr_blok` in `ingress[0]`"), "{err}");
    assert!(err.contains("did you mean `cidr`?"), "{err}");
    assert!(err.contains("--> s.toml:9:"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn unknown_kind_suggests_a_kind() {
    let err = invalid(&format!("{HEAD}[vcp.main]\ncidr_block = \"10.0.0.0/16\"\n"));
    assert!(err.contains("unknown resource kind `vcp`"), "{err}");
    assert!(err.contains("did you mean `vpc`?"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn wrong_types_say_what_was_expected() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\ninternet_gateway = \"true\"\n[placement_group.p]\nstrategy = \"clustr\"\n"
    ));
    assert!(err.contains("`internet_gateway` must be a boolean (true or false), found a string"), "{err}");
    assert!(err.contains("help: write the boolean without quotes: true"), "{err}");
    assert!(err.contains("--> s.toml:7:20"), "{err}");
    assert!(
        err.contains("`strategy` must be one of \"cluster\", \"spread\", \"partition\", found \"clustr\""),
        "{err}"
    );
    assert!(err.contains("did you mean \"cluster\"?"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn missing_required_attribute() {
    let err = invalid(&format!("{HEAD}[subnet.a]\ncidr_block = \"10.0.0.0/24\"\n"));
    assert!(err.contains("`subnet.a` is missing required attribute `vpc`"), "{err}");
    assert!(err.contains("`subnet.a` is missing required attribute `availability_zone`"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn unknown_address_and_unknown_output() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[subnet.a]\nvpc = \"${{vpc.mian.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"${{vpc.main.arn}}\"\n"
    ));
    assert!(err.contains("reference to unknown resource `vpc.mian`"), "{err}");
    assert!(err.contains("did you mean `vpc.main`?"), "{err}");
    assert!(err.contains("--> s.toml:8:8"), "{err}");
    assert!(err.contains("`vpc.main` has no output `arn`"), "{err}");
    assert!(err.contains("--> s.toml:10:22"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn unknown_variable() {
    let err = invalid(&format!("{HEAD}[vpc.main]\ncidr_block = \"${{var.cidr}}\"\n"));
    assert!(err.contains("variable `cidr` has no value"), "{err}");
    assert!(err.contains("--> s.toml:6:15"), "{err}");
    assert!(err.contains("--var cidr=VALUE"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn a_cycle_lists_every_edge_of_the_loop() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n\
         [security_group.a]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ security_group = \"${{security_group.b.id}}\" }}]\n\
         [security_group.b]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ security_group = \"${{security_group.c.id}}\" }}]\n\
         [security_group.c]\nvpc = \"${{vpc.main.id}}\"\ndepends_on = [\"security_group.a\"]\n"
    ));
    assert!(
        err.contains("reference cycle: security_group.a → security_group.b → security_group.c → security_group.a"),
        "{err}"
    );
    assert!(err.contains("security_group.a → security_group.b (at s.toml:9:32)"), "{err}");
    assert!(err.contains("security_group.b → security_group.c (at s.toml:12:32)"), "{err}");
    assert!(err.contains("security_group.c → security_group.a (at s.toml:15:"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn duplicate_resources_and_duplicate_physical_names() {
    let err =
        invalid(&format!("{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[vpc.main]\ncidr_block = \"10.1.0.0/16\"\n"));
    assert!(err.contains("duplicate key"), "{err}");
    assert!(err.contains("--> s.toml:7:"), "{err}");
    insta::assert_snapshot!("duplicate_resources", err);
    let err = invalid(&format!(
        "{HEAD}[placement_group.a]\nstrategy = \"cluster\"\nname = \"pg\"\n[placement_group.b]\nstrategy = \"spread\"\nname = \"pg\"\n"
    ));
    assert!(err.contains("`placement_group.b` and `placement_group.a` would both be named \"pg\""), "{err}");
    insta::assert_snapshot!("duplicate_physical_names", err);
}

#[test]
fn every_problem_of_a_file_is_reported_at_once() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = 42\n[subnet.a]\nvpc = \"${{vpc.nope.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"us-west-2a\"\nzone = 1\n"
    ));
    assert!(err.contains("s.toml has 3 errors"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn stack_table_is_checked() {
    let err = invalid("[stack]\nname = \"Bad_Name\"\nregon = \"us-west-2\"\n");
    assert!(err.contains("stack name \"Bad_Name\" is not valid"), "{err}");
    assert!(err.contains("unknown key `regon` in `stack`"), "{err}");
    assert!(err.contains("missing required attribute `stack.region`"), "{err}");
    insta::assert_snapshot!("stack_table_is_checked", err);
    let err = invalid("[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
    assert!(err.contains("the stack file has no [stack] table"), "{err}");
    insta::assert_snapshot!("no_stack_table", err);
}

#[test]
fn variables_precedence_cli_beats_env_beats_default() {
    let text = "[stack]\nname = \"s-${var.env}\"\nregion = \"us-west-2\"\n[vars]\nenv = \"dev\"\n";
    assert!(validate(text).stdout.contains("stack s-dev "));
    assert!(validate_with(text, &[], &[("GPUSTACK_VAR_env", "ci")]).stdout.contains("stack s-ci "));
    assert!(
        validate_with(text, &["--var", "env=pr-42"], &[("GPUSTACK_VAR_env", "ci")]).stdout.contains("stack s-pr-42 ")
    );
    // A number default makes --var a number, so a typed attribute accepts it.
    let typed = "[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[vars]\nparts = 3\n[placement_group.p]\nstrategy = \"partition\"\npartition_count = \"${var.parts}\"\n";
    assert_eq!(validate_with(typed, &["--var", "parts=5"], &[]).code, 0);
}

#[test]
fn json_diagnostics_for_pipelines() {
    let c = validate_with(&format!("{HEAD}[vpc.main]\ncidr = \"x\"\n"), &["--json"], &[]);
    assert_eq!(c.code, 1);
    let v: serde_json::Value = serde_json::from_str(&c.stdout).unwrap();
    assert_eq!(v["valid"], false);
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["message"].as_str().unwrap().contains("unknown key `cidr`"))
        .unwrap();
    assert_eq!(d["file"], "s.toml");
    assert_eq!(d["line"], 6);
    assert_eq!(d["column"], 1);
    insta::assert_snapshot!(c.stdout);
}

#[test]
fn malformed_input_never_panics() {
    let cases = [
        "",
        "[stack",
        "[[vpc]]\nx=1",
        "[vpc]\nmain = 1",
        "[vpc.main]\ncidr_block = [1,{a=2}]",
        "stack = 1",
        "[stack]\nname=\"a\"\nregion=\"r\"\n[vpc.main]\ncidr_block=\"${\"",
        "[stack]\nname=\"a\"\nregion=\"r\"\n[output]\nx=\"${a.b.c.d}\"",
        "\u{feff}[stack]\u{0}",
        "[stack]\nname=\"a\"\nregion=\"r\"\n[security_group.x]\nvpc=\"v\"\ningress=\"all\"",
    ];
    // Every one of these is invalid: each must fail with a diagnostic, not pass or crash.
    let mut shown = String::new();
    for text in cases {
        let c = validate(text);
        assert_eq!(c.code, 1, "exit {} for {text:?}: {}", c.code, c.stderr);
        assert!(!c.stderr.contains("panicked"), "panic for {text:?}: {}", c.stderr);
        // The BOM and NUL are shown escaped: invisible in a snapshot, and NUL makes git call it binary.
        let stderr = c.stderr.replace('\u{feff}', "\\u{feff}").replace('\0', "\\0");
        shown.push_str(&format!("=== {text:?}\n{stderr}\n"));
    }
    insta::assert_snapshot!(shown);
}

#[test]
fn graph_prints_dot_and_mermaid() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[subnet.a]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"us-west-2a\"\n"
    );
    std::fs::write(dir.path().join("s.toml"), text).unwrap();
    let out = Command::new(bin()).args(["graph", "s.toml"]).current_dir(dir.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"subnet.a\" -> \"vpc.main\";"));
    insta::assert_snapshot!("graph_dot", String::from_utf8_lossy(&out.stdout));
    let out =
        Command::new(bin()).args(["graph", "s.toml", "--format", "mermaid"]).current_dir(dir.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("subnet_a --> vpc_main"));
    insta::assert_snapshot!("graph_mermaid", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let out = Command::new(bin()).args(["plan"]).env("NO_COLOR", "1").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    insta::assert_snapshot!("usage_error", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(bin()).args(["plan", "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("--detailed-exitcode"));
}

#[test]
fn every_shipped_stack_validates() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in ["stacks", "examples"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                // The quickstart asks for the API allowlist (it has no default on purpose).
                let out = Command::new(bin())
                    .arg("validate")
                    .arg(&path)
                    .env("GPUSTACK_VAR_admin_cidr", "198.51.100.7/32")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{} does not validate:\n{}",
                    path.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                n += 1;
            }
        }
    }
    assert!(n >= 2, "found {n} shipped stacks");
}

/// One error of `err`: its message line, then the `-->` location and the `help:` line after it.
fn located(err: &str, message: &str, at: &str, help: &str) {
    let i = err.find(message).unwrap_or_else(|| panic!("no `{message}` in:\n{err}"));
    let rest = &err[i..];
    let block = &rest[..rest[1..].find("\nerror: ").map_or(rest.len(), |j| j + 1)];
    assert!(block.contains(&format!("--> s.toml:{at}\n")), "`{message}` not at s.toml:{at}:\n{block}");
    assert!(block.contains(&format!("help: {help}")), "`{message}` without help `{help}`:\n{block}");
}

#[test]
fn an_integer_beyond_32_bits_is_an_error_where_it_is_written() {
    let err = invalid(&format!(
        "{HEAD}[capacity_reservation.r]\ninstance_type = \"p5.48xlarge\"\navailability_zone = \"us-west-2a\"\ninstance_count = 3000000000\n"
    ));
    located(
        &err,
        "error: `instance_count` is 3000000000, outside the 32-bit integers AWS accepts (-2147483648 to 2147483647)",
        "8:18",
        "check the number for extra digits",
    );
    insta::assert_snapshot!("integer_beyond_32_bits", err);
    // Through a variable too: the place is the reference.
    let c = validate_with(
        &format!(
            "{HEAD}[vars]\nsize = 50\n[placement_group.p]\nstrategy = \"partition\"\npartition_count = \"${{var.size}}\"\n"
        ),
        &["--var", "size=4294967297"],
        &[],
    );
    assert_eq!(c.code, 1, "{}", c.stderr);
    assert!(c.stderr.contains("`partition_count` is 4294967297, outside the 32-bit integers"), "{}", c.stderr);
    assert!(c.stderr.contains("--> s.toml:9:19"), "{}", c.stderr);
    insta::assert_snapshot!("integer_beyond_32_bits_through_a_variable", c.stderr);
}

#[test]
fn cidr_blocks_are_checked_offline() {
    let err = invalid(&format!(
        r#"{HEAD}[vpc.wide]
cidr_block = "10.0.0.0/8"
[vpc.typo]
cidr_block = "10.0.0.0/33"
[vpc.host]
cidr_block = "10.1.2.3/16"
[vpc.main]
cidr_block = "10.42.0.0/16"
[subnet.a]
vpc = "${{vpc.main.id}}"
cidr_block = "10.42.0.0/20"
availability_zone = "us-west-2a"
[subnet.overlapping]
vpc = "${{vpc.main.id}}"
cidr_block = "10.42.8.0/24"
availability_zone = "us-west-2b"
[subnet.outside]
vpc = "${{vpc.main.id}}"
cidr_block = "10.43.0.0/20"
availability_zone = "us-west-2b"
[subnet.tiny]
vpc = "${{vpc.main.id}}"
cidr_block = "10.42.64.0/29"
availability_zone = "us-west-2b"
"#
    ));
    located(
        &err,
        "error: `vpc.wide`: cidr_block \"10.0.0.0/8\" is a /8; EC2 takes /16 to /28",
        "6:14",
        "a vpc block is between /16",
    );
    located(
        &err,
        "error: `vpc.typo`: cidr_block \"10.0.0.0/33\" is not an IPv4 CIDR block",
        "8:14",
        "write the first address",
    );
    located(
        &err,
        "error: `vpc.host`: cidr_block \"10.1.2.3/16\" has host bits set",
        "10:14",
        "the block starting there is \"10.1.0.0/16\"",
    );
    located(
        &err,
        "error: `subnet.overlapping`: cidr_block 10.42.8.0/24 overlaps `subnet.a`'s 10.42.0.0/20",
        "19:14",
        "subnets of vpc.main need separate ranges",
    );
    located(
        &err,
        "error: `subnet.outside`: cidr_block 10.43.0.0/20 is not inside vpc.main's 10.42.0.0/16",
        "23:14",
        "a subnet's block lies within one of its VPC's blocks (10.42.0.0 to 10.42.255.255), or add its range to the VPC's secondary_cidr_blocks",
    );
    located(
        &err,
        "error: `subnet.tiny`: cidr_block \"10.42.64.0/29\" is a /29",
        "27:14",
        "a subnet block is between /16",
    );
    assert!(err.contains("s.toml has 6 errors"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn a_zone_must_belong_to_the_stack_region() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[subnet.a]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"us-east-1a\"\n"
    ));
    located(
        &err,
        "error: `subnet.a`: availability zone \"us-east-1a\" is not in the stack's region us-west-2",
        "10:21",
        "zones of us-west-2 are named us-west-2a, us-west-2b, …; fix the zone or [stack].region",
    );
    insta::assert_snapshot!(err);
    // A Local Zone of the region is fine, and so is a zone from a variable that matches.
    let ok = validate(&format!(
        "{HEAD}[vars]\nzone = \"us-west-2b\"\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[subnet.a]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"us-west-2-lax-1a\"\n[subnet.b]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.1.0/24\"\navailability_zone = \"${{var.zone}}\"\n"
    ));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

#[test]
fn security_group_rules_are_checked_for_ports_and_repeats() {
    let err = invalid(&format!(
        r#"{HEAD}[vpc.main]
cidr_block = "10.0.0.0/16"
[security_group.g]
vpc = "${{vpc.main.id}}"
ingress = [
  {{ protocol = "tcp", from_port = 443, cidr = "10.0.0.0/16" }},
  {{ protocol = "tcp", from_port = 70000, to_port = 70001, cidr = "10.0.0.0/16" }},
  {{ protocol = "udp", from_port = 9000, to_port = 8000, cidr = "10.0.0.0/16" }},
  {{ protocol = "6", from_port = 443, to_port = 443, cidr = "10.0.0.0/16", description = "again" }},
  {{ protocol = "tcp", from_port = 22, cidr = "10.0.0/16" }},
]
egress = [{{ protocol = "-1", cidr = "0.0.0.0/0" }}, {{ protocol = "all", cidr = "0.0.0.0/0" }}]
"#
    ));
    located(
        &err,
        "error: `ingress[1].from_port` is 70000: ports are 0 to 65535",
        "11:35",
        "write a from_port from 0 to 65535",
    );
    located(
        &err,
        "error: `ingress[1].to_port` is 70001: ports are 0 to 65535",
        "11:52",
        "write a to_port from 0 to 65535",
    );
    located(
        &err,
        "error: `ingress[2]`: from_port 9000 is above to_port 8000",
        "12:51",
        "a range runs from from_port up to to_port: from_port = 8000, to_port = 9000",
    );
    located(&err, "error: `ingress[3]` repeats `ingress[0]`", "13:3", "remove one of them");
    located(
        &err,
        "error: `ingress[4].cidr`: \"10.0.0/16\" is not a CIDR block",
        "14:46",
        "write an address and a prefix length",
    );
    located(&err, "error: `egress[1]` repeats `egress[0]`", "16:52", "remove one of them");
    assert!(err.contains("s.toml has 6 errors"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn tags_are_checked_against_aws_limits() {
    let long_key = "k".repeat(129);
    let long_value = "v".repeat(257);
    let err = invalid(&format!(
        "[stack]\nname = \"v\"\nregion = \"us-west-2\"\ntags = {{ \"aws:team\" = \"ml\", ok = \"fine\" }}\n\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\ntags = {{ {long_key} = \"x\", note = \"{long_value}\", \"AWS:Owner\" = \"me\", \"\" = \"empty\" }}\n"
    ));
    located(
        &err,
        "error: `stack.tags`: the tag key \"aws:team\" uses the prefix `aws:`, which AWS reserves",
        "4:10",
        "AWS refuses tags whose keys start with aws: (in any case); pick another prefix",
    );
    located(
        &err,
        "error: `vpc.main.tags`: a tag key of 129 characters is outside AWS's 1 to 128",
        "8:10",
        "shorten the key",
    );
    located(
        &err,
        "error: `vpc.main.tags.note`: a tag value of 257 characters is over AWS's 256",
        "8:154",
        "shorten the value",
    );
    located(
        &err,
        "error: `vpc.main.tags`: the tag key \"AWS:Owner\" uses the prefix `aws:`",
        "8:415",
        "AWS refuses tags whose keys start with aws: (in any case)",
    );
    located(
        &err,
        "error: `vpc.main.tags`: a tag key of 0 characters is outside AWS's 1 to 128",
        "8:435",
        "shorten the key",
    );
    assert!(err.contains("s.toml has 5 errors"), "{err}");
    insta::assert_snapshot!(err);
}

#[test]
fn deeper_checks_come_in_one_pass_with_the_others() {
    // A schema error, an unknown reference and every kind of deeper check, all at once.
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/12\"\ntags = {{ \"aws:x\" = \"y\" }}\nColor = \"blue\"\n[subnet.a]\nvpc = \"${{vpc.main.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"eu-west-1a\"\n[security_group.g]\nvpc = \"${{vpc.nope.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = -1, cidr = \"10.0.0.0/16\" }}]\n"
    ));
    for m in [
        "unknown key `Color` in `vpc.main`",
        "cidr_block \"10.0.0.0/12\" is a /12",
        "the tag key \"aws:x\" uses the prefix `aws:`",
        "availability zone \"eu-west-1a\" is not in the stack's region us-west-2",
        "reference to unknown resource `vpc.nope`",
        "`ingress[0].from_port` is -1: ports are 0 to 65535",
    ] {
        assert!(err.contains(m), "missing `{m}` in:\n{err}");
    }
    assert!(err.contains("s.toml has 6 errors"), "{err}");
    insta::assert_snapshot!(err);
}

/// A cluster, a CAPACITY_BLOCK node group and its launch template, around `lt` lines.
fn gpu_group(version: &str, lt: &str) -> String {
    format!(
        r#"{HEAD}[vpc.main]
cidr_block       = "10.0.0.0/16"
internet_gateway = true

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.0.0.0/24"
availability_zone = "us-west-2a"
public            = true

[eks_cluster.main]
version             = "{version}"
role                = "arn:aws:iam::123456789012:role/cluster"
subnets             = ["${{subnet.a.id}}"]
public_access_cidrs = ["203.0.113.0/24"]

[launch_template.gpu]
instance_type = "g6.xlarge"
{lt}

[node_group.gpu]
cluster         = "${{eks_cluster.main.name}}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["${{subnet.a.id}}"]
launch_template = "${{launch_template.gpu.id}}"
capacity_type   = "CAPACITY_BLOCK"
scaling         = {{ min = 0, max = 2 }}
"#
    )
}

#[test]
fn independent_mistakes_across_layers_are_reported_in_one_run() {
    // A variable without a value (language), a kind's own check (hop limit), a GPU rule
    // across resources (a CAPACITY_BLOCK group whose template is not a block's) and an
    // instance-catalog rule (EFA on g6.xlarge): before, the rules waited until the others
    // were fixed.
    let text = gpu_group("1.33", "imds_hop_limit = 99\nefa = {}")
        .replace("internet_gateway = true", "internet_gateway = true\ntags = { team = \"${var.nope}\" }");
    let err = invalid(&text);
    for m in [
        "variable `nope` has no value",
        "`imds_hop_limit` = 99 is outside 1–64",
        "`node_group.gpu` is CAPACITY_BLOCK, but its launch template `launch_template.gpu` does not set market",
        "`launch_template.gpu`: g6.xlarge does not support EFA",
    ] {
        assert!(err.contains(m), "missing `{m}` in:\n{err}");
    }
    insta::assert_snapshot!(err);
}

#[test]
fn a_kubernetes_version_eks_no_longer_offers_fails_offline() {
    // EKS's calendar: 1.31's extended support ended 2026-11-26, after which no new cluster
    // runs it; 1.29 ended 2026-03-23.
    let ok = gpu_group("1.33", "market = \"capacity-block\"\ncapacity_reservation = \"cr-0123456789abcdef0\"");
    assert_eq!(validate(&ok).code, 0, "{}", validate(&ok).stderr);
    let err = invalid(&ok.replace("\"1.33\"", "\"1.29\""));
    located(
        &err,
        "`eks_cluster.main`: EKS no longer offers Kubernetes 1.29: its extended support ended on 2026-03-23",
        "16:23",
        "EKS creates clusters on",
    );
    // The list of versions offered moves with the calendar: the unit tests pin a date.
    assert!(err.contains("its release calendar); set version to one of them"), "{err}");
    let err = invalid(&ok.replace("\"1.33\"", "\"1.99\""));
    assert!(err.contains("error: `eks_cluster.main`: EKS does not offer Kubernetes 1.99 yet"), "{err}");
    assert!(err.contains("--> s.toml:16:23"), "{err}");
}

#[test]
fn a_gpu_type_newer_than_the_catalog_validates_on_its_nvidia_ami() {
    // p6e-gb200 is not in the embedded catalog; EKS UG ml-eks-optimized-ami runs it on
    // AL2023_ARM_64_NVIDIA only. Offline that is a warning, not "no NVIDIA GPU".
    let text = gpu_group("1.33", "market = \"capacity-block\"\ncapacity_reservation = \"cr-0123456789abcdef0\"")
        .replace("instance_type = \"g6.xlarge\"", "instance_type = \"p6e-gb200.36xlarge\"")
        .replace(
            "capacity_type   = \"CAPACITY_BLOCK\"",
            "capacity_type   = \"CAPACITY_BLOCK\"\nami_type        = \"AL2023_ARM_64_NVIDIA\"",
        );
    let c = validate(&text);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(!c.stderr.contains("has no NVIDIA GPU"), "{}", c.stderr);
    assert!(c.stderr.contains("p6e-gb200.36xlarge is not in gpustack's embedded instance catalog"), "{}", c.stderr);
}

#[test]
fn an_al2_ami_type_on_kubernetes_1_33_fails_offline() {
    // awslabs/amazon-eks-ami#2545: EKS publishes no AL2 AMIs after 1.32.
    let text = gpu_group("1.33", "market = \"capacity-block\"\ncapacity_reservation = \"cr-0123456789abcdef0\"")
        .replace(
            "capacity_type   = \"CAPACITY_BLOCK\"",
            "capacity_type   = \"CAPACITY_BLOCK\"\nami_type        = \"AL2_x86_64_GPU\"",
        );
    let err = invalid(&text);
    assert!(
        err.contains("error: `node_group.gpu`: AL2_x86_64_GPU is an Amazon Linux 2 AMI, and EKS publishes none for Kubernetes 1.33"),
        "{err}"
    );
    assert!(err.contains("use ami_type = \"AL2023_x86_64_NVIDIA\""), "{err}");
    let ok = validate(&text.replace("\"1.33\"", "\"1.32\""));
    assert_eq!(ok.code, 0, "{}", ok.stderr);
}

#[test]
fn a_settings_table_inside_bottlerocket_settings_is_refused() {
    let lt = "market = \"capacity-block\"\ncapacity_reservation = \"cr-0123456789abcdef0\"\n\
              bottlerocket_settings = { settings = { kernel = { lockdown = \"integrity\" } } }";
    let err = invalid(&gpu_group("1.33", lt));
    located(
        &err,
        "`bottlerocket_settings` holds the contents of Bottlerocket's [settings]",
        "25:27",
        "drop the outer `settings`",
    );
    insta::assert_snapshot!(err);
    let fixed = lt.replace(
        "{ settings = { kernel = { lockdown = \"integrity\" } } }",
        "{ kernel = { lockdown = \"integrity\" } }",
    );
    assert_eq!(validate(&gpu_group("1.33", &fixed)).code, 0);
}

#[test]
fn a_data_volume_on_an_al2023_group_is_refused() {
    let lt = "market = \"capacity-block\"\ncapacity_reservation = \"cr-0123456789abcdef0\"\ndata_volume = { size_gib = 200 }";
    let al2023 = gpu_group("1.33", lt)
        .replace("scaling         =", "ami_type        = \"AL2023_x86_64_NVIDIA\"\nscaling         =");
    let err = invalid(&al2023);
    located(
        &err,
        "`node_group.gpu` runs AL2023_x86_64_NVIDIA, but `launch_template.gpu` sets data_volume: AL2023 keeps container images on its root volume and never mounts /dev/xvdb",
        "25:15",
        "for AL2023 replace data_volume with root_volume = { size_gib = 200 } (images live on /dev/xvda)",
    );
    // The fix names the root volume, which the template can now grow (review r18 M4, issue 19).
    assert!(err.contains("local_storage = \"raid0\""), "{err}");
    let fixed = al2023.replace("data_volume = { size_gib = 200 }", "root_volume = { size_gib = 200 }");
    assert_eq!(validate(&fixed).code, 0, "root_volume is AL2023's");
    insta::assert_snapshot!(err);
    // Bottlerocket (auto here) mounts it as its data volume.
    assert_eq!(validate(&gpu_group("1.33", lt)).code, 0);
}

/// Issue 19, "one pass means one pass": a file with a mistake for every pass of the load step
/// (language: an undefined variable, an unknown key, a wrong type, a bad enum value, an
/// unknown reference; the graph: a cycle; the kinds' checks and the stack checks: a CIDR
/// size, a zone, a tag key, a hop limit; the GPU rules across resources; the instance
/// catalog's rules) reports every one of them in one `validate` run, each at its
/// file:line:column. (A resource with an error in its own values is left out of the later
/// checks, so each mistake here is in a resource of its own where a later pass reads it.)
#[test]
fn every_pass_reports_its_errors_in_one_run() {
    let text = r#"[stack]
name   = "v"
region = "us-west-2"
tags   = { "aws:team" = "x" }

[vpc.main]
cidr_block       = "10.0.0.0/12"
internet_gateway = true

[subnet.a]
vpc               = "${vpc.main.id}"
cidr_block        = "10.0.0.0/24"
availability_zone = "eu-west-1a"
public            = true

[security_group.x]
vpc     = "${vpc.main.id}"
ingress = [{ protocol = "-1", security_group = "${security_group.y.id}" }]

[security_group.y]
vpc     = "${vpc.main.id}"
ingress = [{ protocol = "-1", security_group = "${security_group.x.id}" }]
tags    = { env = "${var.nope}" }

[iam_role.node]
service          = "ec2.amazonaws.com"
managed_policies = 7

[placement_group.pg]
strategy = "clustr"

[eks_cluster.main]
version = "1.33"
role    = "arn:aws:iam::123456789012:role/c"
subnets = ["${subnet.nope.id}"]
nmae    = "x"

[launch_template.gpu]
instance_type  = "g6.xlarge"
efa            = {}
imds_hop_limit = 99

[node_group.gpu]
cluster         = "${eks_cluster.main.name}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["${subnet.a.id}"]
launch_template = "${launch_template.gpu.id}"
capacity_type   = "CAPACITY_BLOCK"
scaling         = { min = 0, max = 2 }
"#;
    let err = invalid(text);
    let at = |message: &str, place: &str| {
        let i = err.find(message).unwrap_or_else(|| panic!("no `{message}` in:\n{err}"));
        let rest = &err[i..];
        let block = &rest[..rest[1..].find("\nerror: ").map_or(rest.len(), |j| j + 1)];
        assert!(block.contains(&format!("--> s.toml:{place}")), "`{message}` not at s.toml:{place}:\n{block}");
    };
    at("the tag key \"aws:team\" uses the prefix `aws:`", "4:");
    at("cidr_block \"10.0.0.0/12\" is a /12", "7:");
    at("variable `nope` has no value", "23:");
    at("availability zone \"eu-west-1a\" is not in the stack's region us-west-2", "13:");
    at("reference cycle: security_group.x → security_group.y → security_group.x", "");
    at("`managed_policies` must be a list of strings, found an integer", "27:");
    at("`strategy` must be one of", "30:");
    at("reference to unknown resource `subnet.nope`", "35:");
    at("unknown key `nmae`", "36:");
    at("`imds_hop_limit` = 99 is outside 1–64", "41:");
    at("`launch_template.gpu`: g6.xlarge does not support EFA", "");
    at("`node_group.gpu` is CAPACITY_BLOCK, but its launch template `launch_template.gpu` does not set market", "");
    let errors = err.matches("\nerror: ").count() + usize::from(err.starts_with("error: "));
    assert!(errors >= 12, "{errors} errors:\n{err}");
    assert!(err.contains(&format!("s.toml has {errors} errors")), "{err}");
}

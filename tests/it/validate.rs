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
}

#[test]
fn toml_syntax_error_names_the_place() {
    let err = invalid(&format!("{HEAD}[vpc.main]\ncidr_block = 10.0.0.0/16\n"));
    assert!(err.contains("error: invalid TOML"), "{err}");
    assert!(err.contains("--> s.toml:6:"), "{err}");
}

#[test]
fn unknown_key_is_an_error_with_the_closest_key_and_exact_place() {
    let err = invalid(&format!("{HEAD}[vpc.main]\nCidr_block = \"10.0.0.0/16\"\n"));
    assert!(err.contains("error: unknown key `Cidr_block` in `vpc.main`"), "{err}");
    assert!(err.contains("--> s.toml:6:1"), "{err}");
    assert!(err.contains("help: did you mean `cidr_block`? (keys are case-sensitive)"), "{err}");
    // The mis-cased key also leaves the required one missing: both are reported.
    assert!(err.contains("is missing required attribute `cidr_block`"), "{err}");
}

#[test]
fn nested_unknown_key_in_a_rule() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[security_group.x]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = 22, cidr_blok = \"0.0.0.0/0\" }}]\n"
    ));
    assert!(err.contains("unknown key `cidr_blok` in `ingress[0]`"), "{err}");
    assert!(err.contains("did you mean `cidr`?"), "{err}");
    assert!(err.contains("--> s.toml:9:"), "{err}");
}

#[test]
fn unknown_kind_suggests_a_kind() {
    let err = invalid(&format!("{HEAD}[vcp.main]\ncidr_block = \"10.0.0.0/16\"\n"));
    assert!(err.contains("unknown resource kind `vcp`"), "{err}");
    assert!(err.contains("did you mean `vpc`?"), "{err}");
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
}

#[test]
fn missing_required_attribute() {
    let err = invalid(&format!("{HEAD}[subnet.a]\ncidr_block = \"10.0.0.0/24\"\n"));
    assert!(err.contains("`subnet.a` is missing required attribute `vpc`"), "{err}");
    assert!(err.contains("`subnet.a` is missing required attribute `availability_zone`"), "{err}");
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
}

#[test]
fn unknown_variable() {
    let err = invalid(&format!("{HEAD}[vpc.main]\ncidr_block = \"${{var.cidr}}\"\n"));
    assert!(err.contains("variable `cidr` has no value"), "{err}");
    assert!(err.contains("--> s.toml:6:15"), "{err}");
    assert!(err.contains("--var cidr=VALUE"), "{err}");
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
}

#[test]
fn duplicate_resources_and_duplicate_physical_names() {
    let err =
        invalid(&format!("{HEAD}[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[vpc.main]\ncidr_block = \"10.1.0.0/16\"\n"));
    assert!(err.contains("duplicate key"), "{err}");
    assert!(err.contains("--> s.toml:7:"), "{err}");
    let err = invalid(&format!(
        "{HEAD}[placement_group.a]\nstrategy = \"cluster\"\nname = \"pg\"\n[placement_group.b]\nstrategy = \"spread\"\nname = \"pg\"\n"
    ));
    assert!(err.contains("`placement_group.b` and `placement_group.a` would both be named \"pg\""), "{err}");
}

#[test]
fn every_problem_of_a_file_is_reported_at_once() {
    let err = invalid(&format!(
        "{HEAD}[vpc.main]\ncidr_block = 42\n[subnet.a]\nvpc = \"${{vpc.nope.id}}\"\ncidr_block = \"10.0.0.0/24\"\navailability_zone = \"us-west-2a\"\nzone = 1\n"
    ));
    assert!(err.contains("s.toml has 3 errors"), "{err}");
}

#[test]
fn stack_table_is_checked() {
    let err = invalid("[stack]\nname = \"Bad_Name\"\nregon = \"us-west-2\"\n");
    assert!(err.contains("stack name \"Bad_Name\" is not valid"), "{err}");
    assert!(err.contains("unknown key `regon` in `stack`"), "{err}");
    assert!(err.contains("missing required attribute `stack.region`"), "{err}");
    let err = invalid("[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
    assert!(err.contains("the stack file has no [stack] table"), "{err}");
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
    for text in cases {
        let c = validate(text);
        assert!(c.code == 0 || c.code == 1, "exit {} for {text:?}: {}", c.code, c.stderr);
        assert!(!c.stderr.contains("panicked"), "panic for {text:?}: {}", c.stderr);
    }
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
    let out =
        Command::new(bin()).args(["graph", "s.toml", "--format", "mermaid"]).current_dir(dir.path()).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("subnet_a --> vpc_main"));
}

#[test]
fn usage_errors_exit_1_and_help_exits_0() {
    let out = Command::new(bin()).args(["plan"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
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

//! Planning without AWS, and AWS failures as people read them (issue 11 items 8, 11):
//! `plan --refresh=false` and `validate` make no AWS call and need no credentials (the
//! GPU rules use the embedded instance catalog), every shipped example plans that way,
//! an AWS failure is one line that names the operation and says what to do, and a
//! failed operation's `--json` events carry the AWS error's parts.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::harness::{Env, Run, bin};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every shipped stack file: stacks/*.toml and examples/*.toml.
pub(crate) fn shipped() -> Vec<PathBuf> {
    let mut files = vec![];
    for dir in ["stacks", "examples"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    files
}

/// gpustack with no AWS configuration at all: no credentials, no profile, no endpoint,
/// no shared config files, no instance metadata.
fn bare(dir: &Path, args: &[&str]) -> Run {
    let mut c = Command::new(bin());
    c.args(args).current_dir(dir).stdin(Stdio::null());
    for k in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ] {
        c.env_remove(k);
    }
    c.env("HOME", dir)
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("NO_COLOR", "1");
    let out = c.output().expect("run gpustack");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// What no AWS error text may show: the SDK's debug structure.
fn assert_no_sdk_debug(text: &str) {
    for leak in ["DispatchFailure", "ConnectorError", "ServiceError", "SdkError", "source: ", "Some(", "{ "] {
        assert!(!text.contains(leak), "SDK debug text `{leak}` reached the user:\n{text}");
    }
}

#[test]
fn every_shipped_example_plans_offline_with_no_credentials() {
    let dir = tempfile::tempdir().unwrap();
    for file in shipped() {
        let path = file.to_string_lossy().into_owned();
        let mut args = vec!["plan", path.as_str(), "--refresh=false", "--var", "admin_cidr=198.51.100.7/32"];
        // A HyperPod example creates its EKS cluster too: planned whole only with the opt-out.
        if std::fs::read_to_string(&file).unwrap().contains("[hyperpod_cluster.") {
            args.push("--hyperpod-chart-installed");
        }
        let r = bare(dir.path(), &args);
        assert_eq!(r.code, 0, "{path} must plan offline without credentials:\n{r:?}");
        assert!(r.stdout.contains("Plan: "), "{path}: {r:?}");
        assert_no_sdk_debug(&r.stderr);
        let v = bare(dir.path(), &["validate", &path, "--var", "admin_cidr=198.51.100.7/32"]);
        assert_eq!(v.code, 0, "{path} must validate offline:\n{v:?}");
    }
}

#[test]
fn offline_plan_shows_blocks_unpriced_skips_quotas_and_uses_the_embedded_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let training = repo().join("examples/training.toml").to_string_lossy().into_owned();
    let r = bare(dir.path(), &["plan", &training, "--refresh=false"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("purchase (non-refundable)"), "a block is still a purchase: {r:?}");
    assert!(r.stdout.contains("offering and price not looked up (--refresh=false)"), "{r:?}");
    assert!(r.stdout.contains("price not looked up (--refresh=false), non-refundable"), "summary: {r:?}");
    // The catalog notes come from the embedded catalog: the GPUs and the EFA layout.
    assert!(r.stdout.contains("p5.48xlarge: 8× H100 80 GiB, 192 vCPUs, 32 EFA; 32 EFA interfaces"), "{r:?}");
    let notes: Vec<&str> = r.stderr.lines().filter(|l| l.contains("quotas not checked")).collect();
    assert_eq!(notes.len(), 1, "one line says the quota check is skipped: {r:?}");

    let json = bare(dir.path(), &["plan", &training, "--refresh=false", "--json"]);
    assert_eq!(json.code, 0, "{json:?}");
    let plan: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let block = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "capacity_block")
        .unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(block["purchase"]["looked_up"], false, "{block}");
}

/// A stack whose GPU mistakes only the instance catalog can find.
fn wrong_gpus(lt: &str) -> String {
    format!(
        r#"[stack]
name   = "offline-rules"
region = "us-west-2"

[vpc.main]
cidr_block = "10.9.0.0/16"

[security_group.efa]
vpc = "${{vpc.main.id}}"
efa = true

[launch_template.t]
{lt}
"#
    )
}

#[test]
fn offline_validate_and_plan_run_the_catalog_rules() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "instance_type = \"g6.xlarge\"\nefa = { security_groups = [\"${security_group.efa.id}\"] }",
            "`launch_template.t`: g6.xlarge does not support EFA",
        ),
        (
            "instance_type = \"g6.xlarge\"\ngpu_sharing = { strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"1g.10gb\" } }",
            "MIG needs an A100, A30, H100, H200 or B200 GPU; g6.xlarge has L4",
        ),
        (
            "instance_type = \"p5.48xlarge\"\nefa = { interfaces = 64 }",
            "p5.48xlarge has at most 32 EFA interfaces, not 64",
        ),
    ];
    for (i, (lt, msg)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("c{i}.toml"));
        std::fs::write(&file, wrong_gpus(lt)).unwrap();
        let file = file.to_string_lossy().into_owned();
        for args in [vec!["validate", &file], vec!["plan", &file, "--refresh=false"]] {
            let r = bare(dir.path(), &args);
            assert_eq!(r.code, 1, "case {i} {args:?} must fail: {r:?}");
            assert!(r.stderr.contains(msg), "case {i} {args:?}: expected {msg:?} in {r:?}");
            assert!(r.stderr.contains(&format!("c{i}.toml:")), "case {i} names file:line:column: {r:?}");
        }
    }
    // A type the embedded catalog does not carry is left to a refreshing plan, not refused.
    let file = dir.path().join("std.toml");
    std::fs::write(&file, wrong_gpus("instance_type = \"m6i.large\"")).unwrap();
    let r = bare(dir.path(), &["plan", &file.to_string_lossy(), "--refresh=false"]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// One run, every error: a plan the diff refuses (an unknown `--target`) still shows the
/// instance-catalog rules' errors, each with file:line:column, instead of one per run.
#[test]
fn a_refused_plan_still_reports_the_catalog_rules() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    let lt = "instance_type = \"g6.xlarge\"\nefa = { security_groups = [\"${security_group.efa.id}\"] }";
    std::fs::write(&file, wrong_gpus(lt)).unwrap();
    let file = file.to_string_lossy().into_owned();
    let r = bare(dir.path(), &["plan", &file, "--refresh=false", "--target", "vpc.nope"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("--target vpc.nope: no such resource"), "{r:?}");
    assert!(r.stderr.contains("`launch_template.t`: g6.xlarge does not support EFA"), "{r:?}");
    assert!(r.stderr.contains("s.toml:"), "the rule's error names file:line:column: {r:?}");
}

#[test]
fn offline_plan_makes_no_aws_call_even_with_an_endpoint() {
    let env = Env::new();
    let training = repo().join("examples/training.toml").to_string_lossy().into_owned();
    env.emu.reset_requests();
    env.ok(&["plan", &training, "--refresh=false"]);
    assert_eq!(env.emu.requests(), vec![], "plan --refresh=false called AWS");
}

/// The stderr lines of a run, without blank ones.
fn lines(r: &Run) -> Vec<&str> {
    r.stderr.lines().filter(|l| !l.trim().is_empty()).collect()
}

#[test]
fn no_credentials_is_one_line_that_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let quickstart = repo().join("stacks/quickstart.toml").to_string_lossy().into_owned();
    let r = bare(dir.path(), &["plan", &quickstart, "--var", "admin_cidr=198.51.100.7/32"]);
    assert_eq!(r.code, 1, "{r:?}");
    let l = lines(&r);
    assert_eq!(l.len(), 1, "one line: {r:?}");
    let line = l[0];
    assert!(line.starts_with("error: "), "{line}");
    assert!(line.contains(" failed: no AWS credentials found"), "names the operation and the cause: {line}");
    assert!(line.contains("AWS_PROFILE") && line.contains("--refresh=false"), "says what to do: {line}");
    assert_no_sdk_debug(line);
}

#[test]
fn an_unreachable_endpoint_is_one_line_that_says_what_to_do() {
    let env = Env::new();
    let quickstart = repo().join("stacks/quickstart.toml").to_string_lossy().into_owned();
    // Port 9 (discard) on loopback: nothing listens, so the connection is refused at once.
    let out = env
        .command(&["plan", &quickstart, "--var", "admin_cidr=198.51.100.7/32"])
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_MAX_ATTEMPTS", "1")
        .output()
        .unwrap();
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(r.code, 1, "{r:?}");
    let l = lines(&r);
    assert_eq!(l.len(), 1, "one line: {r:?}");
    assert!(l[0].contains(" failed: cannot connect to the endpoint http://127.0.0.1:9 (AWS_ENDPOINT_URL)"), "{r:?}");
    assert!(l[0].contains("check the network"), "{r:?}");
    assert_no_sdk_debug(l[0]);
}

#[test]
fn a_failed_operation_in_json_events_carries_the_aws_error() {
    let env = Env::new();
    // AWS refuses a CIDR that is not one. It comes from another resource's output, because
    // validate refuses a literal bad block before anything starts.
    let bad = crate::harness::network_stack("typed", "")
        .replace("cidr_block       = \"10.42.0.0/16\"", "cidr_block       = \"${placement_group.train.name}\"");
    env.write("s.toml", &bad);
    let r = env.run(&["apply", "s.toml", "--auto-approve", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let events: Vec<serde_json::Value> = r.stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let failed = events.iter().find(|e| e["event"] == "failed").unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(failed["address"], "vpc.main");
    assert_eq!(failed["service"], "ec2");
    assert_eq!(failed["operation"], "CreateVpc");
    assert_eq!(failed["error_code"], "InvalidParameterValue");
    assert!(
        failed["message"].as_str().is_some_and(|m| !m.is_empty() && !m.starts_with("InvalidParameterValue")),
        "{failed}"
    );
    assert!(failed["error"].as_str().unwrap().starts_with("CreateVpc failed: InvalidParameterValue"), "{failed}");
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "summary");
    let first = &summary["failed"][0];
    assert_eq!((first["service"].as_str(), first["error_code"].as_str()), (Some("ec2"), Some("InvalidParameterValue")));

    // A destroy whose delete AWS refuses: a VPC deleted while a subnet is still in it is
    // `DependencyViolation`; here the subnet is made outside gpustack, so destroy cannot know.
    let good = crate::harness::network_stack("typed", "");
    env.write("s.toml", &good);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let vpc = env.state("typed")["resources"]["vpc.main"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    crate::harness::block_on(ec2.create_subnet().vpc_id(&vpc).cidr_block("10.42.200.0/24").send()).unwrap();
    let d = env.run(&["destroy", "s.toml", "--auto-approve", "--json"]);
    assert_eq!(d.code, 1, "{d:?}");
    let failed: Vec<serde_json::Value> = d
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["event"] == "failed")
        .collect();
    let vpc_failed = failed.iter().find(|e| e["address"] == "vpc.main").unwrap_or_else(|| panic!("{d:?}"));
    assert_eq!(vpc_failed["service"], "ec2", "{vpc_failed}");
    assert_eq!(vpc_failed["operation"], "DeleteVpc", "{vpc_failed}");
    assert_eq!(vpc_failed["error_code"], "DependencyViolation", "{vpc_failed}");
}

#[test]
fn a_refreshing_plan_says_where_ec2_differs_from_the_embedded_catalog() {
    let env = Env::new();
    let training = repo().join("examples/training.toml").to_string_lossy().into_owned();
    let before = env.ok(&["plan", &training]);
    assert!(!before.stdout.contains("differs from gpustack's embedded instance catalog"), "{before:?}");
    let set = env.emu.control("POST", "/_gpustack/instance-types?type=p5.48xlarge&max_efa=16");
    assert_eq!(set["max_efa"], 16, "{set}");
    let r = env.ok(&["plan", &training]);
    let warnings: Vec<&str> = r.stdout.lines().filter(|l| l.contains("differs from gpustack's embedded")).collect();
    assert_eq!(warnings.len(), 1, "{r:?}");
    assert!(warnings[0].starts_with("warning: "), "{r:?}");
    assert!(warnings[0].contains("p5.48xlarge: EC2 in us-west-2 differs"), "{r:?}");
    assert!(warnings[0].contains("(max EFA interfaces 32 → 16); this plan uses EC2's values"), "{r:?}");
    // The live value is the one the plan uses: the EFA layout follows EC2.
    assert!(r.stdout.contains("16 EFA interfaces"), "{r:?}");
    // Offline, the embedded catalog is used as it is.
    let offline = env.ok(&["plan", &training, "--refresh=false"]);
    assert!(offline.stdout.contains("32 EFA interfaces"), "{offline:?}");
    env.emu.control("POST", "/_gpustack/instance-types?reset=1");
}

#[test]
fn an_offline_plan_of_a_new_cluster_refuses_a_version_eks_no_longer_creates() {
    // No state: the cluster is a create. EKS UG kubernetes-versions: no new cluster past the
    // end of extended support (1.29's ended 2026-03-23). The plan raises it, not the load step
    // (review r18 M1).
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(repo().join("examples/inference.toml")).unwrap();
    let old = dir.path().join("old.toml");
    assert!(text.contains("k8s_version = \"1.33\""), "the example's version variable moved");
    std::fs::write(&old, text.replace("k8s_version = \"1.33\"", "k8s_version = \"1.29\"")).unwrap();
    let r =
        bare(dir.path(), &["plan", &old.to_string_lossy(), "--refresh=false", "--var", "admin_cidr=198.51.100.7/32"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("EKS no longer offers Kubernetes 1.29"), "{r:?}");
    assert!(r.stderr.contains("nothing was changed or bought"), "{r:?}");
}

/// The public configurations in tests/seeds (terraform-aws-eks, eksctl, Karpenter's docs, the
/// AWS training and inference blueprints, written as gpustack stacks): each validates with no
/// error and plans offline, so the language keeps saying what platform teams run.
#[test]
fn public_configurations_validate_and_plan_offline() {
    let dir = tempfile::tempdir().unwrap();
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(repo().join("tests/seeds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    seeds.sort();
    assert!(seeds.len() >= 5, "{seeds:?}");
    for file in seeds {
        let path = file.to_string_lossy().into_owned();
        let v = bare(dir.path(), &["validate", &path]);
        assert_eq!(v.code, 0, "validate {path}:\n{}", v.stderr);
        assert!(!v.stderr.contains("error:"), "validate {path}:\n{}", v.stderr);
        let p = bare(dir.path(), &["plan", &path, "--refresh=false"]);
        assert_eq!(p.code, 0, "plan {path}:\n{}", p.stderr);
        assert!(p.stdout.contains("Plan:"), "plan {path}:\n{}", p.stdout);
    }
}
